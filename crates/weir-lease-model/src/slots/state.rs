//! The state of the slot protocol: the key's sorted set on Redis, the instances and
//! their requests, the commands in flight, and one ghost record (the slots freed), which
//! only the properties read.

/// The number of instances sharing the key.
pub const INSTANCES: usize = 2;

/// Which instance, an index into [`State::crashed_at`].
pub type InstanceId = u8;

/// Which request, an index into [`State::requests`] (requests are numbered as they
/// arrive, across all instances).
pub type RequestId = u8;

/// The whole system at one instant.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct State {
    /// Redis's clock (`TIME`), in ticks.
    pub now: u8,
    /// The sorted set `<state key>:slots`: one entry per slot id, kept sorted.
    pub slots: Vec<Entry>,
    /// The tick at which the whole key expires (its `PEXPIRE`), 0 when there is no key.
    pub key_expires: u8,
    /// For each instance, the tick it crashed at, if it did.
    pub crashed_at: [Option<u8>; INSTANCES],
    /// Every request so far, live or not.
    pub requests: Vec<Request>,
    /// Commands and replies sent and neither delivered nor lost: a set (sorted, no
    /// duplicates), so any may arrive next (reordering), later (delay), or never (loss).
    pub network: Vec<Msg>,
    /// Ghost: the slot ids whose slot was freed (released, dropped by a take, expired
    /// with the key, or past its deadline). Only the properties read it.
    pub freed: Vec<u8>,
    /// Crashes so far (bounded by the model).
    pub crashes: u8,
}

/// One slot in the sorted set: its id (`ZADD`'s member) and deadline (its score).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// The slot id the instance chose for the request.
    pub id: u8,
    /// The tick of Redis's clock from which the slot is expired (`now + lease` at its
    /// take or last renewal).
    pub deadline: u8,
}

/// One request at one instance.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Request {
    /// The instance deciding it.
    pub instance: InstanceId,
    /// The slot id it takes its slot under.
    pub id: u8,
    /// Where it is.
    pub phase: Phase,
}

/// Where a request is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Phase {
    /// Its take was sent at this tick (the instance's clock measures the wait); no
    /// reply yet (a reply that never comes is a take that timed out: the request is
    /// answered 503 and never holds a slot).
    Taking(u8),
    /// Its take was allowed: the request is in flight, and its instance renews its
    /// slot until it ends.
    Holding,
    /// Its take was denied (429).
    Denied,
    /// It ended (its answer sent, the client gone): its release is sent.
    Ended,
}

/// A command to Redis or a reply from it, about one request.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Msg {
    /// `slots.lua` take, with the instance's lease.
    Take(RequestId),
    /// The take's answer: allowed or not.
    Reply(RequestId, bool),
    /// `slots.lua` renew, with the instance's lease.
    Renew(RequestId),
    /// `ZREM`.
    Release(RequestId),
}

impl Msg {
    /// The request the message is about.
    #[must_use]
    pub const fn request(&self) -> RequestId {
        match *self {
            Self::Take(r) | Self::Reply(r, _) | Self::Renew(r) | Self::Release(r) => r,
        }
    }
}

impl State {
    /// Puts a message in flight.
    pub fn send(&mut self, msg: Msg) {
        if let Err(at) = self.network.binary_search(&msg) {
            self.network.insert(at, msg);
        }
    }

    /// The entry of slot `id`, if the set holds it.
    #[must_use]
    pub fn entry(&self, id: u8) -> Option<&Entry> {
        self.slots.iter().find(|e| e.id == id)
    }

    /// Whether the instance is up.
    #[must_use]
    pub fn live(&self, instance: InstanceId) -> bool {
        self.crashed_at[usize::from(instance)].is_none()
    }

    /// The slots not expired: those a take counts.
    #[must_use]
    pub fn unexpired(&self) -> usize {
        self.slots.iter().filter(|e| e.deadline > self.now).count()
    }

    /// The requests in flight at live instances: those that believe they hold a slot.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| r.phase == Phase::Holding && self.live(r.instance))
            .count()
    }

    /// Records slot `id` as freed (ghost).
    pub fn free(&mut self, id: u8) {
        if let Err(at) = self.freed.binary_search(&id) {
            self.freed.insert(at, id);
        }
    }
}
