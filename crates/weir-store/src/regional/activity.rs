//! What this instance was asked for, per key of a global rule, since the last round:
//! the keys a rebalance reports, and nothing else (10 million identities do not mean
//! 10 million records a round, only those with recent traffic).

use std::collections::HashMap;
use std::hash::BuildHasher;

use parking_lot::Mutex;
use weir_core::Policy;

/// Rounds a key stays reported after its last request: long enough to give its share
/// back (a report of no demand), after which home's record expires by itself.
pub(super) const QUIET_ROUNDS: u8 = 4;

/// Shards of the table, so that checks on different keys rarely wait for each other.
const SHARDS: usize = 16;

/// One key's activity.
#[derive(Debug, Clone, Copy)]
struct Activity {
    /// The region's policy of the key (a plan may give keys of one rule different
    /// limits).
    policy: Policy,
    /// Units asked for since the last round.
    offered: u64,
    /// Rounds in a row with nothing asked for.
    quiet: u8,
}

/// A key to report this round: rule index, identity, policy, units offered.
pub(super) type Reported = (usize, String, Policy, u64);

/// One shard: per rule (by index), its keys by identity.
type Shard = Vec<HashMap<String, Activity, foldhash::fast::RandomState>>;

/// Keys with recent traffic, at most `max_keys` of them.
#[derive(Debug)]
pub(super) struct Activities {
    shards: Vec<Mutex<Shard>>,
    max_per_shard: usize,
    hasher: foldhash::fast::RandomState,
}

impl Activities {
    /// For `rules` rules, at most `max_keys` keys.
    pub(super) fn new(rules: usize, max_keys: usize) -> Self {
        let shard = || Mutex::new((0..rules).map(|_| HashMap::default()).collect());
        Self {
            shards: (0..SHARDS).map(|_| shard()).collect(),
            max_per_shard: max_keys.div_ceil(SHARDS),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn shard(&self, identity: &str) -> &Mutex<Shard> {
        let hash = self.hasher.hash_one(identity);
        &self.shards[(hash % SHARDS as u64) as usize]
    }
    /// Counts `cost` asked for on the key. Returns false when the key is new and the
    /// table is full: it is not reported, and the region decides it at its floor.
    pub(super) fn offer(&self, rule: usize, identity: &str, policy: Policy, cost: u64) -> bool {
        let mut shard = self.shard(identity).lock();
        if let Some(activity) = shard.get_mut(rule).and_then(|keys| keys.get_mut(identity)) {
            activity.offered = activity.offered.saturating_add(cost);
            activity.policy = policy;
            return true;
        }
        // Counted only for a key new here (once per key, not per request).
        let held: usize = shard.iter().map(HashMap::len).sum();
        let Some(keys) = shard.get_mut(rule).filter(|_| held < self.max_per_shard) else {
            return false;
        };
        let activity = Activity {
            policy,
            offered: cost,
            quiet: 0,
        };
        keys.insert(identity.to_owned(), activity);
        true
    }

    /// The keys to report this round, with what each was asked for since the last;
    /// starts counting afresh, and forgets keys quiet for [`QUIET_ROUNDS`].
    pub(super) fn drain(&self) -> Vec<Reported> {
        let mut out = Vec::new();
        for shard in &self.shards {
            for (rule, keys) in shard.lock().iter_mut().enumerate() {
                keys.retain(|identity, activity| {
                    if activity.offered == 0 {
                        activity.quiet += 1;
                    } else {
                        activity.quiet = 0;
                    }
                    if activity.quiet > QUIET_ROUNDS {
                        return false;
                    }
                    out.push((rule, identity.clone(), activity.policy, activity.offered));
                    activity.offered = 0;
                    true
                });
            }
        }
        // In one order whatever the hash tables' seeds: a round's calls then come in
        // the same order from the same keys (a simulation on a virtual clock replays,
        // breaker and all).
        out.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weir_core::Algorithm;

    use super::*;

    fn policy() -> Policy {
        Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(60), None).unwrap()
    }

    #[test]
    fn a_key_is_reported_until_it_has_been_quiet_for_some_rounds() {
        let table = Activities::new(1, 100);
        assert!(table.offer(0, "ana", policy(), 3));
        assert!(table.offer(0, "ana", policy(), 2));
        let first = table.drain();
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].0, first[0].1.as_str(), first[0].3), (0, "ana", 5));
        for _ in 0..QUIET_ROUNDS {
            assert_eq!(table.drain()[0].3, 0, "reported with no demand");
        }
        assert!(table.drain().is_empty(), "forgotten");
    }

    #[test]
    fn keys_are_reported_in_order() {
        let table = Activities::new(2, 100);
        for (rule, identity) in [(1, "b"), (0, "z"), (1, "a"), (0, "c")] {
            assert!(table.offer(rule, identity, policy(), 1));
        }
        let order: Vec<(usize, String)> = table.drain().into_iter().map(|r| (r.0, r.1)).collect();
        let want = [(0, "c"), (0, "z"), (1, "a"), (1, "b")].map(|(r, i)| (r, i.to_owned()));
        assert_eq!(order, want);
    }

    #[test]
    fn a_full_table_takes_no_new_key_but_counts_the_ones_it_has() {
        let table = Activities::new(1, SHARDS);
        let taken = (0..100)
            .filter(|i| table.offer(0, &format!("k{i}"), policy(), 1))
            .count();
        assert!(taken <= SHARDS, "{taken}");
        let (_, known, _, _) = table.drain().pop().unwrap();
        assert!(table.offer(0, &known, policy(), 1));
    }
}
