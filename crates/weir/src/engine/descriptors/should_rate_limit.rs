//! `ShouldRateLimit` decided: each descriptor's limit looked up, `replaces` applied,
//! the counted ones checked on the store in one call, and the statuses composed as
//! envoyproxy/ratelimit composes them.
//!
//! Store keys: rule [`RULE`], identity the domain and the request's entries
//! (`domain|key=value|key=value`, with `\`, `|` and `=` escaped), so that a wildcard
//! or value-less descriptor counts per value, as in envoyproxy/ratelimit, and no two
//! descriptors share a key unless their entries are the same. A descriptor's further
//! limits (`x-weir: { also }`) are kept under `envoy.1`, `envoy.2`, ... (one identity,
//! so one Redis Cluster slot: one store call); a leased descriptor's under a rule of
//! its own (`envoy.l` and a hash of the descriptor), which the leasing store leases.

use std::borrow::Cow;
use std::time::Duration;

use weir_core::Decision;
use weir_store::{Check, Key, Store, StoreError};

use super::bans;
use super::groups::{self, Charge, Group};
use super::lists::{Listed, denied_status};
use super::{
    CurrentLimit, DescriptorAnswer, DescriptorLimit, Descriptors, EnvoyAnswer, EnvoyAsk,
    PerDescriptor, Quota, also,
};
use crate::engine::{Engine, key};
use crate::metrics::EnvoyOutcome;

/// The rule name the descriptors' counters are kept under.
pub(crate) const RULE: &str = "envoy";

impl Engine {
    /// Decides a `ShouldRateLimit` request against `limits`. An unknown domain, or a
    /// descriptor that matches no limit, is OK. A store that cannot decide is an
    /// error: the door answers `UNAVAILABLE`, and Envoy's own failure mode decides.
    pub(crate) async fn should_rate_limit(
        &self,
        limits: &Descriptors,
        ask: &EnvoyAsk<'_>,
    ) -> Result<EnvoyAnswer, StoreError> {
        let listed = self.envoy_listed(limits, ask);
        if listed == Listed::Denied {
            for _ in &ask.descriptors {
                self.metrics.envoy_descriptor(EnvoyOutcome::OverLimit);
            }
            return Ok(EnvoyAnswer {
                over_limit: !limits.shadow_mode,
                statuses: ask.descriptors.iter().map(|_| denied_status()).collect(),
            });
        }
        // An allowed caller: counted, reported, never over (nor banned).
        let allowed = listed == Listed::Allowed;
        let (mut applied, shared) = applied(limits, ask);
        // A key only for the descriptors that can be over their limit.
        let keys: PerDescriptor<String> = ask
            .descriptors
            .iter()
            .zip(&applied)
            .zip(&shared)
            .map(
                |((d, limit), shared)| match limit.as_deref().map(|l| l.quota) {
                    Some(Quota::Counted(_) | Quota::Zero) => {
                        key::stored(identity(ask.domain, &d.entries, shared))
                    }
                    _ => String::new(),
                },
            )
            .collect();
        // A named limit's override for the descriptor's key (`weir override set`).
        self.descriptor_overrides(&mut applied, &keys);
        // The descriptors banned (`x-weir: { on_limited }`): over, charging nothing.
        let ban_keys = self.ban_keys(limits, ask, &applied, &shared);
        let banned = match self
            .descriptor_bans(limits, &applied, &ban_keys, allowed)
            .await
        {
            Ok(banned) => banned,
            Err(error) => {
                for _ in applied.iter().flatten() {
                    self.metrics.envoy_descriptor(EnvoyOutcome::Unavailable);
                }
                self.log_unavailable(&error, ask.domain);
                return Err(error);
            }
        };
        // Every counted limit, as (descriptor, policy, rule): a descriptor's own, then
        // its `also`, so that each descriptor's decisions come in its limits' order.
        let counted = |group: Group| {
            applied
                .iter()
                .enumerate()
                .filter(|&(i, _)| banned[i].is_none())
                .filter_map(|(i, limit)| Some((i, limit.as_deref()?)))
                .filter(move |(_, limit)| Group::of(limits, limit) == group)
                .flat_map(|(i, limit)| {
                    limit
                        .counters()
                        .map(move |(policy, rule)| (i, policy, rule))
                })
        };
        // Whether a descriptor is over the limit, from its decisions so far.
        let over = |i: usize, decided: &[Decision]| {
            applied[i].as_deref().is_some_and(|l| {
                !l.shadow_mode
                    && (banned[i].is_some()
                        || match l.quota {
                            Quota::Zero => ask.descriptors[i].hits > 0,
                            Quota::Counted(_) => decided.iter().any(|d| !d.allowed),
                            Quota::Unlimited => false,
                        })
            })
        };
        // With all-or-nothing, a descriptor whose limit is zero, or that is banned,
        // denies the request outright (unless it is a quota descriptor): the others
        // are looked at, not charged.
        let zero_denies = limits.all_or_nothing
            && applied.iter().enumerate().any(|(i, limit)| {
                let limit = limit.as_deref();
                limit.is_some_and(|l| {
                    (l.quota == Quota::Zero || banned[i].is_some())
                        && !groups::is_quota(limits, Some(l))
                }) && over(i, &[])
            });
        // Each descriptor's decisions, one per counted limit (none: not decided).
        let mut decisions: PerDescriptor<Decided> = std::iter::repeat_with(Decided::new)
            .take(applied.len())
            .collect();
        let mut fell_back = false;
        // All-or-nothing binds the enforcing limits together; quota and shadow limits
        // are counted apart, so that they never hold the others back.
        for &group in Group::order(limits) {
            let indexes: PerDescriptor<usize> = counted(group).map(|(i, ..)| i).collect();
            let checks: PerDescriptor<Check<'_>> = counted(group)
                .map(|(i, policy, rule)| Check {
                    key: Key {
                        rule,
                        identity: &keys[i],
                    },
                    policy,
                    cost: ask.descriptors[i].hits,
                })
                .collect();
            if checks.is_empty() {
                continue;
            }
            // Every quota descriptor over (decided first) denies the request too.
            let quotas_over = || {
                let mut quotas = (0..applied.len())
                    .filter(|&i| groups::is_quota(limits, applied[i].as_deref()))
                    .peekable();
                quotas.peek().is_some() && quotas.all(|i| over(i, &decisions[i]))
            };
            let look = group == Group::Enforcing && (zero_denies || quotas_over());
            let charge = group.charge();
            // Decided on the fallback only if every descriptor counted here fails open.
            let open = indexes.iter().all(|&i| {
                applied[i]
                    .as_deref()
                    .and_then(|l| l.fail_open)
                    .unwrap_or(limits.fail_open)
            });
            let decided = if look {
                self.store.preview_all(&checks).await
            } else {
                self.decide_checks(self.store.as_ref(), &checks, charge)
                    .await
            };
            let decided = match decided {
                Ok(decided) => decided,
                Err(error) => match self
                    .on_fallback(limits, &checks, error, look, open, charge)
                    .await
                {
                    Ok(decided) => {
                        fell_back = true;
                        decided
                    }
                    Err(error) => {
                        for _ in &checks {
                            self.metrics.envoy_descriptor(EnvoyOutcome::Unavailable);
                        }
                        self.log_unavailable(&error, ask.domain);
                        return Err(error);
                    }
                },
            };
            for (i, decision) in indexes.into_iter().zip(decided) {
                decisions[i].push(decision);
            }
        }
        let mut statuses: Vec<DescriptorAnswer> = applied
            .iter()
            .zip(&decisions)
            .zip(&ask.descriptors)
            .zip(&banned)
            .map(
                |(((limit, decided), asked), banned)| match (limit.as_deref(), banned) {
                    (Some(limit), Some(left)) => bans::banned_status(limit, *left),
                    (limit, _) => self.status(limit, decided, asked.hits),
                },
            )
            .collect();
        // Denied by its own limits (not banned already): a denial toward a ban.
        let denied = |i: usize| {
            !allowed && banned[i].is_none() && ask.descriptors[i].hits > 0 && over(i, &decisions[i])
        };
        let store: &dyn Store = match self.fallback_store() {
            Some(fallback) if fell_back => fallback,
            _ => self.store.as_ref(),
        };
        self.count_descriptor_denials(store, &applied, denied, &ban_keys)
            .await;
        for ((status, limit), decided) in statuses.iter().zip(&applied).zip(&decisions) {
            let outcome = match limit.as_deref().map(|l| (l.quota, l.shadow_mode)) {
                None => EnvoyOutcome::NoLimit,
                Some((Quota::Unlimited, _)) => EnvoyOutcome::Unlimited,
                _ if status.over_limit && !allowed => EnvoyOutcome::OverLimit,
                _ if allowed && decided.iter().any(|d| !d.allowed) => EnvoyOutcome::ShadowOverLimit,
                Some((_, true)) if decided.iter().any(|d| !d.allowed) => {
                    EnvoyOutcome::ShadowOverLimit
                }
                _ if fell_back && !decided.is_empty() => EnvoyOutcome::Fallback,
                _ => EnvoyOutcome::Ok,
            };
            self.metrics.envoy_descriptor(outcome);
        }
        for (status, key) in statuses.iter().zip(&keys) {
            if status.over_limit {
                // At info, at most once a minute per key (and 20 a second in all).
                self.log_denial(RULE, key, None, None, "ShouldRateLimit: over the limit");
            }
        }
        let answered = applied.iter().map(Option::as_deref).zip(&statuses);
        let over_limit = !limits.shadow_mode && !allowed && groups::over_limit(limits, answered);
        if allowed {
            for status in &mut statuses {
                status.over_limit = false;
            }
        }
        Ok(EnvoyAnswer {
            over_limit,
            statuses,
        })
    }

    /// The checks decided on the store: together, or (`all_or_nothing` off) each on
    /// its own, as envoyproxy/ratelimit charges every descriptor that is within its
    /// limit. One store call when all pass; when one is over, the others are charged
    /// one by one.
    ///
    /// Charged as there, a descriptor over its limit also spends what its window had
    /// left: envoyproxy/ratelimit counts hits past the limit, so after an over-limit
    /// answer every hit is over until the window ends, however few the hits; a hit
    /// of several units (`hits_addend`) that did not fit must not leave room for
    /// smaller ones. (weir's fixed window never counts past its limit, so it fills
    /// it instead; a look, 0 hits, at a full window is OK with 0 remaining, where
    /// envoyproxy/ratelimit, counting past, says over.)
    async fn decide_checks(
        &self,
        store: &dyn Store,
        checks: &[Check<'_>],
        charge: Charge,
    ) -> Result<Vec<Decision>, StoreError> {
        let mut decisions = store.check_all(checks).await?;
        if charge == Charge::Together || decisions.iter().all(|d| d.allowed) {
            return Ok(decisions);
        }
        // Nothing was consumed: charge the ones that passed, fill the ones that did not.
        for (check, decision) in checks.iter().zip(decisions.iter_mut()) {
            if decision.allowed && check.cost > 0 {
                *decision = store.check(check.key, check.policy, check.cost).await?;
            } else if charge == Charge::EachFilled
                && !decision.allowed
                && check.cost > 0
                && decision.remaining > 0
            {
                store
                    .check(check.key, check.policy, decision.remaining)
                    .await?;
            }
        }
        Ok(decisions)
    }

    /// Logs that the store could not decide a request of `domain`, at most every 10 s
    /// (an outage would otherwise log every request), with the domain cut to 64
    /// characters (it is whatever the client sent).
    fn log_unavailable(&self, error: &StoreError, domain: &str) {
        if self.unavailable_logged.due(self.clock.now()) {
            let domain: String = domain.chars().take(64).collect();
            tracing::warn!(%error, domain = %domain.escape_debug(), "ShouldRateLimit: the store cannot decide; answering UNAVAILABLE (logged at most every 10 s)");
        }
    }

    /// The checks the shared store could not decide (`error`), decided on this
    /// instance's local fallback with its share of each limit when their descriptors
    /// fail `open` and the error is an outage (only looked at, with `look`: a request
    /// another descriptor denies outright); else the error.
    async fn on_fallback(
        &self,
        limits: &Descriptors,
        checks: &[Check<'_>],
        error: StoreError,
        look: bool,
        open: bool,
        charge: Charge,
    ) -> Result<Vec<Decision>, StoreError> {
        let fallback = self
            .fallback_store()
            .filter(|_| open && error.is_unavailable());
        let Some(fallback) = fallback else {
            return Err(error);
        };
        self.log_fallback(&error);
        let shares: Vec<Quota> = checks
            .iter()
            .map(|c| Quota::Counted(*c.policy).share(limits.fallback_instances))
            .collect();
        let mut decisions = Vec::with_capacity(checks.len());
        let mut shared = Vec::with_capacity(checks.len());
        for (check, share) in checks.iter().zip(&shares) {
            match share {
                Quota::Counted(policy) => shared.push(Check { policy, ..*check }),
                // A share of nothing (never: a limit of 1 or more shares to 1 or more).
                _ => shared.push(*check),
            }
        }
        let decided = if look {
            fallback.preview_all(&shared).await?
        } else {
            self.decide_checks(fallback, &shared, charge).await?
        };
        decisions.extend(decided);
        Ok(decisions)
    }

    /// One descriptor's status from its limit and the store's decisions (one per
    /// counted limit, in order): the most constraining of them is reported.
    fn status(
        &self,
        limit: Option<&DescriptorLimit>,
        decided: &[Decision],
        hits: u64,
    ) -> DescriptorAnswer {
        let Some(limit) = limit else {
            return DescriptorAnswer::no_limit();
        };
        let mut reported = CurrentLimit {
            name: limit.name.clone().unwrap_or_default(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
        };
        let (over, remaining, until_reset) = match (limit.quota, decided) {
            (Quota::Unlimited, _) => return DescriptorAnswer::unlimited(),
            (Quota::Counted(own), [_, ..]) => {
                let binding = also::binding(decided);
                let d = decided[binding];
                let policy = match binding.checked_sub(1).and_then(|j| limit.also.get(j)) {
                    Some(also) => {
                        reported = CurrentLimit {
                            name: also.name.clone().unwrap_or(reported.name),
                            requests_per_unit: also.requests_per_unit,
                            unit: also.unit,
                        };
                        also.policy
                    }
                    None => own,
                };
                // A fixed window's end, even when nothing is counted in it yet (as
                // envoyproxy/ratelimit reports it); other algorithms' own time to full.
                let fixed = policy.algorithm() == weir_core::Algorithm::FixedWindow;
                // The window of the policy's own period (an `x-weir` period may differ
                // from the unit's).
                let left = if d.reset_after.is_zero() && fixed {
                    self.window_left(&policy)
                } else {
                    d.reset_after
                };
                let until = d.retry_after.unwrap_or(left);
                let remaining = u32::try_from(d.remaining).unwrap_or(u32::MAX);
                (!d.allowed, if d.allowed { remaining } else { 0 }, until)
            }
            // A zero limit, or (never) a counted one left undecided.
            _ => (hits > 0, 0, self.epoch_window_left(limit.unit.period())),
        };
        DescriptorAnswer {
            over_limit: over && !limit.shadow_mode,
            limit: Some(reported),
            remaining,
            until_reset: Some(until_reset),
        }
    }

    /// What is left of `policy`'s window holding now (its calendar's, or its period
    /// cut from the epoch).
    fn window_left(&self, policy: &weir_core::Policy) -> Duration {
        let now = self.clock.now();
        Duration::from_nanos(policy.window(now).end.saturating_sub(now))
    }

    /// What is left of the current window of `period` (windows aligned to the epoch).
    fn epoch_window_left(&self, period: Duration) -> Duration {
        let period = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
        Duration::from_nanos(period - self.clock.now() % period)
    }
}

/// Each descriptor's limit: the one it was sent with, else the configuration's (an
/// unknown domain has none, whatever was sent, as upstream answers it); an unlimited
/// one stays (it is answered as such); a named limit that another matched limit
/// `replaces` is dropped. With each, the entries a `share_threshold` wildcard matched
/// (their places, and the wildcard value they are counted as).
fn applied<'l>(
    limits: &'l Descriptors,
    ask: &EnvoyAsk<'_>,
) -> (Vec<Applied<'l>>, PerDescriptor<Shared<'l>>) {
    let (mut applied, shared): (Vec<Applied<'l>>, PerDescriptor<Shared<'l>>) = ask
        .descriptors
        .iter()
        .map(|d| match d.limit {
            _ if !limits.has_domain(ask.domain) => (None, Vec::new()),
            Some((requests_per_unit, unit)) => (
                Some(Cow::Owned(DescriptorLimit::counted(
                    requests_per_unit,
                    unit,
                ))),
                Vec::new(),
            ),
            None => match limits.find(ask.domain, d.entries.iter().copied()) {
                Some((limit, shared)) => (Some(Cow::Borrowed(limit)), shared),
                None => (None, Vec::new()),
            },
        })
        .unzip();
    let replaced: Vec<String> = applied
        .iter()
        .flatten()
        .flat_map(|limit| limit.replaces.iter().cloned())
        .collect();
    if !replaced.is_empty() {
        for slot in &mut applied {
            let drop = slot.as_deref().is_some_and(|limit| {
                limit.quota != Quota::Unlimited
                    && limit
                        .name
                        .as_ref()
                        .is_some_and(|name| replaced.contains(name))
            });
            if drop {
                *slot = None;
            }
        }
    }
    (applied, shared)
}

/// A descriptor's limit, if one applies.
type Applied<'l> = Option<Cow<'l, DescriptorLimit>>;

/// A descriptor's decisions, one per counted limit (its own, then its `also`).
type Decided = smallvec::SmallVec<[Decision; 2]>;

/// The entries of a descriptor a `share_threshold` wildcard matched: their places, and
/// the wildcard value each is counted as.
type Shared<'l> = Vec<(usize, &'l str)>;

/// The identity a descriptor's counter is kept under: the domain and the entries,
/// escaped so that different entries never meet. An entry a `share_threshold`
/// wildcard matched is written as the wildcard (`key==files/*`: the second `=`,
/// unescaped, is never an escaped value's), so every value it matches shares one
/// counter, apart from any value written so.
pub(super) fn identity(domain: &str, entries: &[(&str, &str)], shared: &[(usize, &str)]) -> String {
    let mut out = String::with_capacity(domain.len() + entries.len() * 16);
    escape(&mut out, domain);
    for (i, (key, value)) in entries.iter().enumerate() {
        out.push('|');
        escape(&mut out, key);
        out.push('=');
        match shared.iter().find(|(at, _)| *at == i) {
            Some((_, pattern)) => {
                out.push('=');
                escape(&mut out, pattern);
            }
            None => escape(&mut out, value),
        }
    }
    out
}

fn escape(out: &mut String, text: &str) {
    // Run by run between the characters escaped (usually none): not char by char.
    let mut rest = text;
    while let Some(at) = rest.find(['\\', '|', '=']) {
        out.push_str(&rest[..at]);
        out.push('\\');
        out.push_str(&rest[at..=at]);
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_never_meet() {
        assert_eq!(identity("d", &[("k", "v")], &[]), "d|k=v");
        assert_ne!(
            identity("d", &[("a", "b|c=d")], &[]),
            identity("d", &[("a", "b"), ("c", "d")], &[])
        );
        assert_ne!(identity("d|a", &[], &[]), identity("d", &[("a", "")], &[]));
        // A shared wildcard is not the value written as it.
        assert_eq!(identity("d", &[("k", "x1")], &[(0, "x*")]), "d|k==x*");
        assert_ne!(
            identity("d", &[("k", "x1")], &[(0, "x*")]),
            identity("d", &[("k", "=x*")], &[])
        );
    }
}
