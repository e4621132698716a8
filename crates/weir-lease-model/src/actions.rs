//! The model's parameters and its actions: what each participant may do next, and
//! what it changes. This is the protocol, step by step.

use std::collections::{BTreeMap, BTreeSet};

use stateright::{Model, Property};

use crate::state::{Held, Instance, InstanceId, Ledger, Msg, Record, State, Store};

/// How the store refills the bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refill {
    /// The protocol: tokens never exceed `capacity - outstanding`, so the bucket cannot
    /// refill under units held in leases.
    Capped,
    /// Broken, for the test that shows the properties can fail: tokens refill up to
    /// `capacity` whatever the leases hold.
    Uncapped,
    /// A pitfall of a lazy store: at each call it adds all the refill since the last
    /// call, capped once, by what is outstanding *now* (after dropping the records that
    /// expired meanwhile). Refill that came while a since-expired lease held the bucket
    /// at its cap is then credited after all. A lazy store must apply the cap piecewise,
    /// between the expiry instants, which is what [`Refill::Capped`] does tick by tick.
    CappedPerCall,
}

/// Where an instance measures its hold from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldFrom {
    /// The protocol: from when it sent the take, so its deadline is never later than
    /// the store's expiry.
    Sent,
    /// A pitfall: from when the grant arrived. A delayed grant then outlives its record:
    /// the instance spends units the store has already released.
    Received,
}

/// One bounded instance of the protocol: a policy, how many instances, and how far the
/// checker explores.
#[derive(Clone, Debug)]
pub struct LeaseModel {
    /// Gateway instances leasing from the key.
    pub instances: u8,
    /// `C`: the bucket's capacity (the burst), in units.
    pub capacity: u8,
    /// `R`: one unit is refilled at every tick that is a multiple of `R`.
    pub refill_every: u8,
    /// `B`: the most units one take asks for.
    pub batch: u8,
    /// `H`: how many ticks a lease is held.
    pub hold: u8,
    /// Time runs over the ticks `0..=last_tick`.
    pub last_tick: u8,
    /// The most take requests all instances together send.
    pub max_takes: u8,
    /// The most instances that crash.
    pub max_crashes: u8,
    /// The most units a non-leasing caller admits by checking the key directly.
    pub max_direct: u8,
    /// How the store refills.
    pub refill: Refill,
    /// Where instances measure the hold from.
    pub hold_from: HoldFrom,
}

/// Something that happens next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Time advances one tick: the store drops expired records, then refills.
    Tick,
    /// A request at the instance, served from its lease (`now < deadline`).
    Spend(InstanceId),
    /// A request at the instance, which holds no lease, awaits no reply and is not
    /// denying locally: it sends a take. (A request it denies locally changes nothing,
    /// so it is no action.)
    Take(InstanceId),
    /// The instance gives back what it did not spend: its deadline passed, or it
    /// reloads, or it shuts down (any time it holds a lease).
    Return(InstanceId),
    /// The instance stops waiting for a take's reply (a timeout).
    GiveUp(InstanceId),
    /// The instance crashes holding a lease: its units vanish, never returned.
    Crash(InstanceId),
    /// A non-leasing caller checks the key directly at the store (one unit).
    Direct,
    /// A message arrives. Any message in flight may arrive next (reordering), at any
    /// later tick (delay), or never (loss): a lost message is one never delivered, so the
    /// model needs no separate loss step (it would only add states that behave the same).
    Deliver(Msg),
}

impl LeaseModel {
    /// The protocol with the given policy, for 3 instances, with the cap.
    #[must_use]
    pub const fn new(capacity: u8, refill_every: u8, batch: u8, hold: u8) -> Self {
        Self {
            instances: 3,
            capacity,
            refill_every,
            batch,
            hold,
            last_tick: 4,
            max_takes: 4,
            max_crashes: 1,
            max_direct: 1,
            refill: Refill::Capped,
            hold_from: HoldFrom::Sent,
        }
    }

    /// The most tokens the store may hold given `outstanding` units in leases.
    const fn token_cap(&self, outstanding: u8) -> u8 {
        match self.refill {
            Refill::Capped | Refill::CappedPerCall => self.capacity.saturating_sub(outstanding),
            Refill::Uncapped => self.capacity,
        }
    }

    /// Every store call starts here: a [`Refill::CappedPerCall`] store adds the refill
    /// since its last call, capped by what is outstanding now. (The other stores refill
    /// at each tick, so there is nothing left to add.)
    fn store_call(&self, state: &mut State) {
        let units = std::mem::take(&mut state.store.unrefilled);
        let cap = self.token_cap(state.store.outstanding());
        state.store.tokens = state
            .store
            .tokens
            .max((state.store.tokens + units).min(cap));
    }

    /// The store answers a take from `from`: `k = min(batch, tokens)`.
    fn store_take(&self, state: &mut State, from: InstanceId, take: u8) {
        self.store_call(state);
        let now = state.now;
        let units = self.batch.min(state.store.tokens);
        state.store.tokens -= units;
        let lease = (units > 0).then(|| {
            let id = state.store.next_lease;
            state.store.next_lease += 1;
            state.store.leases.insert(
                id,
                Record {
                    units,
                    expires: now + self.hold,
                    spent: 0,
                },
            );
            state.ledger.granted += units;
            id
        });
        // Ticks until the next refill. (A return may bring a token sooner; the instance
        // then denies a little longer than it had to, never admits more.)
        let retry = if units == 0 {
            self.refill_every - now % self.refill_every
        } else {
            0
        };
        state.network.insert(Msg::Grant {
            to: from,
            take,
            lease,
            units,
            retry,
        });
    }

    /// The store takes back `units` of `lease`, if its record is still live.
    fn store_return(&self, state: &mut State, lease: u8, units: u8) {
        self.store_call(state);
        let Some(record) = state.store.leases.remove(&lease) else {
            // Expired already: its units were released then; counting them again would
            // admit them twice.
            state.ledger.return_ignored = true;
            return;
        };
        if units != record.units.saturating_sub(record.spent) {
            state.ledger.wrong_returns += 1;
        }
        state.ledger.returned += units;
        let cap = self.token_cap(state.store.outstanding());
        // Never above the cap; never below what it held (a refill never takes away).
        state.store.tokens = state
            .store
            .tokens
            .max((state.store.tokens + units).min(cap));
    }

    /// A grant reaches instance `to`.
    fn instance_grant(&self, state: &mut State, to: InstanceId, msg: &Msg) {
        let Msg::Grant {
            take,
            lease,
            units,
            retry,
            ..
        } = *msg
        else {
            return;
        };
        let now = state.now;
        let instance = &mut state.instances[usize::from(to)];
        if !instance.up {
            // Its units vanish with it; the record expires in time.
            return;
        }
        match (instance.pending, lease) {
            (Some(sent), Some(id)) if sent == take => {
                instance.pending = None;
                let from = match self.hold_from {
                    HoldFrom::Sent => sent,
                    HoldFrom::Received => now,
                };
                instance.lease = Some(Held {
                    id,
                    units,
                    deadline: from + self.hold,
                });
            }
            (Some(sent), None) if sent == take => {
                instance.pending = None;
                instance.denied_until = now + retry;
            }
            // A reply to a take it gave up on: never spent, given straight back.
            (_, Some(id)) => {
                state.network.insert(Msg::Return { lease: id, units });
            }
            (_, None) => {}
        }
    }

    /// Time advances: records at their expiry are dropped (their units are considered
    /// spent), then the bucket refills if this tick is a refill tick.
    fn tick(&self, state: &mut State) {
        state.now += 1;
        state.admitted.push(0);
        let now = state.now;
        let (expired, live): (BTreeMap<_, _>, BTreeMap<_, _>) =
            std::mem::take(&mut state.store.leases)
                .into_iter()
                .partition(|(_, record)| record.expires <= now);
        state.store.leases = live;
        for record in expired.values() {
            state.ledger.expired = true;
            state.ledger.released += record.units.saturating_sub(record.spent);
        }
        if now.is_multiple_of(self.refill_every) && self.refill == Refill::CappedPerCall {
            state.store.unrefilled += 1;
        } else if now.is_multiple_of(self.refill_every) {
            let cap = self.token_cap(state.store.outstanding());
            if state.store.tokens < cap {
                state.store.tokens += 1;
            }
        }
    }

    fn admit(state: &mut State) {
        if let Some(last) = state.admitted.last_mut() {
            *last += 1;
        }
    }
}

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            store: Store {
                tokens: self.capacity,
                leases: BTreeMap::new(),
                next_lease: 0,
                unrefilled: 0,
            },
            instances: vec![
                Instance {
                    up: true,
                    lease: None,
                    pending: None,
                    denied_until: 0,
                };
                usize::from(self.instances)
            ],
            network: BTreeSet::new(),
            admitted: vec![0],
            takes_sent: 0,
            crashes: 0,
            ledger: Ledger::default(),
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.last_tick {
            actions.push(Action::Tick);
        }
        for (id, instance) in (0u8..).zip(&state.instances) {
            if !instance.up {
                continue;
            }
            match &instance.lease {
                Some(held) => {
                    if state.now < held.deadline {
                        actions.push(Action::Spend(id));
                    }
                    actions.push(Action::Return(id));
                }
                None => {
                    if instance.pending.is_none()
                        && state.now >= instance.denied_until
                        && state.takes_sent < self.max_takes
                    {
                        actions.push(Action::Take(id));
                    }
                }
            }
            if instance.pending.is_some() {
                actions.push(Action::GiveUp(id));
            }
            // A crash matters when units vanish with it; an instance that crashes holding
            // none is one that stays silent, which every run already includes.
            if state.crashes < self.max_crashes && instance.lease.is_some() {
                actions.push(Action::Crash(id));
            }
        }
        if state.ledger.direct < self.max_direct
            && (state.store.tokens > 0 || state.store.unrefilled > 0)
        {
            actions.push(Action::Direct);
        }
        for msg in &state.network {
            actions.push(Action::Deliver(msg.clone()));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let now = state.now;
        match action {
            Action::Tick => self.tick(&mut state),
            Action::Spend(id) => {
                let held = state.instances[usize::from(id)].lease.as_mut()?;
                let lease = held.id;
                held.units -= 1;
                if held.units == 0 {
                    state.instances[usize::from(id)].lease = None;
                }
                match state.store.leases.get_mut(&lease) {
                    Some(record) if record.spent < record.units => record.spent += 1,
                    _ => state.ledger.spent_without_record += 1,
                }
                state.ledger.spent += 1;
                Self::admit(&mut state);
            }
            Action::Take(id) => {
                state.takes_sent += 1;
                state.instances[usize::from(id)].pending = Some(now);
                state.network.insert(Msg::Take {
                    from: id,
                    take: now,
                });
            }
            Action::Return(id) => {
                let held = state.instances[usize::from(id)].lease.take()?;
                state.network.insert(Msg::Return {
                    lease: held.id,
                    units: held.units,
                });
            }
            Action::GiveUp(id) => {
                state.instances[usize::from(id)].pending = None;
                state.ledger.gave_up = true;
            }
            Action::Crash(id) => {
                let instance = &mut state.instances[usize::from(id)];
                instance.up = false;
                instance.lease = None;
                instance.pending = None;
                instance.denied_until = 0;
                state.crashes += 1;
            }
            Action::Direct => {
                self.store_call(&mut state);
                state.store.tokens = state.store.tokens.checked_sub(1)?;
                state.ledger.direct += 1;
                Self::admit(&mut state);
            }
            Action::Deliver(msg) => {
                state.network.remove(&msg);
                match msg {
                    Msg::Take { from, take } => self.store_take(&mut state, from, take),
                    Msg::Grant { to, .. } => self.instance_grant(&mut state, to, &msg),
                    Msg::Return { lease, units } => self.store_return(&mut state, lease, units),
                }
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::properties::all()
    }
}
