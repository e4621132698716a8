//! One envoyproxy/ratelimit file read into the descriptor tree, with that service's
//! refusals (`config_impl.go`): an empty or duplicate domain (with `merge_domains`, a
//! second file of a domain adds to it), an empty or duplicate key, a bad unit, a unit
//! beside `unlimited`, `replaces` naming nothing or itself, `share_threshold` without
//! a wildcard; unknown fields and bad YAML as serde and the YAML reader find them.
//! Each names the file, the line and the field. weir's `x-weir` is read here too.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

use super::raw::{RawAlso, RawDescriptor, RawFile, RawRateLimit, RawWeir};
use crate::config::error::ConfigError;
use crate::config::file::AlgorithmName;
use crate::config::lease;
use crate::config::period::Period;
use crate::config::yaml::read_yaml;
use weir_core::{Algorithm, Policy, PolicyError};

use crate::engine::ENVOY_RULE;
use crate::engine::{AlsoLimit, DescriptorLimit, Descriptors, NodeId, Quota, Unit};

/// Reads `text` (the file at `path`) into `descriptors`: one more domain.
pub(super) fn read(
    on_redis: bool,
    text: &str,
    path: &Path,
    descriptors: &mut Descriptors,
) -> Result<(), ConfigError> {
    let fail = |location: Option<Location>, field: &str, message: String| {
        let error = ConfigError::new(path, message).field(field);
        match location {
            Some(location) => error.at(location),
            None => error,
        }
    };
    let empty = text
        .lines()
        .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'));
    if empty {
        return Err(fail(None, "domain", EMPTY_DOMAIN.to_owned()));
    }
    let raw: RawFile = read_yaml(text, path).map_err(in_words)?;
    let Some(domain) = raw.domain.as_ref().filter(|d| !d.value.is_empty()) else {
        let at = raw.domain.as_ref().map(|d| d.referenced);
        return Err(fail(at, "domain", EMPTY_DOMAIN.to_owned()));
    };
    let root = descriptors
        .add_domain(&domain.value)
        .map_err(|e| fail(Some(domain.referenced), "domain", e.to_string()))?;
    let mut reader = Reader {
        path,
        descriptors,
        on_redis,
    };
    let prefix = format!("{}.", domain.value);
    reader.level(
        root,
        &prefix,
        "descriptors",
        raw.descriptors.as_deref().unwrap_or(&[]),
    )
}

const EMPTY_DOMAIN: &str = "config file cannot have empty domain";

/// A reading error in this file's words: the field as written (without the
/// `value` of the `Spanned` wrappers), and a key that is not a string named so.
fn in_words(mut error: ConfigError) -> ConfigError {
    if let Some(field) = &error.field {
        let field = field
            .replace("].value.", "].")
            .replace("rate_limit.value.", "rate_limit.")
            .replace("x-weir.value.", "x-weir.")
            .replace("lease.value.", "lease.");
        error.field = Some(field);
    }
    let unknown = error
        .message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    if let Some(name) = unknown {
        let not_a_string =
            name.parse::<f64>().is_ok() || matches!(name, "true" | "false" | "null" | "~");
        if not_a_string {
            error.message = format!("config error, key is not of type string: {name}");
        }
    }
    error
}

/// How a limit of `x-weir` is decided: its algorithm, period and burst as written.
struct Shape<'a> {
    algorithm: Option<AlgorithmName>,
    period: Option<&'a Spanned<Period>>,
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

struct Reader<'a> {
    path: &'a Path,
    descriptors: &'a mut Descriptors,
    /// Whether the store is Redis (whose scripts bound some policies).
    on_redis: bool,
}

impl Reader<'_> {
    fn fail(&self, location: Location, field: String, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.path, message)
            .at(location)
            .field(field)
    }

    /// The descriptors of one level, under `parent` (`path`: its composite key, as
    /// envoyproxy/ratelimit names it in errors; `field`: where they are in the file).
    fn level(
        &mut self,
        parent: NodeId,
        path: &str,
        field: &str,
        list: &[Spanned<RawDescriptor>],
    ) -> Result<(), ConfigError> {
        for (i, item) in list.iter().enumerate() {
            let field = format!("{field}[{i}]");
            let at = item.referenced;
            let raw = &item.value;
            let key = raw.key.as_deref().unwrap_or_default();
            if key.is_empty() {
                return Err(self.fail(at, format!("{field}.key"), "descriptor has empty key"));
            }
            let value = raw.value.as_deref().filter(|v| !v.is_empty());
            let composite = match value {
                Some(value) => format!("{key}_{value}"),
                None => key.to_owned(),
            };
            if raw.share_threshold == Some(true) && !composite.contains('*') {
                return Err(self.fail(
                    at,
                    format!("{field}.share_threshold"),
                    format!(
                        "share_threshold can only be used with wildcard values (containing '*'), but found key '{composite}'"
                    ),
                ));
            }
            let limit = match &raw.rate_limit {
                Some(limit) => Some(self.limit(limit, &format!("{field}.rate_limit"))?),
                None => None,
            };
            let limit = match (&raw.x_weir, limit) {
                (Some(weir), Some(limit)) => {
                    Some(self.weir(weir, limit, &field, &format!("{path}{composite}"))?)
                }
                (Some(weir), None) => {
                    return Err(self.fail(
                        weir.referenced,
                        format!("{field}.x-weir"),
                        "x-weir needs a rate_limit beside it (its requests_per_unit is the limit)",
                    ));
                }
                (None, limit) => limit,
            };
            let limit = limit.map(|limit| DescriptorLimit {
                shadow_mode: raw.shadow_mode.unwrap_or(false),
                quota_mode: raw.quota_mode.unwrap_or(false),
                ..limit
            });
            let node = self
                .descriptors
                .add(parent, path, key, value, limit)
                .map_err(|e| self.fail(at, format!("{field}.key"), e.to_string()))?;
            if raw.share_threshold == Some(true) {
                self.descriptors.share(node, value.unwrap_or_default());
            }
            let children = raw.descriptors.as_deref().unwrap_or(&[]);
            self.level(
                node,
                &format!("{path}{composite}."),
                &format!("{field}.descriptors"),
                children,
            )?;
        }
        Ok(())
    }

    /// The `rate_limit` decided as its `x-weir` says: the algorithm (`fixed_window` by
    /// default), the period (the unit's by default) and the burst; the limits `also`
    /// counted; the `lease`. `descriptor` is the descriptor's composite key
    /// (`domain.key_value.`), which names a leased descriptor's counters.
    fn weir(
        &self,
        raw: &Spanned<RawWeir>,
        limit: DescriptorLimit,
        field: &str,
        descriptor: &str,
    ) -> Result<DescriptorLimit, ConfigError> {
        let weir = &raw.value;
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
            period: weir.period.as_ref(),
            burst: weir.burst.as_ref(),
        };
        let policy = self.policy(
            &shape,
            fixed.limit(),
            fixed.period(),
            raw.referenced,
            &field,
        )?;
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
            ..limit
        })
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
            period: also.period.as_ref(),
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
        let algorithm = shape
            .algorithm
            .map_or(Algorithm::FixedWindow, Algorithm::from);
        let period = shape.period.map_or(period, |p| p.value.0);
        let burst = shape.burst.map(|b| b.value);
        let policy = Policy::new(algorithm, limit, period, burst).map_err(|error| {
            let located = match error {
                PolicyError::PeriodOutOfRange(_) => shape.period.map(|p| p.referenced),
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

    fn limit(
        &self,
        raw: &Spanned<RawRateLimit>,
        field: &str,
    ) -> Result<DescriptorLimit, ConfigError> {
        let limit = &raw.value;
        let unit = limit.unit.as_ref().map(|u| (Unit::from_name(&u.value), u));
        let mut built = if limit.unlimited.unwrap_or(false) {
            if let Some((Some(_), written)) = unit {
                return Err(self.fail(
                    written.referenced,
                    format!("{field}.unit"),
                    "should not specify rate limit unit when unlimited",
                ));
            }
            DescriptorLimit::unlimited()
        } else {
            match unit {
                Some((Some(unit), _)) => {
                    DescriptorLimit::counted(limit.requests_per_unit.unwrap_or(0), unit)
                }
                Some((None, written)) => {
                    return Err(self.fail(
                        written.referenced,
                        format!("{field}.unit"),
                        format!(
                            "invalid rate limit unit '{}': use second, minute, hour, day, week, month or year",
                            written.value
                        ),
                    ));
                }
                None => {
                    return Err(self.fail(
                        raw.referenced,
                        format!("{field}.unit"),
                        "invalid rate limit unit '': use second, minute, hour, day, week, month or year",
                    ));
                }
            }
        };
        built.name = limit.name.clone().filter(|n| !n.is_empty());
        for (i, replaces) in limit.replaces.iter().flatten().enumerate() {
            let name = replaces.value.name.clone().unwrap_or_default();
            let field = format!("{field}.replaces[{i}].name");
            if name.is_empty() {
                return Err(self.fail(
                    replaces.referenced,
                    field,
                    "should not have an empty replaces entry",
                ));
            }
            if Some(&name) == limit.name.as_ref() {
                return Err(self.fail(
                    replaces.referenced,
                    field,
                    "replaces should not contain name of same descriptor",
                ));
            }
            built.replaces.push(name);
        }
        Ok(built)
    }
}
