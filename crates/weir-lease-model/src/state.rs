//! The state of the system: the shared store, the instances, the messages in flight,
//! what was admitted at each tick, and a ghost ledger of every unit the store granted.
//!
//! Every number is a small integer (`u8`): the model is bounded, and the checker
//! fingerprints every state it reaches.

use std::collections::{BTreeMap, BTreeSet};

use stateright::Representative;

/// A lease's identifier, assigned by the store (a counter: never reused).
pub type LeaseId = u8;

/// A take request is named by the tick its instance sent it, echoed in the grant. Two
/// takes one instance sent in one tick (after giving up on the first) share the name:
/// either grant then gives the same deadline, which is all the name is for.
pub type TakeId = u8;

/// Which instance, an index into [`State::instances`].
pub type InstanceId = u8;

/// The whole system at one instant.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct State {
    /// The current tick. Every clock reads the same tick: the protocol only compares
    /// durations measured on one side's own clock, so one shared clock loses nothing.
    pub now: u8,
    /// The shared store (one Redis key of one rule).
    pub store: Store,
    /// The gateway instances that lease from the key.
    pub instances: Vec<Instance>,
    /// The messages sent and neither delivered nor lost yet: a set, so any of them may be
    /// delivered next (reordering), at any later tick (delay), or lost.
    pub network: BTreeSet<Msg>,
    /// Units admitted at each tick (`admitted[t]`, `t` in `0..=now`), by lease spends and
    /// direct checks together.
    pub admitted: Vec<u8>,
    /// Take requests sent so far, by all instances (bounded by the model).
    pub takes_sent: u8,
    /// Instances crashed so far (bounded by the model).
    pub crashes: u8,
    /// Ghost state: the checker's bookkeeping, invisible to the protocol.
    pub ledger: Ledger,
}

/// The shared store: one key, every operation on it atomic (one Lua script).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Store {
    /// Tokens available now, `0..=capacity - outstanding` when the refill is capped.
    pub tokens: u8,
    /// The unexpired lease records.
    pub leases: BTreeMap<LeaseId, Record>,
    /// The next lease id to hand out.
    pub next_lease: LeaseId,
    /// Refill ticks since the last call, not yet added: only a
    /// [`Refill::CappedPerCall`](crate::Refill::CappedPerCall) store leaves any.
    pub unrefilled: u8,
}

impl Store {
    /// Units held in unexpired lease records: still counted against the capacity.
    #[must_use]
    pub fn outstanding(&self) -> u8 {
        self.leases.values().map(|record| record.units).sum()
    }
}

/// One lease as the store records it.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Record {
    /// Units granted.
    pub units: u8,
    /// The tick at which the store drops the record (`granted + hold`): from then on its
    /// units are considered spent.
    pub expires: u8,
    /// Ghost: units of this lease its holder has spent. The store never reads it.
    pub spent: u8,
}

/// One gateway instance's local view of the key.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instance {
    /// False once crashed (the model does not restart a crashed instance).
    pub up: bool,
    /// The lease it spends from, if any; it holds at most one, and forgets it when its
    /// last unit is spent.
    pub lease: Option<Held>,
    /// The take it sent and awaits a reply to, if any: the tick it sent it. Its hold
    /// is measured from there.
    pub pending: Option<TakeId>,
    /// Requests before this tick are denied locally: the store said nothing refills
    /// earlier.
    pub denied_until: u8,
}

/// A lease as its instance holds it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    /// The store's id for it, to return it by.
    pub id: LeaseId,
    /// Units left to spend, always more than zero.
    pub units: u8,
    /// The instance spends only while `now < deadline`; `deadline = sent + hold`, where
    /// `sent` is when the instance sent the take, so the deadline is never later than
    /// the store's expiry `granted + hold`.
    pub deadline: u8,
}

/// A message between an instance and the store.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Msg {
    /// Instance `from` asks for up to `batch` units.
    Take {
        /// The sender.
        from: InstanceId,
        /// The request's name: the tick it was sent.
        take: TakeId,
    },
    /// The store's reply to a take.
    Grant {
        /// The instance that asked.
        to: InstanceId,
        /// The request this answers.
        take: TakeId,
        /// The lease, when `units > 0`.
        lease: Option<LeaseId>,
        /// Units granted, `min(batch, tokens)`.
        units: u8,
        /// When `units == 0`: ticks until the next token.
        retry: u8,
    },
    /// An instance gives back the units of a lease it did not spend.
    Return {
        /// The lease.
        lease: LeaseId,
        /// Units unspent.
        units: u8,
    },
}

impl Msg {
    /// The instance the message is from or to, if it names one.
    const fn instance(&self) -> Option<InstanceId> {
        match self {
            Self::Take { from, .. } => Some(*from),
            Self::Grant { to, .. } => Some(*to),
            Self::Return { .. } => None,
        }
    }

    fn with_instance(&self, id: InstanceId) -> Self {
        let mut msg = self.clone();
        match &mut msg {
            Self::Take { from, .. } => *from = id,
            Self::Grant { to, .. } => *to = id,
            Self::Return { .. } => {}
        }
        msg
    }
}

/// Ghost bookkeeping: where every unit the store granted went. Checked by the
/// properties, never read by the protocol.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
pub struct Ledger {
    /// Units the store granted in leases.
    pub granted: u8,
    /// Units spent by instances from leases.
    pub spent: u8,
    /// Units the store took back from returns of live records.
    pub returned: u8,
    /// Units of records that expired unspent (released by expiry: held by a crashed
    /// instance, lost in a message, returned too late, or just not spent in time).
    pub released: u8,
    /// Units admitted by direct (non-leasing) checks.
    pub direct: u8,
    /// Spends from a lease whose record was gone, or beyond its units: must stay 0.
    pub spent_without_record: u8,
    /// Accepted returns whose units were not exactly the record's unspent units: must
    /// stay 0.
    pub wrong_returns: u8,
    /// Whether a return arrived after its record expired (and was ignored).
    pub return_ignored: bool,
    /// Whether a record expired at the store.
    pub expired: bool,
    /// Whether an instance gave up waiting for a reply (what it sees of a lost or late
    /// one).
    pub gave_up: bool,
}

impl Representative for State {
    /// Instances are interchangeable: sort them, and rename the instance in every message
    /// accordingly. (Lease and take ids name no instance.)
    fn representative(&self) -> Self {
        let mut order: Vec<usize> = (0..self.instances.len()).collect();
        order.sort_by(|&a, &b| self.instances[a].cmp(&self.instances[b]));
        // order[new] = old; rename[old] = new.
        let mut rename = vec![0; order.len()];
        for (new, &old) in (0u8..).zip(&order) {
            rename[old] = new;
        }
        Self {
            instances: order
                .iter()
                .map(|&old| self.instances[old].clone())
                .collect(),
            network: self
                .network
                .iter()
                .map(|msg| match msg.instance() {
                    Some(old) => msg.with_instance(rename[usize::from(old)]),
                    None => msg.clone(),
                })
                .collect(),
            ..self.clone()
        }
    }
}
