//! Settling a request's reservations once its answer is known: kept when the status
//! counts, given back when it does not, the caller's keys reset on a reset status, a
//! lockout begun when a counted failure took the last unit, and an estimated cost
//! trued up to the one the answer states (`cost_from`): what was not used given back
//! (never more than was reserved), what was used beyond charged as a debt.
//!
//! A settlement dropped unsettled (the client hung up, the upstream never answered, a
//! `/v1/decide` caller never reported) is settled as "no answer": every reservation is
//! kept, so an attempt that may have reached the app always counts.

use std::sync::{Arc, Weak};

use weir_core::{Algorithm, MAX_SLIDING_LOG_LIMIT, Policy};
use weir_store::{Check, Key, Store, StoreError};

use super::owed::{Debt, Tried, is_outage};
use super::{CostFrom, DEFAULT_DEBT_BUCKETS, Engine, HeldSlots, Lockout, MAX_DEBT_BUCKETS, Rule};
use crate::metrics::StoreOp;

/// Which store a request was decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StoreUsed {
    /// The configured store.
    Shared,
    /// This instance's local fallback, while the shared store was down.
    Fallback,
}

/// One rule's reservation for one request.
#[derive(Debug)]
pub(super) struct Reserved {
    /// The rule's index among the engine's routed rules.
    pub(super) rule: usize,
    pub(super) identity: String,
    pub(super) policy: Policy,
    pub(super) cost: u64,
    /// Whether the reservation took the last unit: a counted failure then locks out.
    pub(super) last_unit: bool,
    /// Whether a reset status may reset the key: only when the request wrote its
    /// identities exactly as keyed (see `Identity::exact`).
    pub(super) resettable: bool,
    /// Where the answer states the actual cost, when `cost` is an estimate.
    pub(super) cost_from: Option<CostFrom>,
}

impl Reserved {
    fn check<'a>(&'a self, rule: &'a Rule) -> Check<'a> {
        self.check_of(rule, self.cost)
    }

    /// The charges for a stated `cost` above the reserved one, in steps of at most
    /// one bucket (`weir_core::charge` owes at most one a step), up to the rule's
    /// `cost_max`; and what is stated past that, not charged.
    fn beyond<'a>(&'a self, rule: &'a Rule, cost: u64) -> (Vec<Check<'a>>, Option<Check<'a>>) {
        let bucket = self.policy.capacity();
        let max = rule
            .cost_max
            .unwrap_or(bucket.saturating_mul(DEFAULT_DEBT_BUCKETS))
            .min(bucket.saturating_mul(MAX_DEBT_BUCKETS))
            .max(self.cost);
        let over = (cost > max).then(|| self.check_of(rule, cost - max));
        let mut left = cost.min(max) - self.cost;
        let mut steps = Vec::new();
        while left > 0 {
            let step = left.min(bucket);
            steps.push(self.check_of(rule, step));
            left -= step;
        }
        (steps, over)
    }

    fn check_of<'a>(&'a self, rule: &'a Rule, cost: u64) -> Check<'a> {
        Check {
            key: self.key(&rule.name),
            policy: &self.policy,
            cost,
        }
    }

    fn key<'a>(&'a self, rule: &'a str) -> Key<'a> {
        Key {
            rule,
            identity: &self.identity,
        }
    }
}

/// The reservations of an allowed request, waiting for the answer's status.
#[must_use = "a settlement dropped unsettled keeps every reservation"]
pub(crate) struct Settlement {
    /// Weak: the engine keeps parked settlements, and a reload drops the engine with
    /// them (their reservations stay counted).
    engine: Weak<Engine>,
    /// The engine held while a door holds the settlement (not parked): an answer that
    /// streams past a reload still settles on the engine that reserved it.
    held: Option<Arc<Engine>>,
    used: StoreUsed,
    reserved: Vec<Reserved>,
    /// The request's slots of requests in flight, released when the settlement is
    /// settled or dropped, unless a door takes them to hold them longer
    /// ([`Settlement::take_slots`]). Shared with the task that releases them at
    /// the latest [`SETTLE_WITHIN`](super::SETTLE_WITHIN) after the settlement was
    /// parked (it holds them weakly).
    slots: Option<Arc<parking_lot::Mutex<Option<HeldSlots>>>>,
}

impl std::fmt::Debug for Settlement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settlement")
            .field("reserved", &self.reserved.len())
            .finish_non_exhaustive()
    }
}

impl Settlement {
    pub(super) fn new(engine: &Arc<Engine>, used: StoreUsed, reserved: Vec<Reserved>) -> Self {
        Self {
            engine: Arc::downgrade(engine),
            held: Some(Arc::clone(engine)),
            used,
            reserved,
            slots: None,
        }
    }

    /// This settlement, holding `slots` too.
    pub(super) fn holding(mut self, slots: Option<HeldSlots>) -> Self {
        self.slots = slots.map(|slots| Arc::new(parking_lot::Mutex::new(Some(slots))));
        self
    }

    /// Takes the request's slots out, for a door to hold until the request ends
    /// (the answer's body sent, an upgraded connection closed).
    pub(crate) fn take_slots(&mut self) -> Option<HeldSlots> {
        self.slots.take().and_then(|slots| slots.lock().take())
    }

    /// Releases the slots `within` from now at the latest (a parked settlement's:
    /// `/v1/settle` may never come). Needs a Tokio runtime; outside one, they are
    /// released with the settlement only.
    pub(super) fn release_slots_after(&self, within: std::time::Duration) {
        let (Some(slots), Ok(runtime)) = (&self.slots, tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let slots = Arc::downgrade(slots);
        runtime.spawn(async move {
            tokio::time::sleep(within).await;
            if let Some(slots) = slots.upgrade() {
                let expired = slots.lock().take();
                drop(expired);
            }
        });
    }

    /// Lets go of the engine, for a settlement the engine itself keeps (parked).
    pub(super) fn unhold(&mut self) {
        self.held = None;
    }

    /// Where the answer must be read for the actual costs of the rules this settles
    /// (none: [`Settlement::settle`] is enough).
    pub(crate) fn costs_from(&self) -> impl Iterator<Item = &CostFrom> {
        self.reserved.iter().filter_map(|r| r.cost_from.as_ref())
    }

    /// Settles with the answer's HTTP status, and each estimated cost trued up to what
    /// `cost` finds where the rule reads it (`None`: not stated, or not a number; the
    /// estimate stays).
    pub(crate) async fn settle_costs(
        mut self,
        status: u16,
        cost: impl Fn(&CostFrom) -> Option<u64>,
    ) {
        let reserved = std::mem::take(&mut self.reserved);
        let actual = reserved
            .iter()
            .map(|r| r.cost_from.as_ref().and_then(&cost))
            .collect();
        if let Some(engine) = self.engine.upgrade() {
            engine
                .settle(self.used, reserved, Some((status, actual)))
                .await;
        }
    }
}

impl Drop for Settlement {
    fn drop(&mut self) {
        if self.reserved.is_empty() {
            return;
        }
        let reserved = std::mem::take(&mut self.reserved);
        let used = self.used;
        // Without the engine or outside a runtime nothing can be written; the
        // reservations stay kept anyway.
        if let (Some(engine), Ok(runtime)) =
            (self.engine.upgrade(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move { engine.settle(used, reserved, None).await });
        }
    }
}

impl Engine {
    /// Keeps, gives back or resets each reservation by the answer's status, and trues
    /// up each estimated cost to the actual one stated (`answer`: the status and, per
    /// reservation, the actual cost; `None`: no answer is known, so everything is
    /// kept).
    async fn settle(
        &self,
        used: StoreUsed,
        reserved: Vec<Reserved>,
        answer: Option<(u16, Vec<Option<u64>>)>,
    ) {
        let store = self.store_used(used);
        let rules = &self.routing.rules;
        let (status, actual) = match answer {
            Some((status, actual)) => (Some(status), actual),
            None => (None, Vec::new()),
        };
        let mut refunds = Vec::new();
        let mut unused = Vec::new();
        let mut charges = Vec::new();
        let mut forgiven = Vec::new();
        let mut resets = Vec::new();
        let mut lockouts = Vec::new();
        for (i, r) in reserved.iter().enumerate() {
            let rule = &rules[r.rule];
            match status {
                Some(status) if rule.reset_statuses.contains(&status) && r.resettable => {
                    resets.push(r);
                }
                Some(status)
                    if rule.counts_by_outcome() && !rule.count_statuses.contains(&status) =>
                {
                    refunds.push(r.check(rule));
                }
                _ => {
                    match actual.get(i).copied().flatten() {
                        Some(cost) if cost < r.cost => unused.push(r.check_of(rule, r.cost - cost)),
                        Some(cost) if cost > r.cost => {
                            let (charged, over) = r.beyond(rule, cost);
                            charges.extend(charged);
                            forgiven.extend(over);
                        }
                        _ => {}
                    }
                    if let (true, Some(lockout)) = (r.last_unit, &rule.lockout) {
                        lockouts.push((r, rule, lockout));
                    }
                }
            }
        }
        self.metrics.costs_settled(&unused, &charges, &forgiven);
        refunds.append(&mut unused);
        if refunds.is_empty() && charges.is_empty() && lockouts.is_empty() && resets.is_empty() {
            return;
        }
        let timer = self
            .metrics
            .store_timer(StoreOp::Settle, used == StoreUsed::Fallback);
        let mut failed = None;
        if !refunds.is_empty() || !charges.is_empty() {
            failed = self.write(used, &refunds, &charges).await;
        }
        for (r, rule, lockout) in lockouts {
            begin_lockout(store, r, rule, lockout).await;
        }
        for r in resets {
            let rule = &rules[r.rule];
            let mut keys = vec![(r.key(&rule.name), &r.policy)];
            if let Some(lockout) = &rule.lockout {
                keys.push((r.key(&lockout.in_force_rule), &lockout.probe));
                keys.push((r.key(&lockout.count_rule), &lockout.counter));
            }
            for (key, policy) in keys {
                if let Err(error) = store.reset(key, policy).await {
                    tracing::warn!(%error, "a key could not be reset");
                    failed.get_or_insert(error);
                }
            }
        }
        timer.finish(failed.as_ref());
    }
}

impl Engine {
    /// Writes a settlement's refunds and charges. When the shared store is out, the
    /// settlement is owed (see `owed`): kept and written when it answers again. Returns
    /// the error, if any (to count).
    async fn write(
        &self,
        used: StoreUsed,
        refunds: &[Check<'_>],
        charges: &[Check<'_>],
    ) -> Option<StoreError> {
        let store = self.store_used(used);
        let (id, _) = self.settlement_ids.next();
        let ready = store.is_ready();
        let error = store.settle_all(id, refunds, charges).await.err()?;
        match &self.owed {
            Some(owed) if used == StoreUsed::Shared && is_outage(&error) => {
                let now = self.clock.now();
                let tried = Tried::of(&error, ready, now);
                owed.owe(Debt::new(&self.store, id, refunds, charges, tried));
                if self.owed_logged.due(now) {
                    tracing::warn!(%error, "a settlement could not be written: owed, and written when the store answers again");
                }
            }
            _ => tracing::warn!(
                %error,
                "a settlement could not be written: its reservations stay counted and its costs beyond the estimate uncharged"
            ),
        }
        Some(error)
    }
}

/// Starts the caller's next lockout under `rule`: the n-th remembered lasts
/// period × growth^(n-1), capped.
async fn begin_lockout(store: &dyn Store, r: &Reserved, rule: &Rule, lockout: &Lockout) {
    let count = Check {
        key: r.key(&lockout.count_rule),
        policy: &lockout.counter,
        cost: 1,
    };
    let n = match store.check_all(std::slice::from_ref(&count)).await {
        Ok(d) => MAX_SLIDING_LOG_LIMIT - d[0].remaining,
        Err(error) => return tracing::warn!(%error, "a lockout could not be counted"),
    };
    let wait = lockout.wait(r.policy.period(), n);
    let Ok(policy) = Policy::new(Algorithm::Gcra, 1, wait, None) else {
        return;
    };
    let lock = Check {
        key: r.key(&lockout.in_force_rule),
        policy: &policy,
        cost: 1,
    };
    match store.check_all(std::slice::from_ref(&lock)).await {
        Ok(_) => tracing::info!(
            rule = %rule.name,
            identity = %r.identity.escape_debug(),
            lockout = n,
            ?wait,
            "caller locked out"
        ),
        Err(error) => tracing::warn!(%error, "a lockout could not be started"),
    }
}
