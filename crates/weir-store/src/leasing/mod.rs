//! Token leases spent locally: a [`Store`] in front of a shared one that, for the rules
//! leased, takes units of a hot key in batches ([`LeaseStore::take`](crate::LeaseStore::take)) and spends them on
//! this instance without a store call, and remembers denials until their retry time.
//!
//! Every door asks the engine, and the engine asks its store: with this store in front
//! of Redis, the gateway, `/v1/check` and `/v1/decide` spend the same leases. What it
//! does per leased key (the protocol `weir-lease-model` checks):
//!
//! - A request spends from the units this instance holds, before the lease's local
//!   deadline (three quarters of the hold after the take was *sent*, on this
//!   instance's clock: the store's record lives a whole hold from when it *received*
//!   the take, so the last quarter is the time to give back the units left while the
//!   record is still there).
//! - With too few units held, one take (one atomic script) gives back the lease held
//!   with its unspent units and grants a new batch of what the key has available now;
//!   the other requests for the key wait for that take rather than ask too.
//! - A denied take is remembered: requests of at least that cost are denied here until
//!   the retry time the store gave (exact for the buckets: nothing refills earlier,
//!   though a lease given back early may make units available sooner). The next take
//!   asks for a whole batch at least, so that a key offered more than its limit costs
//!   one call per batch rather than one per unit refilled.
//! - A background loop gives back the units of leases at their deadline;
//!   [`LeasingStore::release_all`] gives back every lease (reload, shutdown). An
//!   `auto` lease spent to its last unit is not given back at its deadline: the next
//!   take closes its record at no extra call, or, with no take until the store's
//!   record has ended, it is forgotten here (a give-back never sent, as one lost on
//!   its way, which the model covers).
//!
//! The bound: units held in leases count against the key's capacity in the store, so
//! the instances together never admit more than the bucket alone would (zero
//! over-admission); the cost is units held by one instance while another is denied.

mod check;
mod slot;
mod sync;
mod table;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weir_core::{Clock, Decision, Policy, leasable};

pub use self::table::MAX_SLOTS;
use self::table::Slots;
use crate::{Check, Key, LeaseStore, Settled, Store, StoreError, StoreFuture, Wraps};

/// The hold of `lease: auto`.
pub const AUTO_HOLD: Duration = Duration::from_secs(2);
/// `lease: auto` leases a key only when a batch would be at least this many units (the
/// units this instance expects to be asked for the key while a lease may be spent):
/// a lease of one unit serves only the request that took it, and a lease whose units
/// are not all spent costs a call to give them back.
pub const AUTO_MIN_BATCH: u64 = 2;
/// `lease: auto` leases no key whose capacity is under this many units (a sixteenth of
/// it under 4). The units out in leases hold the bucket down (it never refills above
/// its capacity less them), and the instances' batches together come to about the
/// capacity: with a burst this small, a burst of requests at one instance is denied
/// while the others hold most of the key, though the key is under its limit (4
/// instances, a burst of 40 at 100 a second, asked 64 a second in bursts of 8: 71% of
/// the requests admitted, all of them without leases).
pub const AUTO_MIN_CAPACITY: u64 = 64;
/// `lease: auto` batches hold at most this instance's share of the key's capacity: its
/// part of the key's takes (every instance's, as the store counts them) times the
/// capacity, and never less than this fraction of the capacity (a key this instance
/// has not leased yet, or leases little of).
pub const AUTO_CAPACITY_SHARE: u64 = 16;

/// How a rule's keys are leased.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// Each key's batch is what this instance expects to be asked for it while a lease
    /// may be spent (three quarters of the hold, at the rate it was asked in the last
    /// two seconds), at most its share of the capacity (its part of the key's recent
    /// takes, as the store counts every instance's, times the capacity; at least a
    /// sixteenth of it) and at most what the key refills in that time, held
    /// [`AUTO_HOLD`]; a key whose batch would be fewer than [`AUTO_MIN_BATCH`] units is
    /// not leased, nor a request costing the whole batch (its lease would hold nothing
    /// once it is spent), nor a key of a capacity under [`AUTO_MIN_CAPACITY`].
    Auto,
    /// Every key is leased, in batches of this many units (at most the capacity).
    Fixed(u64),
}

/// How one rule leases: the batch and the hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasePlan {
    /// How many units a take asks for.
    pub batch: Batch,
    /// How long the store keeps a lease's record (units not given back by then count
    /// as spent): the longest a crashed instance's units stay out of use.
    pub hold: Duration,
}

impl LeasePlan {
    /// `lease: auto`.
    pub fn auto() -> Self {
        Self {
            batch: Batch::Auto,
            hold: AUTO_HOLD,
        }
    }

    /// How long past its deadline a lease spent to its last unit is kept for the next
    /// take to close, rather than given back with a call of its own: `auto`'s, until
    /// its record in the store has ended (a quarter of the hold after the deadline:
    /// the key's capacity is held under that lease's units at most that much longer);
    /// `None` for a fixed batch, whose hold (up to 10 minutes) the operator chose: it
    /// is given back at its deadline.
    fn keep_spent(&self) -> Option<u64> {
        match self.batch {
            Batch::Auto => Some(u64::try_from((self.hold / 4).as_nanos()).unwrap_or(u64::MAX)),
            Batch::Fixed(_) => None,
        }
    }

    /// What a take for `cost` units asks for: `(min, max, hold)`. `asked` is the units
    /// asked for here in this second and the one before; `share`, the units this instance was
    /// granted in a recent second and the key's take rate the store last reported
    /// (every instance's: see [`share_of`]); `starving`, whether the last take got
    /// less than it asked for (then at least half of what refills in a quarter of the
    /// hold, up to half a batch: about a call per batch, the store's turns spacing the
    /// instances that wait, and a turn met a little late still granted); `unsure`, whether the last take failed (then a plain check, until one
    /// answers: a take that timed out may still have been granted, and its units are
    /// out until its hold ends, so a stalled store strands at most one batch). A zero
    /// hold takes `cost` spent at once.
    fn take_sizes(
        &self,
        policy: &Policy,
        asked: u64,
        share: (u64, u64),
        starving: bool,
        unsure: bool,
        cost: u64,
    ) -> (u64, u64, Duration) {
        if unsure {
            return (cost, cost, Duration::ZERO);
        }
        let capacity = policy.capacity();
        let batch = match self.batch {
            Batch::Auto => {
                let spending = self.hold - self.hold / 4;
                let batch = expected(asked, spending)
                    .min(share_of(capacity, share))
                    .min(refill(policy, spending));
                if batch < AUTO_MIN_BATCH || batch <= cost || capacity < AUTO_MIN_CAPACITY {
                    return (cost, cost, Duration::ZERO);
                }
                batch
            }
            Batch::Fixed(batch) => batch.min(capacity),
        };
        let max = batch.max(cost);
        let min = match starving {
            true => (batch.min(refill(policy, self.hold / 4)) / 2).max(cost),
            false => cost,
        };
        (min, max, self.hold)
    }
}

/// The most of `capacity` one `auto` batch holds: `capacity × own / taken`, this
/// instance's part of the key's takes (`own` units granted here, `taken` by every
/// instance together, in a recent second), and at least a sixteenth of the capacity.
///
/// So the instances' batches together come to about the capacity, each in proportion
/// to what it spends: a key whose burst is small next to its rate is leased in batches
/// of a few instances' share of it, not a sixteenth, while an instance that leases
/// little of a key keeps small batches (units it would strand if its demand moved
/// elsewhere stay a sixteenth of the capacity). The store grants only what the bucket
/// has under the cap of the units out, so no sizing admits more than the bucket.
fn share_of(capacity: u64, (own, taken): (u64, u64)) -> u64 {
    let floor = (capacity / AUTO_CAPACITY_SHARE).max(1);
    if taken == 0 {
        return floor;
    }
    let share = u128::from(capacity) * u128::from(own.min(taken)) / u128::from(taken);
    u64::try_from(share).unwrap_or(capacity).max(floor)
}

/// Units expected to be asked for in `within`, at the rate of `asked` in two seconds
/// (rounded down).
fn expected(asked: u64, within: Duration) -> u64 {
    let units = u128::from(asked) * within.as_nanos() / Duration::from_secs(2).as_nanos();
    u64::try_from(units).unwrap_or(u64::MAX)
}

/// Units `policy` refills in `within` (rounded down).
fn refill(policy: &Policy, within: Duration) -> u64 {
    let units = within.as_nanos() * u128::from(policy.limit()) / policy.period().as_nanos().max(1);
    u64::try_from(units).unwrap_or(u64::MAX)
}

/// What the leases do, per rule (by the index the rule was given): for metrics.
pub trait LeaseEvents: Send + Sync + 'static {
    /// A take granted a lease of `units`.
    fn granted(&self, rule: usize, units: u64);
    /// `units` not spent were given back to a lease still held.
    fn returned(&self, rule: usize, units: u64);
    /// `units` not spent could not be given back (the lease had expired, the store
    /// failed, or the grant came with no lease): they count as spent.
    fn expired(&self, rule: usize, units: u64);
    /// A request was denied here, from a denial remembered.
    fn denied_locally(&self, rule: usize);
}

/// Counts nothing.
impl LeaseEvents for () {
    fn granted(&self, _: usize, _: u64) {}
    fn returned(&self, _: usize, _: u64) {}
    fn expired(&self, _: usize, _: u64) {}
    fn denied_locally(&self, _: usize) {}
}

/// One leased rule: its plan, the index its events carry, and its keys' slots.
struct LeasedRule {
    plan: LeasePlan,
    index: usize,
    slots: Slots,
}

/// A [`Store`] that leases the keys of some rules of a shared store (see the module's
/// doc). Checks of other rules, refunds, resets and everything else go to the store
/// it wraps.
pub struct LeasingStore {
    inner: Arc<dyn LeaseStore>,
    rules: std::collections::HashMap<String, LeasedRule, foldhash::fast::RandomState>,
    clock: Arc<dyn Clock>,
    events: Arc<dyn LeaseEvents>,
    /// Every lease given back for good: new requests check on the store directly, and a
    /// take still on its way gives its grant back at once.
    closed: Arc<AtomicBool>,
    /// How often the leases at their deadline are given back.
    every: Duration,
}

impl std::fmt::Debug for LeasingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasingStore")
            .field("rules", &self.rules.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl LeasingStore {
    /// Leases the keys of `rules` (name, plan, the index events carry) on `inner`,
    /// reading time from `clock`. Inside a Tokio runtime, starts the loop that gives
    /// back leases at their deadline (it ends when the store is dropped); built
    /// outside one (a simulation on a virtual clock), it starts none, and its owner
    /// calls [`LeasingStore::give_back_due`] every [`LeasingStore::give_back_every`].
    pub fn new(
        inner: Arc<dyn LeaseStore>,
        rules: impl IntoIterator<Item = (String, LeasePlan, usize)>,
        clock: Arc<dyn Clock>,
        events: Arc<dyn LeaseEvents>,
    ) -> Arc<Self> {
        let rules: std::collections::HashMap<_, _, _> = rules
            .into_iter()
            .map(|(name, plan, index)| {
                let rule = LeasedRule {
                    plan,
                    index,
                    slots: Slots::default(),
                };
                (name, rule)
            })
            .collect();
        let every = rules
            .values()
            .map(|r| r.plan.hold / 8)
            .min()
            .unwrap_or(Duration::from_millis(250))
            .clamp(Duration::from_millis(5), Duration::from_millis(250));
        let store = Arc::new(Self {
            inner,
            rules,
            clock,
            events,
            closed: Arc::new(AtomicBool::new(false)),
            every,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&store);
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(store) = weak.upgrade() else { break };
                    store.give_back_due().await;
                }
            });
        }
        store
    }

    /// Gives back every lease held and leases nothing more: on reload (a new engine
    /// takes its own) and shutdown. Requests still in flight on this store check on
    /// the shared store directly.
    pub async fn release_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.give_back_where(|slot, _| slot.release()).await;
    }

    /// How often the loop calls [`LeasingStore::give_back_due`]: an eighth of the
    /// shortest hold, between 5 ms and 250 ms.
    pub fn give_back_every(&self) -> Duration {
        self.every
    }

    /// Gives back the leases at their deadline, and forgets the quiet keys: what the
    /// loop does at each tick.
    pub async fn give_back_due(&self) {
        let now = self.clock.now();
        self.give_back_where(|slot, plan| slot.release_due(now, plan.keep_spent()))
            .await;
        for rule in self.rules.values() {
            rule.slots.forget_idle(now);
        }
    }

    /// Gives back the leases `release` takes out of their slots.
    async fn give_back_where(
        &self,
        release: impl Fn(&slot::Slot, &LeasePlan) -> Option<(weir_core::Closing, Policy)>,
    ) {
        // Rule by rule in the order they were given, whatever the map's seed.
        let mut rules: Vec<_> = self.rules.iter().collect();
        rules.sort_unstable_by_key(|(_, rule)| rule.index);
        for (name, rule) in rules {
            for (identity, slot) in rule.slots.leased() {
                let Some((closing, policy)) = release(&slot.slot, &rule.plan) else {
                    continue;
                };
                let key = Key {
                    rule: name,
                    identity: &identity,
                };
                self.give_back_closing(rule.index, key, &policy, closing)
                    .await;
            }
        }
    }

    /// Gives a lease back on the store and counts what became of its units.
    async fn give_back_closing(
        &self,
        index: usize,
        key: Key<'_>,
        policy: &Policy,
        closing: weir_core::Closing,
    ) {
        let found = self
            .inner
            .give_back(key, policy, closing.lease, closing.unspent)
            .await;
        match found {
            Ok(true) => self.events.returned(index, closing.unspent),
            Ok(false) => self.events.expired(index, closing.unspent),
            Err(error) => {
                tracing::debug!(%error, rule = key.rule, "a lease could not be given back; its units count as spent until it expires");
                self.events.expired(index, closing.unspent);
            }
        }
    }

    /// The leased rule of `check`, if its rule is leased and its algorithm can be.
    fn leased(&self, check: &Check<'_>) -> Option<&LeasedRule> {
        self.rules
            .get(check.key.rule)
            .filter(|_| leasable(check.policy).is_ok())
    }
}

/// Leases are the shared store's: a take on this store is a take there.
impl Wraps for LeasingStore {
    type Inner = dyn LeaseStore;

    fn inner(&self) -> &dyn LeaseStore {
        &*self.inner
    }
}

/// Checks decided here (leased keys) or on the shared store; the rest goes to the
/// shared store.
impl Store for LeasingStore {
    fn decide<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        within: Option<Duration>,
    ) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(async move {
            let decided = self.decide_leased(checks, preview, within);
            match within {
                Some(timeout) => tokio::time::timeout(timeout, decided)
                    .await
                    .unwrap_or(Err(StoreError::Timeout(timeout))),
                None => decided.await,
            }
        })
    }

    /// Refunds go to the shared store, leased keys' too: the state there is capped by
    /// the units out in leases at the next take, so a refund can only give back what
    /// was spent.
    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        self.inner.refund_all(checks)
    }

    /// Charges go to the shared store, as refunds do. A debt on a leased key waits in
    /// its state until the next take, which grants nothing before it is paid.
    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        self.inner.charge_all(checks)
    }

    /// Settlements go to the shared store, as refunds and charges do.
    fn settle_all<'a>(
        &'a self,
        id: u128,
        refunds: &'a [Check<'a>],
        charges: &'a [Check<'a>],
    ) -> StoreFuture<'a, Settled> {
        self.inner.settle_all(id, refunds, charges)
    }

    /// Forgets this instance's lease of the key (its record goes with the state) and
    /// resets the key on the store.
    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()> {
        if let Some(rule) = self.rules.get(key.rule)
            && let Some(slot) = rule.slots.get(key.identity)
        {
            slot.slot.forget();
        }
        self.inner.reset(key, policy)
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }
}

#[cfg(all(test, not(feature = "loom")))]
#[allow(
    clippy::unwrap_used,
    reason = "test code (clippy's test allowance does not see a compound cfg)"
)]
mod tests {
    use weir_core::Algorithm;

    use super::*;

    #[test]
    fn an_auto_batch_holds_this_instances_share_of_the_capacity() {
        assert_eq!(share_of(200, (0, 0)), 12, "nothing known: a sixteenth");
        assert_eq!(share_of(200, (80, 320)), 50, "a quarter of the takes");
        assert_eq!(share_of(200, (5, 320)), 12, "at least a sixteenth");
        assert_eq!(
            share_of(200, (400, 320)),
            200,
            "never more than the capacity"
        );
        assert_eq!(share_of(u64::MAX, (1, 2)), u64::MAX / 2);
    }

    #[test]
    fn a_small_burst_is_leased_in_shares_not_sixteenths() {
        // 20,000 a minute with a burst of 200, asked 166 a second here.
        let policy = Policy::new(
            Algorithm::TokenBucket,
            20_000,
            Duration::from_secs(60),
            Some(200),
        )
        .unwrap();
        let plan = LeasePlan::auto();
        let sizes = |share, starving| plan.take_sizes(&policy, 332, share, starving, false, 1);
        assert_eq!(sizes((0, 0), false), (1, 12, AUTO_HOLD), "a first take");
        assert_eq!(sizes((83, 333), false), (1, 49, AUTO_HOLD), "one of four");
        assert_eq!(sizes((83, 333), true), (24, 49, AUTO_HOLD), "starving");
        assert_eq!(
            sizes((333, 333), false),
            (1, 200, AUTO_HOLD),
            "alone: the capacity (it would spend 249 in the 1.5 s a lease is spent)"
        );
    }

    #[test]
    fn a_lukewarm_key_is_leased_once_a_lease_would_serve_two_requests() {
        // The seed's pro plan: 1,000 a minute.
        let policy = Policy::new(Algorithm::Gcra, 1_000, Duration::from_secs(60), None).unwrap();
        let plan = LeasePlan::auto();
        let sizes = |asked| plan.take_sizes(&policy, asked, (0, 0), false, false, 1);
        // Asked 3 times in two seconds here: 2.25 expected in the 1.5 s a lease is spent.
        assert_eq!(sizes(3), (1, 2, AUTO_HOLD));
        assert_eq!(sizes(8), (1, 6, AUTO_HOLD));
        // Twice in two seconds: a lease of one unit would serve only its own request.
        assert_eq!(sizes(2), (1, 1, Duration::ZERO), "checked on the store");
        // Hotter than the key refills: what refills in 1.5 s (25 units).
        assert_eq!(sizes(1_000), (1, 25, AUTO_HOLD));
        // A request costing the batch or more (an export, 50) is checked on the store:
        // its lease would hold nothing once it is spent.
        let export = |asked| plan.take_sizes(&policy, asked, (0, 0), false, false, 50);
        assert_eq!(export(1_000), (50, 50, Duration::ZERO));
        let three = plan.take_sizes(&policy, 4, (0, 0), false, false, 3);
        assert_eq!(
            three,
            (3, 3, Duration::ZERO),
            "a batch of 3 for a cost of 3"
        );
    }

    #[test]
    fn a_key_of_a_small_burst_is_not_leased_by_auto() {
        let plan = LeasePlan::auto();
        let burst = |burst| {
            let policy = Policy::new(
                Algorithm::TokenBucket,
                100,
                Duration::from_secs(1),
                Some(burst),
            )
            .unwrap();
            plan.take_sizes(&policy, 32, (8, 32), false, false, 1)
        };
        assert_eq!(burst(40), (1, 1, Duration::ZERO), "checked on the store");
        assert_eq!(burst(63), (1, 1, Duration::ZERO));
        assert_eq!(burst(64), (1, 16, AUTO_HOLD), "a quarter of the capacity");
        // A fixed batch is the operator's choice, whatever the burst.
        let fixed = LeasePlan {
            batch: Batch::Fixed(10),
            hold: AUTO_HOLD,
        };
        let small = Policy::new(
            Algorithm::TokenBucket,
            100,
            Duration::from_secs(1),
            Some(40),
        )
        .unwrap();
        assert_eq!(
            fixed.take_sizes(&small, 32, (8, 32), false, false, 1),
            (1, 10, AUTO_HOLD)
        );
    }
}
