//! Logging denials without flooding the log under attack: a denial is logged at most
//! once per rule and identity a minute, and at most [`LOGS_PER_SECOND`] denials a
//! second in all; what was left out is counted in the next line logged.
//!
//! The bound is kept by weir's own limiter: a memory store of its own, with a
//! fixed window per (rule, identity) and a token bucket for the whole log.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weir_core::{Algorithm, Clock, Policy};
use weir_store::{Check, Key, MemoryStore, MemoryStoreConfig};

/// Denial lines a second, at most, in all.
const LOGS_PER_SECOND: u64 = 20;
/// The most (rule, identity) pairs remembered; when full, new pairs are not logged.
const REMEMBERED: usize = 100_000;
/// The rule name of the whole log's budget (rule names cannot hold `*`).
const WHOLE_LOG: &str = "*";

/// Decides which denials are logged.
pub(super) struct DenialLog {
    store: MemoryStore,
    per_identity: Policy,
    whole: Policy,
    /// Denials not logged since the last line.
    suppressed: AtomicU64,
}

impl std::fmt::Debug for DenialLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenialLog").finish_non_exhaustive()
    }
}

impl DenialLog {
    pub(super) fn new(clock: Arc<dyn Clock>) -> Self {
        let config = MemoryStoreConfig {
            max_keys: REMEMBERED,
        };
        Self {
            store: MemoryStore::new(config, clock),
            per_identity: Policy::new(Algorithm::FixedWindow, 1, Duration::from_secs(60), None)
                .expect("a valid policy"),
            whole: Policy::new(
                Algorithm::TokenBucket,
                LOGS_PER_SECOND,
                Duration::from_secs(1),
                None,
            )
            .expect("a valid policy"),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether to log a denial of `identity` by `rule`: `Some(n)` with the number of
    /// denials left out since the last line, `None` to leave this one out.
    pub(super) fn admit(&self, rule: &str, identity: &str) -> Option<u64> {
        let checks = [
            Check {
                key: Key { rule, identity },
                policy: &self.per_identity,
                cost: 1,
            },
            Check {
                key: Key {
                    rule: WHOLE_LOG,
                    identity: WHOLE_LOG,
                },
                policy: &self.whole,
                cost: 1,
            },
        ];
        match self.store.check_all_sync(&checks) {
            Ok(decisions) if decisions.iter().all(|d| d.allowed) => {
                Some(self.suppressed.swap(0, Ordering::Relaxed))
            }
            _ => {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
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
        // A flood of identities: at most the budget a second.
        let logged = (0..1000)
            .filter(|i| log.admit("login", &format!("bot-{i}")).is_some())
            .count();
        assert_eq!(logged as u64, LOGS_PER_SECOND - 3);
        // A minute later, ana's denials are logged again.
        clock.advance(Duration::from_secs(60));
        assert_eq!(log.admit("login", "ana"), Some(1000 - logged as u64));
    }
}
