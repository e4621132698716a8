//! Logging denials without flooding the log under attack: a denial is logged at most
//! once per rule and identity a minute, and at most [`LOGS_PER_SECOND`] lines in any
//! clock second in all; how many were left out (all rules together) is told by the
//! next line logged.
//!
//! The whole log's budget is one atomic word (no lock on the attack path once it is
//! spent); the per-identity bound is kept by weir's own limiter, a memory store of its
//! own with a GCRA of one a minute per (rule, identity).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weir_core::{Algorithm, Clock, Policy};
use weir_store::{Key, MemoryStore, MemoryStoreConfig};

/// Denial lines in any clock second, at most, in all.
const LOGS_PER_SECOND: u64 = 20;
/// The most (rule, identity) pairs remembered; when full, new pairs are not logged.
const REMEMBERED: usize = 100_000;
/// The budget word keeps the second in its high bits and the lines spent in its low
/// ones.
const COUNT_BITS: u32 = 16;

/// Decides which denials are logged.
pub(super) struct DenialLog {
    store: MemoryStore,
    per_identity: Policy,
    clock: Arc<dyn Clock>,
    /// `second << COUNT_BITS | lines logged in it`.
    budget: AtomicU64,
    /// Denials not logged since the last line.
    suppressed: AtomicU64,
}

impl std::fmt::Debug for DenialLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenialLog").finish_non_exhaustive()
    }
}

impl DenialLog {
    #[expect(
        clippy::expect_used,
        reason = "a constant policy within every bound: Policy::new cannot refuse it"
    )]
    pub(super) fn new(clock: Arc<dyn Clock>) -> Self {
        let config = MemoryStoreConfig {
            max_keys: REMEMBERED,
        };
        Self {
            store: MemoryStore::new(config, clock.clone()),
            per_identity: Policy::new(Algorithm::Gcra, 1, Duration::from_secs(60), None)
                .expect("a valid policy"),
            clock,
            budget: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether to log a denial of `identity` by `rule`: `Some(n)` with the number of
    /// denials left out since the last line, `None` to leave this one out.
    pub(super) fn admit(&self, rule: &str, identity: &str) -> Option<u64> {
        let second = self.clock.now() / 1_000_000_000;
        let spent = |word: u64| {
            if word >> COUNT_BITS == second {
                word & ((1 << COUNT_BITS) - 1)
            } else {
                0
            }
        };
        if spent(self.budget.load(Ordering::Relaxed)) >= LOGS_PER_SECOND
            || !self.first_this_minute(rule, identity)
        {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let taken = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let spent = spent(word);
                (spent < LOGS_PER_SECOND).then_some((second << COUNT_BITS) | (spent + 1))
            });
        if taken.is_err() {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }

    /// Whether this is the first denial of `identity` by `rule` in a minute (a full
    /// store of pairs says no: new pairs are not logged until some expire).
    fn first_this_minute(&self, rule: &str, identity: &str) -> bool {
        self.store
            .check_sync(Key { rule, identity }, &self.per_identity, 1)
            .is_ok_and(|d| d.allowed)
    }
}

#[cfg(test)]
mod tests {
    use weir_core::ManualClock;

    use super::*;

    #[test]
    fn once_per_identity_a_minute_and_bounded_in_all() {
        let clock = Arc::new(ManualClock::new(0));
        let log = DenialLog::new(clock.clone());
        assert_eq!(log.admit("login", "ana"), Some(0));
        for _ in 0..1000 {
            assert_eq!(log.admit("login", "ana"), None);
        }
        // Another rule, another identity: logged.
        assert_eq!(log.admit("api", "ana"), Some(1000));
        assert_eq!(log.admit("login", "bo"), Some(0));
        // A flood of identities: at most the budget in the second.
        let logged = (0..1000)
            .filter(|i| log.admit("login", &format!("bot-{i}")).is_some())
            .count();
        assert_eq!(logged as u64, LOGS_PER_SECOND - 3);
        // The next second, more; ana still not before her minute is up.
        clock.advance(Duration::from_secs(1));
        assert_eq!(log.admit("login", "ana"), None);
        assert!(log.admit("login", "carol").is_some());
        // A minute after her first line, ana's denials are logged again: exactly one
        // line a minute however the minutes fall.
        clock.advance(Duration::from_millis(59_000));
        assert!(log.admit("login", "ana").is_some());
        assert_eq!(log.admit("login", "ana"), None);
    }
}
