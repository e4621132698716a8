//! `x-weir` beside a descriptor's `rate_limit`: weir's additions read into its
//! [`DescriptorLimit`]: any algorithm, period and burst, more limits (`also`), a
//! failure policy and a lease.

use std::borrow::Cow;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};
use weir_core::{Algorithm, Policy, PolicyError};

use super::file::Reader;
use super::raw::{RawAlso, RawWeir};
use crate::config::bans::{self, RawOnLimited};
use crate::config::calendar;
use crate::config::error::ConfigError;
use crate::config::file::AlgorithmName;
use crate::config::lease;
use crate::engine::{AlsoLimit, DescriptorLimit, ENVOY_RULE, OnLimited, Quota, Unit};

/// How a limit of `x-weir` is decided: its algorithm, period and burst as written.
struct Shape<'a> {
    algorithm: Option<AlgorithmName>,
    /// The period written, and where.
    period: Option<(Duration, Location)>,
    burst: Option<&'a Spanned<u64>>,
}

/// The rule a leased descriptor's counters are kept under: `envoy.l` and 16 hex
/// digits of the SHA-256 of its composite key (a rule name of weir's characters,
/// the same on every instance and across reloads).
fn leased_rule(descriptor: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(descriptor.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{ENVOY_RULE}.l{hex}")
}

impl Reader<'_> {
    /// The `rate_limit` decided as its `x-weir` says: the algorithm (`fixed_window` by
    /// default), the period (the unit's by default) and the burst; the limits `also`
    /// counted; the `lease`; the bans (`on_limited`). `descriptor` is the descriptor's
    /// composite key (`domain.key_value.`), which names a leased descriptor's
    /// counters; `keys` are the keys of its entries.
    pub(super) fn weir(
        &self,
        raw: &Spanned<RawWeir>,
        limit: DescriptorLimit,
        field: &str,
        descriptor: &str,
        keys: &[&str],
    ) -> Result<DescriptorLimit, ConfigError> {
        let weir = &raw.value;
        let on_limited = match &weir.on_limited {
            Some(on) => Some(self.on_limited(on, &limit, field, keys)?),
            None => None,
        };
        if let (Some(lease), Some(_)) = (&weir.lease, &on_limited) {
            return Err(self.fail(
                lease.referenced,
                format!("{field}.x-weir.lease"),
                "a descriptor with `on_limited` is never leased: its bans must see every denial on the shared store at once, not from units an instance holds",
            ));
        }
        let field = format!("{field}.x-weir");
        let Quota::Counted(fixed) = limit.quota else {
            return Err(self.fail(
                raw.referenced,
                field,
                "x-weir applies to a counted limit: not to `unlimited` or 0 requests_per_unit",
            ));
        };
        let shape = Shape {
            algorithm: weir.algorithm,
            period: weir
                .period
                .as_ref()
                .map(|p| (p.value.nominal(), p.referenced)),
            burst: weir.burst.as_ref(),
        };
        let policy = self.policy(
            &shape,
            fixed.limit(),
            fixed.period(),
            raw.referenced,
            &field,
        )?;
        // A calendar period (in a time zone, from a start) as a rule's.
        let policy = match &weir.period {
            Some(period) => calendar::on_calendar_of(
                weir.time_zone.as_ref(),
                weir.starts.as_ref(),
                period,
                policy,
            ),
            None => match (&weir.time_zone, &weir.starts) {
                (Some(zone), _) => Err(calendar::not_calendar(zone.referenced, "time_zone")),
                (None, Some(starts)) => Err(calendar::not_calendar(starts.referenced, "starts")),
                (None, None) => Ok(policy),
            },
        }
        .map_err(|(at, name, message)| self.fail(at, format!("{field}.{name}"), message))?;
        // A leased descriptor's counters are its own rule's (the leasing store leases
        // by rule), named by the descriptor, so that a reload keeps them.
        let rule = match &weir.lease {
            Some(_) => Cow::Owned(leased_rule(descriptor)),
            None => limit.rule.clone(),
        };
        let mut also = Vec::new();
        for (i, item) in weir.also.iter().flatten().enumerate() {
            let field = format!("{field}.also[{i}]");
            also.push(self.also(item, &field, format!("{rule}.{}", i + 1))?);
        }
        let lease = match &weir.lease {
            Some(lease) => {
                // Every limit of the descriptor is leased: each must be leasable.
                let policies = std::iter::once(&policy).chain(also.iter().map(|a| &a.policy));
                let mut plan = None;
                for (i, policy) in policies.enumerate() {
                    let planned = lease::plan(&lease.value, policy).map_err(|message| {
                        let message = match i {
                            0 => message,
                            i => format!("also[{}] (a lease leases every limit): {message}", i - 1),
                        };
                        self.fail(lease.referenced, format!("{field}.lease"), message)
                    })?;
                    plan = Some(planned);
                }
                plan
            }
            None => None,
        };
        Ok(DescriptorLimit {
            quota: Quota::Counted(policy),
            fail_open: weir
                .failure
                .map(|failure| matches!(failure, super::raw::RawFailure::Open)),
            also,
            rule,
            lease,
            on_limited,
            ..limit
        })
    }

    /// `x-weir: { on_limited }` checked: the limit named (the name is how operators
    /// list and lift its bans), and its entries holding the client's address. Not a
    /// weapon: a ban on values a caller merely writes (an account, an API key) would
    /// let anyone ban a real user by failing in their name.
    fn on_limited(
        &self,
        raw: &Spanned<RawOnLimited>,
        limit: &DescriptorLimit,
        field: &str,
        keys: &[&str],
    ) -> Result<OnLimited, ConfigError> {
        let at = raw.referenced;
        let here = format!("{field}.x-weir.on_limited");
        if raw.value.has_status() {
            return Err(self.fail(
                at,
                format!("{here}.status"),
                "an Envoy descriptor's ban is answered OVER_LIMIT: `status` is for the HTTP doors' rules",
            ));
        }
        let Some(name) = &limit.name else {
            return Err(self.fail(
                at,
                format!("{field}.rate_limit.name"),
                "a descriptor limit with `on_limited` needs a `name` in its `rate_limit`: its bans are listed and lifted by it (`/admin/api/bans/{name}/{key}`)",
            ));
        };
        if !keys.contains(&self.address) {
            return Err(self.fail(
                at,
                here,
                format!(
                    "a ban on the entries `{}` alone would let anyone ban a real user by failing in their name: put the descriptor under (or over) an entry `{}` (Envoy's `remote_address` action; the key is `envoy.caller.address`), so a ban stops one client",
                    keys.join(", "),
                    self.address
                ),
            ));
        }
        bans::checked(&format!("{ENVOY_RULE}/{name}"), &raw.value, 429).map_err(
            |(name, message)| {
                let field = match name {
                    "" => here.clone(),
                    name => format!("{here}.{name}"),
                };
                self.fail(at, field, message)
            },
        )
    }

    /// One of `x-weir: { also }`: `requests_per_unit` (1 or more) per `unit`, decided
    /// as its `algorithm`, `period` and `burst` say, its counter kept under `rule`.
    fn also(
        &self,
        raw: &Spanned<RawAlso>,
        field: &str,
        rule: String,
    ) -> Result<AlsoLimit, ConfigError> {
        let also = &raw.value;
        let unit = match &also.unit {
            Some(written) => Unit::from_name(&written.value).ok_or_else(|| {
                self.fail(
                    written.referenced,
                    format!("{field}.unit"),
                    format!(
                        "invalid rate limit unit '{}': use second, minute, hour, day, week, month or year",
                        written.value
                    ),
                )
            })?,
            None => {
                return Err(self.fail(
                    raw.referenced,
                    format!("{field}.unit"),
                    "each limit of `also` needs a unit (second, minute, hour, day, week, month or year): it is reported to Envoy",
                ));
            }
        };
        let requests_per_unit = also.requests_per_unit.filter(|&n| n > 0).ok_or_else(|| {
            self.fail(
                raw.referenced,
                format!("{field}.requests_per_unit"),
                "each limit of `also` needs a requests_per_unit of 1 or more",
            )
        })?;
        let shape = Shape {
            algorithm: also.algorithm,
            period: also.period.as_ref().map(|p| (p.value.0, p.referenced)),
            burst: also.burst.as_ref(),
        };
        let limit = u64::from(requests_per_unit).min(weir_core::MAX_LIMIT);
        let policy = self.policy(&shape, limit, unit.period(), raw.referenced, field)?;
        Ok(AlsoLimit {
            requests_per_unit,
            unit,
            name: also.name.clone().filter(|n| !n.is_empty()),
            policy,
            rule,
        })
    }

    /// The policy of `limit` per `period` (unless `shape` names another) as `shape`
    /// says, checked for the store.
    fn policy(
        &self,
        shape: &Shape<'_>,
        limit: u64,
        period: Duration,
        at: Location,
        field: &str,
    ) -> Result<Policy, ConfigError> {
        let algorithm = match shape.algorithm {
            None => Algorithm::FixedWindow,
            Some(name) => name.rate().ok_or_else(|| {
                self.fail(
                    at,
                    format!("{field}.algorithm"),
                    "`concurrency` cannot limit an Envoy descriptor: Envoy asks before a request and never says when it ends, so a slot taken could not be released (use a gateway rule)",
                )
            })?,
        };
        let period = shape.period.map_or(period, |(written, _)| written);
        let burst = shape.burst.map(|b| b.value);
        let policy = Policy::new(algorithm, limit, period, burst).map_err(|error| {
            let located = match error {
                PolicyError::PeriodOutOfRange(_) => shape.period.map(|(_, at)| at),
                PolicyError::BurstOutOfRange(_) | PolicyError::BurstNotApplicable(_) => {
                    shape.burst.map(|b| b.referenced)
                }
                _ => None,
            };
            self.fail(located.unwrap_or(at), field.to_owned(), error.to_string())
        })?;
        if self.on_redis {
            weir_store::check_redis_policy(&policy)
                .map_err(|e| self.fail(at, field.to_owned(), e.to_string()))?;
        }
        Ok(policy)
    }
}
