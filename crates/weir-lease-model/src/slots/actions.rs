//! The slot model's parameters and its actions: what each participant may do next, and
//! what it changes. Redis's side is `slots.lua` and `ZREM`, step by step.

use stateright::{Model, Property};

use super::state::{Entry, INSTANCES, InstanceId, Msg, Phase, Request, RequestId, State};

/// How a take or renewal sets the key's time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expire {
    /// The protocol (the fix): the key's TTL only ever grows to the new deadline, so
    /// the key outlives every deadline it holds.
    Extend,
    /// A pitfall, `slots.lua` as first written (found by this model): `PEXPIRE key
    /// lease` at every take and renewal. An instance whose lease is shorter than
    /// another's (a rolling change of `store.slot_lease`) cuts the key's life below the
    /// other's deadlines: the key expires with their slots while their requests last.
    Set,
}

/// What a renewal checks before moving a slot's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenewCheck {
    /// The protocol: only a slot still held and not expired (`ZSCORE`, then `ZADD XX`).
    Unexpired,
    /// A pitfall: a slot still in the set (`ZADD XX` alone). A late renewal revives an
    /// expired slot the next take would have dropped.
    Present,
    /// A pitfall: any slot (`ZADD` without `XX`). A renewal arriving after its release
    /// takes the slot again, uncounted by any take.
    Upsert,
}

/// How instances name their slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ids {
    /// The protocol: an id unique across instances (64 random bits).
    Unique,
    /// A pitfall: a counter per instance (`0, 1, 2, ...`). Two instances' requests
    /// share a slot, and one's release frees the other's.
    PerInstance,
}

/// Whose clock a script reads `now` from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The protocol: Redis's (`TIME`), whatever the instance's clock says.
    Redis,
    /// A pitfall: the instance's, passed in; with [`SlotModel::skew`] ahead of Redis,
    /// its takes drop others' slots before their deadline.
    Instance,
}

/// How long an instance waits for a take's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeWait {
    /// The protocol (the fix): less than the lease from when the take was *sent*, on
    /// the instance's clock; a slot granted later is released, the request answered as
    /// a store timeout. So a request is in flight only while its slot's deadline (a
    /// lease after the take *ran*) is ahead, and its renewals are timed from the send.
    Lease,
    /// A pitfall, the engine as first written (found by this model): as long as
    /// `store.timeout`, which may exceed `store.slot_lease`. A reply that comes after
    /// the slot's deadline starts a request whose slot another take has dropped.
    Timeout,
}

/// One bounded instance of the slot protocol: the limit, the leases, the rules, and
/// how far the checker explores.
#[derive(Clone, Debug)]
pub struct SlotModel {
    /// `limit`: slots of the key at most.
    pub limit: u8,
    /// Each instance's lease (`store.slot_lease`), in ticks, at least 2.
    pub leases: [u8; INSTANCES],
    /// How far each instance's clock is ahead of Redis's, in ticks (read only under
    /// [`Clock::Instance`]).
    pub skew: [u8; INSTANCES],
    /// Whether renewals are timely: every slot of a request in flight is renewed before
    /// its deadline (the renewal loop runs every third of the lease and Redis answers).
    /// When false, a renewal may come late or never: the trade a lease makes.
    pub timely: bool,
    /// Time runs over the ticks `0..=last_tick`.
    pub last_tick: u8,
    /// The most requests, all instances together.
    pub max_requests: u8,
    /// The most crashes.
    pub max_crashes: u8,
    /// How the key's TTL is set.
    pub expire: Expire,
    /// What a renewal checks.
    pub renew: RenewCheck,
    /// How slots are named.
    pub ids: Ids,
    /// Whose clock the scripts read.
    pub clock: Clock,
    /// How long an instance waits for a take's reply.
    pub take_wait: TakeWait,
}

/// Something that happens next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Redis's clock advances one tick: the key expires if its TTL ran out; commands a
    /// crashed instance had not yet written to its socket are gone.
    Tick,
    /// A request arrives at the instance: it sends a take.
    Arrive(InstanceId),
    /// The instance renews the request's slot (its loop, whenever it runs).
    Renew(RequestId),
    /// The request ends (answer sent, client gone, upstream failed): released.
    End(RequestId),
    /// The instance crashes: its requests vanish with it, unreleased. What it already
    /// wrote to Redis's socket may still run, in the same tick.
    Crash(InstanceId),
    /// A message arrives, and is gone. (A command the client retries, so that Redis
    /// runs it twice, needs no step of its own: a second release of a slot is a
    /// no-op, and a renewal run again later is the same as a second renewal the
    /// instance sent while the request lasted, then delivered late.)
    Deliver(Msg),
}

impl SlotModel {
    /// The protocol, with `limit` slots, equal leases of `lease` ticks and timely
    /// renewals, over ticks `0..=3`, `limit + 1` requests, 1 crash.
    #[must_use]
    pub const fn new(limit: u8, lease: u8) -> Self {
        Self {
            limit,
            leases: [lease; INSTANCES],
            skew: [0; INSTANCES],
            timely: true,
            last_tick: 3,
            max_requests: limit + 1,
            max_crashes: 1,
            expire: Expire::Extend,
            renew: RenewCheck::Unexpired,
            ids: Ids::Unique,
            clock: Clock::Redis,
            take_wait: TakeWait::Lease,
        }
    }

    fn lease(&self, state: &State, r: RequestId) -> u8 {
        self.leases[usize::from(state.requests[usize::from(r)].instance)]
    }

    /// The `now` a script of the request's instance reads.
    fn script_now(&self, state: &State, r: RequestId) -> u8 {
        match self.clock {
            Clock::Redis => state.now,
            Clock::Instance => {
                let instance = state.requests[usize::from(r)].instance;
                state.now + self.skew[usize::from(instance)]
            }
        }
    }

    /// Sets the key's TTL after a take or renewal that moved a deadline.
    fn expire(&self, state: &mut State, lease: u8) {
        let until = state.now + lease;
        state.key_expires = match self.expire {
            Expire::Extend => state.key_expires.max(until),
            Expire::Set => until,
        };
    }

    /// `slots.lua` take: drop the slots past their deadline, then add one if fewer
    /// than `limit` are left.
    fn take(&self, state: &mut State, r: RequestId) {
        let now = self.script_now(state, r);
        let dropped: Vec<u8> = state
            .slots
            .iter()
            .filter(|e| e.deadline <= now)
            .map(|e| e.id)
            .collect();
        for id in dropped {
            state.free(id);
        }
        state.slots.retain(|e| e.deadline > now);
        let allowed = state.slots.len() < usize::from(self.limit);
        if allowed {
            let id = state.requests[usize::from(r)].id;
            let deadline = now + self.lease(state, r);
            state.slots.retain(|e| e.id != id);
            state.slots.push(Entry { id, deadline });
            state.slots.sort_unstable();
            self.expire(state, self.lease(state, r));
        }
        if state.slots.is_empty() {
            state.key_expires = 0;
        }
        state.send(Msg::Reply(r, allowed));
    }

    /// `slots.lua` renew: move the slot's deadline to `now + lease` if the check
    /// passes.
    fn renew(&self, state: &mut State, r: RequestId) {
        let now = self.script_now(state, r);
        let id = state.requests[usize::from(r)].id;
        let lease = self.lease(state, r);
        let found = state.slots.iter().position(|e| e.id == id);
        let renewed = match (found, self.renew) {
            (Some(at), RenewCheck::Unexpired) if state.slots[at].deadline > now => Some(at),
            (Some(at), RenewCheck::Present | RenewCheck::Upsert) => Some(at),
            (None, RenewCheck::Upsert) => {
                state.slots.push(Entry { id, deadline: 0 });
                Some(state.slots.len() - 1)
            }
            _ => None,
        };
        if let Some(at) = renewed {
            state.slots[at].deadline = now + lease;
            state.slots.sort_unstable();
            self.expire(state, lease);
        }
    }

    /// `ZREM`.
    fn release(state: &mut State, r: RequestId) {
        let id = state.requests[usize::from(r)].id;
        if state.entry(id).is_some() {
            state.free(id);
            state.slots.retain(|e| e.id != id);
            if state.slots.is_empty() {
                state.key_expires = 0;
            }
        }
    }

    fn deliver(&self, state: &mut State, msg: Msg) {
        match msg {
            Msg::Take(r) => self.take(state, r),
            Msg::Reply(r, allowed) => {
                let lease = self.lease(state, r);
                let Phase::Taking(sent) = state.requests[usize::from(r)].phase else {
                    return;
                };
                let late = self.take_wait == TakeWait::Lease && state.now >= sent + lease;
                state.requests[usize::from(r)].phase = if allowed && !late {
                    Phase::Holding
                } else {
                    Phase::Denied
                };
                // Too late: the slot may have expired already (its deadline is a lease
                // after the take ran, and the take ran after it was sent): released.
                if allowed && late {
                    state.send(Msg::Release(r));
                }
            }
            Msg::Renew(r) => self.renew(state, r),
            Msg::Release(r) => Self::release(state, r),
        }
    }

    fn tick(state: &mut State) {
        state.now += 1;
        let now = state.now;
        let crashed = state.crashed_at;
        let requests = &state.requests;
        state.network.retain(|msg| {
            crashed[usize::from(requests[usize::from(msg.request())].instance)].is_none()
        });
        if state.key_expires != 0 && state.key_expires <= now {
            let ids: Vec<u8> = state.slots.iter().map(|e| e.id).collect();
            for id in ids {
                state.free(id);
            }
            state.slots.clear();
            state.key_expires = 0;
        }
        let expired: Vec<u8> = state
            .slots
            .iter()
            .filter(|e| e.deadline <= now)
            .map(|e| e.id)
            .collect();
        for id in expired {
            state.free(id);
        }
    }

    /// Whether time may advance: under timely renewals, not past the deadline of a
    /// slot a live request holds.
    fn may_tick(&self, state: &State) -> bool {
        state.now < self.last_tick
            && (!self.timely
                || state.requests.iter().all(|r| {
                    r.phase != Phase::Holding
                        || !state.live(r.instance)
                        || state.entry(r.id).is_none_or(|e| e.deadline > state.now + 1)
                }))
    }

    /// Drops messages whose delivery can change nothing (with unique ids and checked
    /// renewals): a reply to a request no longer waiting, a renewal or release of a slot
    /// the set no longer holds (only its own take adds it, and that came first); and
    /// forgets the ghost of slots the set no longer holds, which nothing can add back.
    fn normalise(&self, state: &mut State) {
        if self.ids != Ids::Unique || self.renew == RenewCheck::Upsert {
            return;
        }
        let slots = &state.slots;
        state.freed.retain(|id| slots.iter().any(|e| e.id == *id));
        let requests = &state.requests;
        state.network.retain(|msg| {
            let request = &requests[usize::from(msg.request())];
            match msg {
                Msg::Take(_) => true,
                Msg::Reply(..) => matches!(request.phase, Phase::Taking(_)),
                Msg::Renew(_) | Msg::Release(_) => slots.iter().any(|e| e.id == request.id),
            }
        });
        // A request done with (denied, ended, or waiting for a reply that is no longer
        // in flight) whose slot is gone and of which no message is in flight can change
        // nothing any more: one canonical form, whatever its instance and history.
        for (r, request) in (0..).zip(state.requests.iter_mut()) {
            let inert = request.phase != Phase::Holding
                && !state.network.iter().any(|msg| msg.request() == r)
                && !state.slots.iter().any(|e| e.id == request.id);
            if inert {
                request.instance = 0;
                request.phase = Phase::Denied;
            }
        }
    }
}

impl Model for SlotModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            slots: Vec::new(),
            key_expires: 0,
            crashed_at: [None; INSTANCES],
            requests: Vec::new(),
            network: Vec::new(),
            freed: Vec::new(),
            crashes: 0,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if self.may_tick(state) {
            actions.push(Action::Tick);
        }
        for instance in (0..).take(INSTANCES) {
            if !state.live(instance) {
                continue;
            }
            if state.requests.len() < usize::from(self.max_requests) {
                actions.push(Action::Arrive(instance));
            }
            // A crash of an instance with no request in flight is one that stays
            // silent, which every run already includes.
            let busy = state.requests.iter().any(|r| {
                r.instance == instance && matches!(r.phase, Phase::Taking(_) | Phase::Holding)
            });
            if busy && state.crashes < self.max_crashes {
                actions.push(Action::Crash(instance));
            }
        }
        for (r, request) in (0..).zip(&state.requests) {
            if request.phase == Phase::Holding && state.live(request.instance) {
                actions.push(Action::Renew(r));
                actions.push(Action::End(r));
            }
        }
        for &msg in &state.network {
            actions.push(Action::Deliver(msg));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => Self::tick(&mut state),
            Action::Arrive(instance) => {
                let r = RequestId::try_from(state.requests.len()).ok()?;
                let id = match self.ids {
                    Ids::Unique => r,
                    Ids::PerInstance => {
                        let n = state
                            .requests
                            .iter()
                            .filter(|q| q.instance == instance)
                            .count();
                        u8::try_from(n).ok()?
                    }
                };
                state.requests.push(Request {
                    instance,
                    id,
                    phase: Phase::Taking(state.now),
                });
                state.send(Msg::Take(r));
            }
            Action::Renew(r) => state.send(Msg::Renew(r)),
            Action::End(r) => {
                state.requests[usize::from(r)].phase = Phase::Ended;
                state.send(Msg::Release(r));
            }
            Action::Crash(instance) => {
                state.crashes += 1;
                state.crashed_at[usize::from(instance)] = Some(state.now);
            }
            Action::Deliver(msg) => {
                let at = state.network.binary_search(&msg).ok()?;
                state.network.remove(at);
                self.deliver(&mut state, msg);
            }
        }
        self.normalise(&mut state);
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        super::properties::all()
    }
}
