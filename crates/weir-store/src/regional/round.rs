//! One rebalance: per key reported, a claim on the region's store, a renewal at the
//! key's home, and the grant applied (`weir_core`'s share module, steps 1 to 3).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use sha2::{Digest, Sha256};
use tokio::task::JoinSet;
use weir_core::{Policy, Renewal, Report};

use super::RegionalStore;
use crate::{Key, ShareStore};

/// Keys renewed at once: each waits on another region's store, so a round of many keys
/// costs a few round trips, not one per key (the calls share each store's connection,
/// pipelined). With `R` between regions, a round of `MAX_RENEWED_PER_ROUND` keys takes
/// about `MAX_RENEWED_PER_ROUND / IN_FLIGHT × R`: 2 s at 100 ms.
const IN_FLIGHT: usize = 512;

/// The most keys one instance renews a round: the ones it was asked the most for. The
/// others stay at their floors this round; so a flood of distinct keys costs a bounded
/// number of calls, whatever its size.
pub(super) const MAX_RENEWED_PER_ROUND: usize = 10_000;

/// Failed calls to one region's store in a round after which its keys are left alone
/// for the rest of the round (their shares lapse to the floors, as they would), so
/// that a region that stopped answering costs a few timeouts, not one per key.
const FAILURES_PER_ROUND: u32 = 8;

impl RegionalStore {
    /// Renews the shares of the keys this instance was asked for since the last round
    /// (and of those quiet for a few rounds, which give their shares back): at most
    /// `MAX_RENEWED_PER_ROUND` (10,000), the busiest.
    pub async fn rebalance(self: &Arc<Self>) {
        let mut keys = self.activity.drain();
        if keys.len() > MAX_RENEWED_PER_ROUND {
            keys.select_nth_unstable_by(MAX_RENEWED_PER_ROUND - 1, |a, b| b.3.cmp(&a.3));
            keys.truncate(MAX_RENEWED_PER_ROUND);
        }
        self.events.round(keys.len());
        let failures: Arc<Vec<AtomicU32>> =
            Arc::new(self.regions.iter().map(|_| AtomicU32::new(0)).collect());
        let mut tasks = JoinSet::new();
        for (rule, identity, policy, offered) in keys {
            if tasks.len() >= IN_FLIGHT {
                tasks.join_next().await;
            }
            let (store, failures) = (Arc::clone(self), Arc::clone(&failures));
            tasks.spawn(async move {
                store
                    .renew_key(rule, &identity, &policy, offered, &failures)
                    .await
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    /// The index of the region that is home to a key: by a hash every region computes
    /// alike (of the rule's name and the identity).
    pub(super) fn home_of(&self, key: Key<'_>) -> usize {
        let mut hash = Sha256::new();
        hash.update(key.rule.as_bytes());
        hash.update([0]);
        hash.update(key.identity.as_bytes());
        let digest = hash.finalize();
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        (u64::from_be_bytes(first) % self.regions.len() as u64) as usize
    }

    /// Reports the key and, if this instance wins its claim, renews the region's share
    /// at home and applies it; after a shrink, once more at once, so that home stops
    /// holding the larger share.
    async fn renew_key(
        &self,
        rule: usize,
        identity: &str,
        policy: &Policy,
        offered: u64,
        failures: &[AtomicU32],
    ) {
        let key = Key {
            rule: &self.names[rule],
            identity,
        };
        let mut report = Report {
            offered,
            round: self.rebalance,
            force: false,
            hold: self.hold,
        };
        let mut demand = None;
        let mut in_force = None;
        for _ in 0..2 {
            let Some(renewed) = self
                .renew_once(rule, key, policy, report, demand, failures)
                .await
            else {
                break;
            };
            in_force = Some(renewed.granted);
            if renewed.granted >= renewed.enforcing {
                break;
            }
            // The confirmation asks with the same demand (nothing was offered since).
            demand = Some(renewed.demand);
            report = Report {
                offered: 0,
                force: true,
                ..report
            };
        }
        if let Some(units) = in_force {
            self.events.holding(rule, units);
        }
    }

    /// One claim, renewal (with `demand`, or the claim's) and apply; what was renewed,
    /// when the grant went in force. Counts the calls that fail in `failures`, per
    /// region, and skips a region that failed [`FAILURES_PER_ROUND`] times this round.
    async fn renew_once(
        &self,
        rule: usize,
        key: Key<'_>,
        policy: &Policy,
        report: Report,
        demand: Option<u64>,
        failures: &[AtomicU32],
    ) -> Option<Renewed> {
        let wait = self.rebalance / 2;
        let home = self.home_of(key);
        let given_up =
            |region: usize| failures[region].load(Ordering::Relaxed) >= FAILURES_PER_ROUND;
        if given_up(self.this) || given_up(home) {
            return None;
        }
        let failed = |region: usize, error: Option<crate::StoreError>| {
            let name = &self.regions[region].0;
            match error {
                Some(error) => {
                    tracing::debug!(%error, region = %name, rule = key.rule, "a share call to a region's store failed")
                }
                None => {
                    tracing::debug!(region = %name, rule = key.rule, "a share call to a region's store timed out")
                }
            }
            failures[region].fetch_add(1, Ordering::Relaxed);
            self.events.unreachable(name);
        };
        let reported = tokio::time::timeout(wait, self.local.report_share(key, policy, report));
        let claim = match reported.await {
            Ok(Ok(Some(claim))) => claim,
            Ok(Ok(None)) => return None,
            Ok(Err(error)) => {
                failed(self.this, Some(error));
                return None;
            }
            Err(_) => {
                failed(self.this, None);
                return None;
            }
        };
        let renewal = Renewal {
            region: self.this as u32,
            regions: self.regions.len() as u32,
            demand: demand.unwrap_or(claim.demand),
            enforcing: claim.enforcing,
            seq: claim.seq,
            hold: self.hold,
        };
        // An unanswered claim stays open until it times out (a round): no other
        // instance renews the key meanwhile, and the share in force holds until its
        // deadline, then the floor.
        let renewed =
            tokio::time::timeout(wait, self.regions[home].1.renew_share(key, policy, renewal));
        let granted = match renewed.await {
            Ok(Ok(Some(granted))) => granted,
            Ok(Ok(None)) => {
                self.events.stale(rule);
                return None;
            }
            Ok(Err(error)) => {
                failed(home, Some(error));
                return None;
            }
            Err(_) => {
                failed(home, None);
                return None;
            }
        };
        let applied = self
            .local
            .apply_share(key, policy, claim.seq, granted, self.hold)
            .await
            .unwrap_or(false);
        self.events.renewed(rule, applied);
        applied.then_some(Renewed {
            granted,
            enforcing: claim.enforcing,
            demand: renewal.demand,
        })
    }
}

/// A renewal whose grant went in force.
struct Renewed {
    granted: u64,
    /// The share in force before it.
    enforcing: u64,
    demand: u64,
}
