//! Regional shares of global limits: a [`Store`] in front of a region's own store that
//! decides the keys of the rules with `scope: global` on the region's share of their
//! limit, and a rebalancing loop that renews those shares with each key's home region
//! (`weir_core`'s share module has the protocol and its bound).
//!
//! A request never waits on another region: checks go to the region's own store only,
//! where each global key's record holds the share in force. The loop, every
//! `rebalance`, reports the keys this instance was asked for since the last round (and
//! for a few quiet rounds after, to give their shares back); for the keys whose claim
//! it wins, it asks the key's home for the region's share and applies the answer. Only
//! the loop talks to other regions, and only about keys with recent traffic.

mod activity;
mod round;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weir_core::{Decision, Policy};

use self::activity::Activities;
use crate::{BackingStore, Check, Key, LeaseStore, Settled, Store, StoreError, StoreFuture, Wraps};

/// The most keys of global rules one instance tracks (identities of up to 1 KiB: at
/// most about 100 MiB); beyond, new keys are decided at the region's floor until some
/// go quiet.
pub const MAX_REPORTED_KEYS: usize = 100_000;

/// The regions a global limit is shared by, and how they rebalance.
#[derive(Clone)]
pub struct Regions {
    /// This region's name.
    pub this: String,
    /// Every region (this one included, with its own store) and its store, which
    /// holds the region's records and is home to the keys that hash to it. Every
    /// region must list the same names.
    pub stores: Vec<(String, Arc<dyn BackingStore>)>,
    /// How often shares are renewed.
    pub rebalance: Duration,
    /// Each region's floor, as a fraction of a global rule's limit (at least one unit).
    pub floor: f64,
}

impl std::fmt::Debug for Regions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Regions")
            .field("this", &self.this)
            .field(
                "regions",
                &self.stores.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("rebalance", &self.rebalance)
            .field("floor", &self.floor)
            .finish()
    }
}

impl Regions {
    /// How long home keeps a grant: three rebalances, so a region renewing every round
    /// keeps its share in force (its deadline is three quarters of this after its
    /// claim), and one cut off falls to its floor within 2.25 rounds.
    pub fn hold(&self) -> Duration {
        self.rebalance * 3
    }
}

/// A region's floor of a global rule of `limit` units per period shared by `regions`
/// regions, each with the fraction `floor` of it: at least 1, at most
/// `limit / regions`; `None` when the limit is below the number of regions.
pub fn region_floor(limit: u64, regions: u64, floor: f64) -> Option<u64> {
    let fraction = (limit as f64 * floor).floor() as u64;
    let floor = fraction.max(1).min(limit / regions.max(1));
    (floor >= 1).then_some(floor)
}

/// What the rebalancing does, per global rule (by the index it was given): for metrics.
pub trait ShareEvents: Send + Sync + 'static {
    /// A round began, reporting `keys` keys.
    fn round(&self, keys: usize);
    /// Units asked for on a key of the rule, and whether they were allowed.
    fn used(&self, rule: usize, units: u64, allowed: bool);
    /// Home granted a share for a key of the rule; `applied`, whether it went in force
    /// (else its claim had been replaced, or its deadline had passed).
    fn renewed(&self, rule: usize, applied: bool);
    /// The share in force for a key of the rule after this instance renewed it in the
    /// round, in units per period.
    fn holding(&self, rule: usize, units: u64);
    /// Home found a claim stale.
    fn stale(&self, rule: usize);
    /// A region's store failed or did not answer in time (`region` its name).
    fn unreachable(&self, region: &str);
    /// A key of the rule was not tracked ([`MAX_REPORTED_KEYS`] are): it stays at the
    /// region's floor.
    fn untracked(&self, rule: usize);
}

/// Counts nothing.
impl ShareEvents for () {
    fn round(&self, _: usize) {}
    fn used(&self, _: usize, _: u64, _: bool) {}
    fn renewed(&self, _: usize, _: bool) {}
    fn holding(&self, _: usize, _: u64) {}
    fn stale(&self, _: usize) {}
    fn unreachable(&self, _: &str) {}
    fn untracked(&self, _: usize) {}
}

/// A check's policy as the region decides it, and its global rule's index if any.
type Rewritten = (Policy, Option<usize>);

/// A [`Store`] deciding the keys of global rules on this region's share of them (see
/// the module's doc). Every other check, and everything else, goes to the region's
/// store as it is.
pub struct RegionalStore {
    local: Arc<dyn BackingStore>,
    /// Every region's store, sorted by name; `this` is this region's index.
    regions: Vec<(String, Arc<dyn BackingStore>)>,
    this: usize,
    rebalance: Duration,
    hold: Duration,
    /// Each region's floor, as a fraction of a rule's limit.
    floor: f64,
    /// The global rules: name → the index events carry, and back.
    rules: HashMap<String, usize, foldhash::fast::RandomState>,
    names: Vec<String>,
    activity: Activities,
    events: Arc<dyn ShareEvents>,
}

impl std::fmt::Debug for RegionalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionalStore")
            .field("region", &self.regions[self.this].0)
            .field("rules", &self.rules.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl RegionalStore {
    /// Decides the keys of `rules` (name, the index events carry) on this region's
    /// share, in `local` (this region's store, the one `regions` lists under its
    /// name). With `run_loop` and inside a Tokio runtime, starts the loop that
    /// rebalances every `regions.rebalance` (it ends when the store is dropped);
    /// without, call [`RegionalStore::rebalance`] (a simulation on a virtual clock).
    ///
    /// Fails if `regions` does not list this region, lists a name twice, or has more
    /// than `weir_core::MAX_REGIONS`.
    pub fn new(
        local: Arc<dyn BackingStore>,
        regions: Regions,
        rules: impl IntoIterator<Item = (String, usize)>,
        events: Arc<dyn ShareEvents>,
        run_loop: bool,
    ) -> Result<Arc<Self>, String> {
        let mut sorted = regions.stores.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err("a region is listed twice".into());
        }
        if sorted.len() > weir_core::MAX_REGIONS as usize {
            return Err(format!("at most {} regions", weir_core::MAX_REGIONS));
        }
        let this = sorted
            .iter()
            .position(|(name, _)| *name == regions.this)
            .ok_or_else(|| format!("region {} is not among the regions", regions.this))?;
        let rules: HashMap<_, _, _> = rules.into_iter().collect();
        let mut names = vec![String::new(); rules.values().max().map_or(0, |m| m + 1)];
        for (name, &index) in &rules {
            names[index].clone_from(name);
        }
        let store = Arc::new(Self {
            local,
            this,
            rebalance: regions.rebalance,
            hold: regions.hold(),
            activity: Activities::new(names.len(), MAX_REPORTED_KEYS),
            regions: sorted,
            floor: regions.floor,
            rules,
            names,
            events,
        });
        if run_loop && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&store);
            let every = store.rebalance;
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(store) = weak.upgrade() else { break };
                    store.rebalance().await;
                }
            });
        }
        Ok(store)
    }

    /// The region's policy of a check's key, if its rule is global.
    fn regional(&self, check: &Check<'_>) -> Option<Result<(usize, Policy), StoreError>> {
        let index = *self.rules.get(check.key.rule)?;
        let regions = self.regions.len() as u64;
        let policy = region_floor(check.policy.limit(), regions, self.floor)
            .ok_or(StoreError::Share(weir_core::ShareError::NotRegional))
            .and_then(|floor| {
                let regions = self.regions.len() as u64;
                check
                    .policy
                    .regional(floor, regions)
                    .map_err(|e| StoreError::Protocol(format!("rule {}: {e}", check.key.rule)))
            });
        Some(policy.map(|p| (index, p)))
    }

    /// `checks` with the policies of global rules' keys replaced by the region's, or
    /// `None` when no check is of a global rule. With `count`, the units are counted
    /// as asked for (for the next round's report).
    fn rewrite(
        &self,
        checks: &[Check<'_>],
        count: bool,
    ) -> Result<Option<Vec<Rewritten>>, StoreError> {
        if !checks.iter().any(|c| self.rules.contains_key(c.key.rule)) {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(checks.len());
        for check in checks {
            match self.regional(check).transpose()? {
                Some((index, policy)) => {
                    // A cost that can never fit is denied and consumes nothing: no
                    // demand for a share.
                    let wanted = check.cost > 0 && check.cost <= policy.capacity();
                    if count
                        && wanted
                        && !self
                            .activity
                            .offer(index, check.key.identity, policy, check.cost)
                    {
                        self.events.untracked(index);
                    }
                    out.push((policy, Some(index)));
                }
                None => out.push((*check.policy, None)),
            }
        }
        Ok(Some(out))
    }

    /// Decides `checks` on the region's store, global rules' keys on the region's
    /// share: a commit, a preview, or with a timeout.
    async fn decide_regional(
        &self,
        checks: &[Check<'_>],
        preview: bool,
        timeout: Option<Duration>,
    ) -> Result<Vec<Decision>, StoreError> {
        let Some(policies) = self.rewrite(checks, !preview)? else {
            return self.local.decide(checks, preview, timeout).await;
        };
        let rewritten: Vec<Check<'_>> = checks
            .iter()
            .zip(&policies)
            .map(|(c, (policy, _))| Check {
                key: c.key,
                policy,
                cost: c.cost,
            })
            .collect();
        let decisions = self.local.decide(&rewritten, preview, timeout).await?;
        if !preview {
            for ((_, index), (check, decision)) in
                policies.iter().zip(checks.iter().zip(&decisions))
            {
                if let Some(index) = index
                    && check.cost > 0
                {
                    self.events.used(*index, check.cost, decision.allowed);
                }
            }
        }
        Ok(decisions)
    }
}

/// Checks of global rules' keys decided on the region's share; everything else on
/// the region's store as it is.
impl Store for RegionalStore {
    fn decide<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        within: Option<Duration>,
    ) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.decide_regional(checks, preview, within))
    }

    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let Some(policies) = self.rewrite(checks, false)? else {
                return self.local.refund_all(checks).await;
            };
            self.local.refund_all(&on_shares(checks, &policies)).await
        })
    }

    /// The refunds as [`Store::refund_all`] gives them back (global rules' on the
    /// region's share), the charges as [`Store::charge_all`] takes them: of global
    /// rules, refused ([`StoreError::NoCharges`], once the rest is written).
    fn settle_all<'a>(
        &'a self,
        id: u128,
        refunds: &'a [Check<'a>],
        charges: &'a [Check<'a>],
    ) -> StoreFuture<'a, Settled> {
        Box::pin(async move {
            let policies = self.rewrite(refunds, false)?;
            let rewritten = match &policies {
                Some(policies) => on_shares(refunds, policies),
                None => refunds.to_vec(),
            };
            let global = charges.iter().any(|c| self.rules.contains_key(c.key.rule));
            let charged = if global { &[][..] } else { charges };
            let settled = self.local.settle_all(id, &rewritten, charged).await?;
            if global {
                return Err(StoreError::NoCharges);
            }
            Ok(settled)
        })
    }

    /// Charges of rules that are not global go to the region's store; a global rule's
    /// share carries no debt ([`StoreError::NoCharges`]).
    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        if checks.iter().any(|c| self.rules.contains_key(c.key.rule)) {
            return Box::pin(std::future::ready(Err(StoreError::NoCharges)));
        }
        self.local.charge_all(checks)
    }

    /// Forgets the region's record of the key (its share with it: the next round
    /// claims afresh; home's record expires by itself).
    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let check = Check {
                key,
                policy,
                cost: 0,
            };
            match self.regional(&check).transpose()? {
                Some((_, regional)) => self.local.reset(key, &regional).await,
                None => self.local.reset(key, policy).await,
            }
        })
    }

    fn is_ready(&self) -> bool {
        self.local.is_ready()
    }
}

/// `checks` under the policies `rewrite` gave them (a global rule's share).
fn on_shares<'a>(checks: &[Check<'a>], policies: &'a [Rewritten]) -> Vec<Check<'a>> {
    checks
        .iter()
        .zip(policies)
        .map(|(c, (policy, _))| Check {
            key: c.key,
            policy,
            cost: c.cost,
        })
        .collect()
}

/// Leases are the region's store's (a leased rule is never global): passed on, for
/// the leasing store above. Shares are not: they are rebalanced below this store.
impl Wraps for RegionalStore {
    type Inner = dyn LeaseStore;

    fn inner(&self) -> &dyn LeaseStore {
        &*self.local
    }
}

#[cfg(test)]
mod tests;
