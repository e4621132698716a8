//! One rebalance: per key reported, a claim on the region's store, a renewal at the
//! key's home, and the grant applied (`weir_core`'s share module, steps 1 to 3).

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::task::JoinSet;
use weir_core::{Policy, Renewal, Report};

use super::RegionalStore;
use crate::Key;

/// Keys renewed at once: each waits on another region's store, so a round of many keys
/// costs a few round trips, not one per key.
const IN_FLIGHT: usize = 64;

impl RegionalStore {
    /// Renews the shares of the keys this instance was asked for since the last round
    /// (and of those quiet for a few rounds, which give their shares back).
    pub async fn rebalance(self: &Arc<Self>) {
        let keys = self.activity.drain();
        self.events.round(keys.len());
        let mut tasks = JoinSet::new();
        for (rule, identity, policy, offered) in keys {
            if tasks.len() >= IN_FLIGHT {
                tasks.join_next().await;
            }
            let store = Arc::clone(self);
            tasks.spawn(async move { store.renew_key(rule, &identity, &policy, offered).await });
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
    async fn renew_key(&self, rule: usize, identity: &str, policy: &Policy, offered: u64) {
        let key = Key {
            rule: &self.names[rule],
            identity,
        };
        let mut report = Report {
            offered,
            round: self.rebalance,
            force: false,
        };
        let mut demand = None;
        for _ in 0..2 {
            let Some(renewed) = self.renew_once(rule, key, policy, report, demand).await else {
                return;
            };
            if renewed.granted >= renewed.enforcing {
                return;
            }
            // The confirmation asks with the same demand (nothing was offered since).
            demand = Some(renewed.demand);
            report = Report {
                offered: 0,
                force: true,
                ..report
            };
        }
    }

    /// One claim, renewal (with `demand`, or the claim's) and apply; what was renewed,
    /// when the grant went in force.
    async fn renew_once(
        &self,
        rule: usize,
        key: Key<'_>,
        policy: &Policy,
        report: Report,
        demand: Option<u64>,
    ) -> Option<Renewed> {
        let wait = self.rebalance / 2;
        let local = &self.regions[self.this];
        let claim =
            match tokio::time::timeout(wait, self.local.report_share(key, policy, report)).await {
                Ok(Ok(Some(claim))) => claim,
                Ok(Ok(None)) => return None,
                Ok(Err(error)) => {
                    tracing::debug!(%error, rule = key.rule, "could not report a global key's use");
                    self.events.unreachable(&local.0);
                    return None;
                }
                Err(_) => {
                    self.events.unreachable(&local.0);
                    return None;
                }
            };
        let (home_name, home) = &self.regions[self.home_of(key)];
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
        let granted = match tokio::time::timeout(wait, home.renew_share(key, policy, renewal)).await
        {
            Ok(Ok(Some(granted))) => granted,
            Ok(Ok(None)) => {
                self.events.stale(rule);
                return None;
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, region = %home_name, "a region's store refused or failed a share renewal");
                self.events.unreachable(home_name);
                return None;
            }
            Err(_) => {
                self.events.unreachable(home_name);
                return None;
            }
        };
        let applied = self
            .local
            .apply_share(key, policy, claim.seq, granted, self.hold)
            .await
            .unwrap_or(false);
        self.events.renewed(rule, granted, applied);
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
