//! Bans (`on_limited` on a rule): a key the rule denied `after` times within `within`
//! is refused for `ban`, whatever its budget, through every door.
//!
//! The state lives in the store the rule decides on, under two more keys per caller,
//! like a lockout's: `<rule>/denials` (the denials, a sliding log of `after` per
//! `within`) and `<rule>/ban` (the ban in force: one unit of a GCRA of one per `ban`,
//! taken when the ban starts, so the key reads "empty" until the ban's end). Each is
//! one atomic store step (a Lua script on Redis), so instances sharing a Redis agree:
//! the `after`-th denial, wherever it happens, starts the one ban, and its end is the
//! store's. Rule names cannot hold `/`, so these keys never meet a configured rule's.
//!
//! A banned key's requests cost no full check: each instance keeps the bans it met in
//! a bounded cache ([`MAX_CACHED_BANS`] keys) and trusts an entry for
//! [`BAN_FRESH_FOR`]; then one probe of the ban key (no budget spent) refreshes it. So
//! a ban lifted on one instance is lifted on every other within that time, and a ban
//! started anywhere is seen on the very next request (the probe rides in the same
//! store step as the check). A full cache only means more probes, never a missed ban.
//! On a shared store, the bans are listed fleet-wide from a ledger (`ban_ledger`).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use weir_core::{Algorithm, Decision, Policy, PolicyError};
use weir_store::{Check, Key, Store, StoreError};

use super::applied::Applied;
use super::{Engine, Rule, RuleDecision, key};
use crate::metrics::StoreOp;

/// How long an instance trusts a ban it cached before it reads the store again: a ban
/// lifted elsewhere stops being enforced here within this time.
pub(crate) const BAN_FRESH_FOR: Duration = Duration::from_millis(500);

/// The most bans one instance caches (about 100 bytes each): past it, the bans not
/// cached are read from the store on each request (one probe, no full check).
pub(crate) const MAX_CACHED_BANS: usize = 10_000;

/// The most denials `after` may count (the sliding log's cap keeps a key's state small).
pub(crate) const MAX_BAN_AFTER: u64 = 1_000;

/// A rule's `on_limited`: ban a key it denied `after` times within `within`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OnLimited {
    /// How long a ban lasts.
    pub ban: Duration,
    /// How many denials start one.
    pub after: u64,
    /// Within how long.
    pub within: Duration,
    /// The status a banned key's requests are answered with: 429 or 403.
    pub status: u16,
    /// The rule name of the key holding the ban in force.
    pub ban_rule: String,
    /// The rule name of the key counting denials.
    pub denials_rule: String,
    /// Marks (cost 1) and reads (cost 0) the ban in force.
    pub marker: Policy,
    /// Counts the denials.
    pub counter: Policy,
}

impl OnLimited {
    /// The bans of rule `rule`, made once at load.
    pub(crate) fn new(
        rule: &str,
        ban: Duration,
        after: u64,
        within: Duration,
        status: u16,
    ) -> Result<Self, PolicyError> {
        Ok(Self {
            ban,
            after,
            within,
            status,
            ban_rule: format!("{rule}/ban"),
            denials_rule: format!("{rule}/denials"),
            marker: Policy::new(Algorithm::Gcra, 1, ban, None)?,
            counter: Policy::new(Algorithm::SlidingLog, after, within, None)?,
        })
    }

    /// The probe of the ban in force for `identity` (cost 0: reads only).
    pub(super) fn probe<'a>(&'a self, identity: &'a str) -> Check<'a> {
        Check {
            key: Key {
                rule: &self.ban_rule,
                identity,
            },
            policy: &self.marker,
            cost: 0,
        }
    }

    /// How long the ban a probe read still lasts (`None`: no ban in force).
    pub(super) fn remaining(probe: &Decision) -> Option<Duration> {
        (probe.remaining == 0 && !probe.reset_after.is_zero()).then_some(probe.reset_after)
    }
}

/// The decision reported for a rule whose key is banned for `left`: nothing remains
/// until the ban's end, which is when a retry can succeed.
pub(super) fn banned_decision(policy: &Policy, left: Duration) -> Decision {
    Decision {
        allowed: false,
        limit: policy.limit(),
        remaining: 0,
        reset_after: left,
        retry_after: Some(left),
        delay: Duration::ZERO,
    }
}

/// One ban as an instance knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BanView {
    /// The rule.
    pub rule: String,
    /// The key, as stored.
    pub key: String,
    /// How long it still lasts.
    pub left: Duration,
}

/// The bans this instance met, bounded (see the module's documentation).
#[derive(Debug, Default)]
pub(super) struct BanCache {
    /// By rule, then key.
    bans: Mutex<HashMap<String, HashMap<String, Cached>>>,
}

/// A ban as cached (times in ns).
#[derive(Debug, Clone, Copy)]
struct Cached {
    /// When it ends.
    until: u64,
    /// When the store last said so.
    seen: u64,
}

impl BanCache {
    /// When the ban of `key` under `rule` ends, if one is cached, fresh and in force.
    pub(super) fn get(&self, rule: &str, key: &str, now: u64) -> Option<u64> {
        let bans = self.bans.lock();
        let ban = *bans.get(rule)?.get(key)?;
        let fresh = now.saturating_sub(ban.seen) < nanos(BAN_FRESH_FOR);
        (fresh && ban.until > now).then_some(ban.until)
    }

    /// Remembers that `key` is banned under `rule` until `until`, as read at `now`.
    pub(super) fn put(&self, rule: &str, key: &str, until: u64, now: u64) {
        let mut bans = self.bans.lock();
        let size: usize = bans.values().map(HashMap::len).sum();
        if size >= MAX_CACHED_BANS {
            for keys in bans.values_mut() {
                keys.retain(|_, ban| ban.until > now);
            }
            if bans.values().map(HashMap::len).sum::<usize>() >= MAX_CACHED_BANS {
                return;
            }
        }
        bans.entry(rule.to_owned())
            .or_default()
            .insert(key.to_owned(), Cached { until, seen: now });
    }

    /// Forgets the ban of `key` under `rule` (lifted, or found over).
    pub(super) fn forget(&self, rule: &str, key: &str) {
        if let Some(keys) = self.bans.lock().get_mut(rule) {
            keys.remove(key);
        }
    }

    /// The bans in force, of `rule` or of every rule, longest first.
    pub(super) fn list(&self, rule: Option<&str>, now: u64) -> Vec<BanView> {
        let bans = self.bans.lock();
        let mut list: Vec<BanView> = bans
            .iter()
            .filter(|(name, _)| rule.is_none_or(|r| r == name.as_str()))
            .flat_map(|(name, keys)| {
                keys.iter()
                    .filter(|(_, ban)| ban.until > now)
                    .map(|(key, ban)| BanView {
                        rule: name.clone(),
                        key: key.clone(),
                        left: Duration::from_nanos(ban.until - now),
                    })
            })
            .collect();
        list.sort_by(|a, b| b.left.cmp(&a.left).then_with(|| a.key.cmp(&b.key)));
        list
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

impl Engine {
    /// The quotas of the enforcing rules whose key this instance knows is banned now
    /// (from its cache: no store step), or `None` when it knows of no ban.
    pub(super) fn banned_here<'e>(
        &self,
        enforced: &[Applied<'e>],
    ) -> Option<Vec<RuleDecision<'e>>> {
        let now = self.clock.now();
        let banned: Vec<RuleDecision<'e>> = enforced
            .iter()
            .filter(|a| a.rule.on_limited.is_some())
            .filter_map(|a| {
                let until = self.bans.get(&a.rule.name, &a.identity, now)?;
                let left = Duration::from_nanos(until - now);
                Some(RuleDecision {
                    name: &a.rule.name,
                    policy: a.policy,
                    decision: banned_decision(&a.policy, left),
                    in_flight: false,
                })
            })
            .collect();
        (!banned.is_empty()).then_some(banned)
    }

    /// Remembers what the store said of `identity`'s ban under the rule (or descriptor
    /// limit) named `name`: in force for `left`, or none.
    pub(super) fn saw_ban(&self, name: &str, identity: &str, left: Option<Duration>) {
        let now = self.clock.now();
        match left {
            Some(left) => {
                let until = now.saturating_add(nanos(left));
                self.bans.put(name, identity, until, now);
            }
            None => self.bans.forget(name, identity),
        }
    }

    /// Counts the denials of the rules that denied a request on their own (each with
    /// the caller's key), and bans the keys that reach their rule's `after`.
    pub(super) async fn denied_by(&self, store: &dyn Store, denied: &[(&Rule, &str)]) {
        for &(rule, identity) in denied {
            if let Some(on) = &rule.on_limited {
                self.count_denial(store, &rule.name, on, identity).await;
            }
        }
    }

    /// Counts one denial of `identity` by the rule (or descriptor limit) named `name`
    /// with bans `on`, and bans the key when it reaches `after`: one store step for
    /// the count, one more for the ban. A store that fails is logged: the denial
    /// stands, uncounted toward a ban.
    pub(super) async fn count_denial(
        &self,
        store: &dyn Store,
        name: &str,
        on: &OnLimited,
        identity: &str,
    ) {
        let count = Check {
            key: Key {
                rule: &on.denials_rule,
                identity,
            },
            policy: &on.counter,
            cost: 1,
        };
        // The `after`-th denial takes the log's last unit; any later one (the ban
        // lifted, the log still full) is refused by it: either starts a ban.
        let reached = match store.check_all(std::slice::from_ref(&count)).await {
            Ok(d) => !d[0].allowed || d[0].remaining == 0,
            Err(error) => {
                tracing::warn!(%error, "a denial could not be counted toward a ban");
                return;
            }
        };
        if !reached {
            return;
        }
        let mark = Check {
            key: Key {
                rule: &on.ban_rule,
                identity,
            },
            policy: &on.marker,
            cost: 1,
        };
        match store.check_all(std::slice::from_ref(&mark)).await {
            // Taken by this request: the ban starts now. Refused: it is in force
            // already (another instance started it), and ends when it said.
            Ok(d) => {
                let left = if d[0].allowed {
                    self.metrics.ban_started(name);
                    tracing::info!(
                        rule = %name.escape_debug(),
                        identity = %identity.escape_debug(),
                        ban = ?on.ban,
                        "key banned"
                    );
                    self.ledger_ban(name, identity, on.ban).await;
                    on.ban
                } else {
                    d[0].retry_after.unwrap_or(on.ban)
                };
                self.saw_ban(name, identity, Some(left));
            }
            Err(error) => tracing::warn!(%error, "a ban could not be started"),
        }
    }

    /// The ban in force for `identity` under `rule` (from the cache, else one probe),
    /// for the decision API's one-rule question: `Some(left)` when banned.
    pub(super) async fn ban_of(
        &self,
        rule: &Rule,
        identity: &str,
    ) -> Result<Option<Duration>, StoreError> {
        let Some(on) = &rule.on_limited else {
            return Ok(None);
        };
        self.probe_ban(self.store.as_ref(), &rule.name, on, identity)
            .await
    }

    /// The ban in force for `identity` under the rule (or descriptor limit) named
    /// `name` with bans `on`: from the cache, else one probe of `store` (no budget
    /// spent), remembered.
    pub(super) async fn probe_ban(
        &self,
        store: &dyn Store,
        name: &str,
        on: &OnLimited,
        identity: &str,
    ) -> Result<Option<Duration>, StoreError> {
        let now = self.clock.now();
        if let Some(until) = self.bans.get(name, identity, now) {
            return Ok(Some(Duration::from_nanos(until - now)));
        }
        let probe = store.check_all(&[on.probe(identity)]).await?;
        let left = probe.first().and_then(OnLimited::remaining);
        self.saw_ban(name, identity, left);
        Ok(left)
    }

    /// The bans of the rule, or the Envoy descriptor limit, named `name`, if it has
    /// `on_limited` (the configuration refuses a limit named as a rule is).
    pub(crate) fn banning(&self, name: &str) -> Option<&OnLimited> {
        let rule = self.routing.rules.iter().find(|r| r.name == name);
        match rule.and_then(|r| r.on_limited.as_ref()) {
            Some(on) => Some(on),
            None => self
                .envoy
                .as_ref()?
                .bans()
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, on)| on),
        }
    }

    /// Lifts the ban of `key` under the rule or Envoy descriptor limit named `rule` in
    /// the store (every instance stops enforcing it within [`BAN_FRESH_FOR`]), its
    /// denials forgotten too. A rule's key is read as an operator writes it (as the
    /// rule keys its callers); a descriptor limit's as listed.
    pub(crate) async fn lift_ban(&self, rule: &str, key: &str) -> Result<Lifted, LiftError> {
        let on = self.banning(rule).ok_or(LiftError::UnknownRule)?;
        let key = if self.rule(rule).is_some() {
            self.rule_key(rule, key).map_err(LiftError::Key)?
        } else {
            key::stored(key.to_owned())
        };
        let timer = self.metrics.store_timer(StoreOp::Admin, false);
        let lifted = async {
            let probe = self.store.check_all(&[on.probe(&key)]).await?;
            let banned = probe.first().and_then(OnLimited::remaining).is_some();
            for (name, policy) in [(&on.ban_rule, &on.marker), (&on.denials_rule, &on.counter)] {
                let identity = key.as_str();
                self.store
                    .reset(
                        Key {
                            rule: name,
                            identity,
                        },
                        policy,
                    )
                    .await?;
            }
            self.unledger_ban(rule, &key).await?;
            Ok::<_, StoreError>(banned)
        }
        .await;
        timer.finish(lifted.as_ref().err());
        let was_banned = lifted.map_err(LiftError::Store)?;
        self.bans.forget(rule, &key);
        Ok(Lifted { key, was_banned })
    }
}

/// A ban lifted (or a key found not banned: its denials are forgotten all the same).
#[derive(Debug)]
pub(crate) struct Lifted {
    /// The key as the rule keys its callers.
    pub key: String,
    /// Whether a ban was in force.
    pub was_banned: bool,
}

/// Why a ban could not be lifted.
#[derive(Debug)]
pub(crate) enum LiftError {
    /// No rule of that name has `on_limited`.
    UnknownRule,
    /// The key is no key of the rule: why.
    Key(String),
    /// The store did not answer.
    Store(StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_cached_ban_is_trusted_for_a_while_then_read_again() {
        let cache = BanCache::default();
        cache.put("api", "1.2.3.4", 60 * SECOND, 0);
        assert_eq!(cache.get("api", "1.2.3.4", 0), Some(60 * SECOND));
        assert_eq!(cache.get("api", "1.2.3.4", nanos(BAN_FRESH_FOR)), None);
        assert_eq!(cache.get("api", "5.6.7.8", 0), None);
        assert_eq!(cache.list(None, SECOND).len(), 1);
        assert_eq!(cache.list(Some("other"), SECOND).len(), 0);
        cache.forget("api", "1.2.3.4");
        assert_eq!(cache.get("api", "1.2.3.4", 0), None);
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = BanCache::default();
        for i in 0..MAX_CACHED_BANS + 10 {
            cache.put("api", &i.to_string(), 60 * SECOND, 0);
        }
        assert_eq!(cache.list(None, 0).len(), MAX_CACHED_BANS);
        // Expired bans make room.
        cache.put("api", "late", 120 * SECOND, 61 * SECOND);
        assert_eq!(cache.list(None, 61 * SECOND).len(), 1);
    }
}
