//! The state of the share protocol: home's records, the regions' local records and the
//! messages in flight. (No ghost state: every property reads the protocol's own.)
//!
//! Every number is a small integer (`u8`): the model is bounded, and the checker
//! fingerprints every state it reaches. After every step the model brings the state to
//! a canonical form, so that states that behave the same are one state: values no rule
//! can read any more are cleared (an expired share becomes 0 with deadline 0, an
//! expired home record all zeros but its `seq`), messages whose delivery can change
//! nothing are dropped, and each region's sequence numbers are renumbered by rank
//! (`0, 1, 2, ...` in order). So the `seq` values in a counterexample are ranks among
//! those still in play, not the counter's history.

use stateright::Representative;

/// The number of regions (the protocol's `N`).
pub const REGIONS: usize = 3;

/// Which region, an index into [`State::regions`] and [`State::home`].
pub type RegionId = u8;

/// A claim's sequence number, from the region's counter (`seq = ++seq`): it is also
/// the claim's token, since a region's claims never share one.
pub type Seq = u8;

/// The whole system at one instant.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct State {
    /// The current tick. Every clock reads the same tick: the protocol only measures
    /// durations, each on one side's own clock, so one shared clock loses nothing but
    /// the rate differences the `H / 4` margin is for (see the module doc).
    pub now: u8,
    /// Home's record of each region, `home[i]` for region `i`.
    pub home: [HomeRecord; REGIONS],
    /// Each region's one local record of the key (in its own store).
    pub regions: [Region; REGIONS],
    /// Messages sent and neither delivered nor lost yet: a set (kept sorted, without
    /// duplicates), so any of them may be delivered next (reordering), at any later
    /// tick (delay), or never (loss).
    pub network: Vec<Msg>,
    /// Claims made so far by all regions, confirmations included (bounded by the model).
    pub claims: u8,
    /// Partitions so far (bounded by the model).
    pub partitions: u8,
}

impl State {
    /// Puts a message in flight.
    pub fn send(&mut self, msg: Msg) {
        if let Err(at) = self.network.binary_search(&msg) {
            self.network.insert(at, msg);
        }
    }

    /// Takes a message out of flight; false if it was not in flight.
    pub fn receive(&mut self, msg: &Msg) -> bool {
        match self.network.binary_search(msg) {
            Ok(at) => {
                self.network.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// The units of `G` the regions enforce now, together.
    #[must_use]
    pub fn in_force(&self) -> u32 {
        self.regions
            .iter()
            .map(|region| u32::from(region.in_force(self.now)))
            .sum()
    }

    /// The units home reserves now, for every region together.
    #[must_use]
    pub fn reserved(&self) -> u32 {
        self.home
            .iter()
            .map(|record| u32::from(record.reserved(self.now)))
            .sum()
    }
}

/// Home's record of one region.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct HomeRecord {
    /// The share home granted at the region's last recorded renewal.
    pub share: u8,
    /// Home's tick from which `share` is no longer reserved (`h + H`).
    pub expires: u8,
    /// The share the region had in force when it claimed that renewal, which it may
    /// still enforce if the reply is lost: home keeps reserving it.
    pub held: u8,
    /// Home's tick from which `held` is no longer reserved (`h + H`).
    pub held_expires: u8,
    /// The region's demand at that renewal, units per period.
    pub demand: u8,
    /// The renewal's sequence number; older renewals are stale.
    pub seq: Seq,
}

impl HomeRecord {
    /// `reserved_i(now) = max(share if now < expires, held if now < held_expires)`.
    #[must_use]
    pub fn reserved(&self, now: u8) -> u8 {
        let share = if now < self.expires { self.share } else { 0 };
        let held = if now < self.held_expires {
            self.held
        } else {
            0
        };
        share.max(held)
    }

    /// Whether the record still counts for the targets of others: it reserves
    /// something, or its share has not expired.
    #[must_use]
    pub fn unexpired(&self, now: u8) -> bool {
        self.reserved(now) > 0 || self.expires > now
    }
}

/// One region's local record of the key, shared by all its instances (its own store;
/// every operation on it atomic).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Region {
    /// `s`: the share it enforces while `now < deadline`.
    pub share: u8,
    /// `D`: the local deadline of `share` (`claimed_at + deadline` of the claim whose
    /// reply set it).
    pub deadline: u8,
    /// The open claim, if any.
    pub claim: Option<Claim>,
    /// The claim counter; the next claim takes `seq + 1`.
    pub seq: Seq,
    /// After applying a reply that shrank its share: the demand to confirm with (the
    /// claimer renews again at once, with the same demand).
    pub confirm: Option<u8>,
    /// Whether the region is cut off from home: messages to and from it are dropped.
    pub partitioned: bool,
}

impl Region {
    /// The share in force: `s` if `now < D`, else 0.
    #[must_use]
    pub const fn in_force(&self, now: u8) -> u8 {
        if now < self.deadline { self.share } else { 0 }
    }
}

/// An open claim: one instance of the region renews the key this round.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Claim {
    /// Its token and sequence number.
    pub seq: Seq,
    /// The local tick it was made at: the reply is applied only before
    /// `claimed_at + deadline`, and the share it brings lasts until then.
    pub claimed_at: u8,
    /// `d`: the demand it reported (units offered since the last claim, per period).
    pub demand: u8,
    /// `e`: the share in force when it was made.
    pub in_force: u8,
    /// Whether the claim timed out: another claim may replace it. Until one does, it
    /// is still the open claim (its reply, if it comes in time, is applied).
    pub timed_out: bool,
}

/// A message between a region and home.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Msg {
    /// RENEW `(i, d, e, seq)`.
    Renew {
        /// The region `i`.
        from: RegionId,
        /// The claim's sequence number.
        seq: Seq,
        /// `d`, units per period.
        demand: u8,
        /// `e`, the share in force at the claim.
        in_force: u8,
    },
    /// Home's reply to a renewal.
    Reply {
        /// The region.
        to: RegionId,
        /// The renewal's sequence number (its claim's token).
        seq: Seq,
        /// The share granted, `g`, or `None` when the renewal was stale.
        grant: Option<u8>,
    },
}

impl Msg {
    /// The region the message is from or to.
    #[must_use]
    pub const fn region(&self) -> RegionId {
        match self {
            Self::Renew { from, .. } => *from,
            Self::Reply { to, .. } => *to,
        }
    }

    /// The sequence number of the claim the message belongs to.
    #[must_use]
    pub const fn seq(&self) -> Seq {
        match self {
            Self::Renew { seq, .. } | Self::Reply { seq, .. } => *seq,
        }
    }

    /// The same message, with another sequence number.
    #[must_use]
    pub fn with_seq(&self, new: Seq) -> Self {
        let mut msg = *self;
        match &mut msg {
            Self::Renew { seq, .. } | Self::Reply { seq, .. } => *seq = new,
        }
        msg
    }

    fn with_region(&self, id: RegionId) -> Self {
        let mut msg = *self;
        match &mut msg {
            Self::Renew { from, .. } => *from = id,
            Self::Reply { to, .. } => *to = id,
        }
        msg
    }
}

impl Representative for State {
    /// Regions are interchangeable (the model gives them no floors): sort the pairs
    /// (region, home's record of it), and rename the region in every message.
    fn representative(&self) -> Self {
        let mut order: [usize; REGIONS] = std::array::from_fn(|id| id);
        order.sort_by(|&a, &b| {
            (&self.regions[a], &self.home[a]).cmp(&(&self.regions[b], &self.home[b]))
        });
        if order.iter().enumerate().all(|(new, &old)| new == old) {
            return self.clone();
        }
        // order[new] = old; rename[old] = new.
        let mut rename = [0; REGIONS];
        for (new, &old) in (0u8..).zip(&order) {
            rename[old] = new;
        }
        let mut network: Vec<Msg> = self
            .network
            .iter()
            .map(|msg| msg.with_region(rename[usize::from(msg.region())]))
            .collect();
        network.sort_unstable();
        Self {
            regions: order.map(|old| self.regions[old]),
            home: order.map(|old| self.home[old]),
            network,
            ..self.clone()
        }
    }
}
