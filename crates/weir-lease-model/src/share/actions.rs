//! The share model's parameters and its actions: what each participant may do next,
//! and what it changes. This is the protocol, step by step.

use stateright::{Model, Property};

use super::state::{Claim, HomeRecord, Msg, REGIONS, Region, RegionId, Seq, State};

/// What home records as `held` at a renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The protocol (the fix): `held = min(e, reserved_i(h))`, the share the region
    /// reported in force, but no more than home still reserves for it. When the region
    /// still enforces `e`, home still reserves it and this is `e`; when the renewal
    /// arrives after home stopped reserving `e`, the region no longer enforces it and
    /// there is nothing to hold.
    Reserved,
    /// The notes as first written: `held = e`. A renewal delayed past the expiry of
    /// the record that reserved `e` makes home reserve `e` again, on top of what it
    /// has since granted to others: home's reservations exceed `G`, and
    /// `G - sum_{j != i} reserved_j` goes negative at the next renewal of another region.
    /// (Shares in force stay within `G` as long as home grants 0 then.)
    AsClaimed,
    /// A pitfall (NoHeld): home forgets the previous share at a renewal (`held = 0`).
    /// A lost reply leaves the region enforcing its old share while home grants it to
    /// others.
    Forgotten,
}

/// Where a region measures its share's deadline from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadlineFrom {
    /// The protocol: from the claim, `D = claimed_at + deadline`, so `D` comes before
    /// home's `h + H`.
    Claim,
    /// A pitfall (HoldFromReply): from the reply's arrival, `D = now + deadline`. A
    /// delayed reply then outlives home's record.
    Reply,
}

/// Whether home refuses stale renewals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// The protocol: a renewal with `seq <= seq_i` is stale and changes nothing.
    Checked,
    /// A pitfall (NoSeq): home records any renewal. An old renewal, reordered after a
    /// newer one whose share the region applied, overwrites the record: home stops
    /// reserving the share in force.
    Unchecked,
}

/// Which replies a region applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// The protocol: only the reply to the open claim (same token), in time.
    OpenClaim,
    /// A pitfall (ApplyAnyReply): any reply, while some claim is open and in time (the
    /// token not compared). A reply to a replaced claim brings a share home has since
    /// overwritten with the replacing renewal.
    AnyReply,
}

/// One bounded instance of the share protocol: the limit, the durations, the rules,
/// and how far the checker explores.
#[derive(Clone, Debug)]
pub struct ShareModel {
    /// The states the runs start from, one share per region for each (summing to at
    /// most `G`): each region has that share in force from a claim at tick 0, with
    /// demand equal to its share, and home has the matching record (as if a round had
    /// just completed at tick 0). A region with share 0 has made no claim yet.
    /// `[0, 0, 0]` is the system's very first state; the others are steady states of
    /// the running system (each share is the demand-weighted target of the demands),
    /// from which few claims reach the states where several regions hold shares.
    pub starts: &'static [[u8; REGIONS]],
    /// `G = L - sum(f_i)`: the grantable units. (The floors are constant and never
    /// exchanged, so the model leaves them out.)
    pub grantable: u8,
    /// `H`: home reserves a recorded share for `H` ticks of its clock.
    pub hold: u8,
    /// A region's share lasts until `claimed_at + deadline` on its clock (`floor(3H/4)`
    /// in the protocol; see the module doc for the discretisation).
    pub deadline: u8,
    /// A claim times out (and may be replaced) this many ticks after it was made, or
    /// later.
    pub claim_timeout: u8,
    /// The demands a claim may report (units per period), chosen nondeterministically.
    pub demands: &'static [u8],
    /// Time runs over the ticks `0..=last_tick`.
    pub last_tick: u8,
    /// The most claims all regions together make (confirmations included).
    pub max_claims: u8,
    /// The most partitions.
    pub max_partitions: u8,
    /// What home records as `held`.
    pub held: Held,
    /// Where a region's deadline is measured from.
    pub deadline_from: DeadlineFrom,
    /// Whether home refuses stale renewals.
    pub seq_check: SeqCheck,
    /// Which replies a region applies.
    pub apply: Apply,
    /// Whether home deletes a record once nothing in it counts any more (its share
    /// expired, nothing held): a TTL on the record, which forgets its `seq` too, so a
    /// renewal delayed past it is not known to be stale. (The regions never forget
    /// their counters: a `seq` must never go backwards.)
    pub home_ttl: bool,
}

/// Something that happens next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Time advances one tick on every clock.
    Tick,
    /// CLAIM at the region, reporting this demand: it has no open claim, or its open
    /// claim timed out. Sends RENEW (dropped if the region is partitioned).
    Claim(RegionId, u8),
    /// The confirm renewal after a shrink: a claim with the shrunk claim's demand, at
    /// once (other steps may still come between: "at once" is not atomic).
    Confirm(RegionId),
    /// The region's open claim times out: another claim may replace it.
    GiveUp(RegionId),
    /// The region is cut off from home: the messages to and from it in flight are
    /// dropped, and so are those sent until it heals.
    Partition(RegionId),
    /// The partition heals.
    Heal(RegionId),
    /// A message arrives. Any message in flight may arrive next (reordering), at any
    /// later tick (delay), or never (loss): a lost message is one never delivered, so the
    /// model needs no separate loss step.
    Deliver(Msg),
}

impl ShareModel {
    /// The protocol for 3 regions (starting from nothing, or from the steady shares
    /// `1, 1, 1` or `2, 1, 0`), `G` grantable units, held `H` ticks at home and
    /// `floor(3H/4)` at the regions, demands 0, 1 or 2, with small bounds.
    #[must_use]
    pub const fn new(grantable: u8, hold: u8) -> Self {
        Self {
            starts: &[[0, 0, 0], [1, 1, 1], [2, 1, 0]],
            grantable,
            hold,
            deadline: hold * 3 / 4,
            claim_timeout: 1,
            demands: &[0, 1, 2],
            last_tick: 4,
            max_claims: 4,
            max_partitions: 0,
            held: Held::Reserved,
            deadline_from: DeadlineFrom::Claim,
            seq_check: SeqCheck::Checked,
            apply: Apply::OpenClaim,
            home_ttl: false,
        }
    }

    /// CLAIM: take a new token, read the demand, note the share in force, send RENEW.
    fn claim(state: &mut State, id: RegionId, demand: u8) {
        let now = state.now;
        state.claims += 1;
        let region = &mut state.regions[usize::from(id)];
        region.seq += 1;
        let in_force = region.in_force(now);
        region.claim = Some(Claim {
            seq: region.seq,
            claimed_at: now,
            demand,
            in_force,
            timed_out: false,
        });
        region.confirm = None;
        let seq = region.seq;
        if !region.partitioned {
            state.send(Msg::Renew {
                from: id,
                seq,
                demand,
                in_force,
            });
        }
    }

    /// RENEW at home, at home's tick `h = now`.
    fn renew(&self, state: &mut State, from: RegionId, seq: Seq, demand: u8, in_force: u8) {
        let h = state.now;
        let i = usize::from(from);
        let grant = if self.seq_check == SeqCheck::Checked && seq <= state.home[i].seq {
            None
        } else {
            let others = (0..REGIONS).filter(|&j| j != i);
            let reserved: u8 = others.clone().map(|j| state.home[j].reserved(h)).sum();
            let avail = self.grantable.saturating_sub(reserved);
            let competing: u8 = others
                .map(|j| &state.home[j])
                .filter(|record| record.unexpired(h) && record.demand > 0)
                .map(|record| record.demand)
                .sum();
            let target = if demand == 0 {
                0
            } else {
                self.grantable * demand / (demand + competing)
            };
            let grant = target.min(avail);
            let held = match self.held {
                Held::Reserved => in_force.min(state.home[i].reserved(h)),
                Held::AsClaimed => in_force,
                Held::Forgotten => 0,
            };
            state.home[i] = HomeRecord {
                share: grant,
                expires: h + self.hold,
                held,
                held_expires: if held > 0 { h + self.hold } else { 0 },
                demand,
                seq,
            };
            Some(grant)
        };
        if !state.regions[i].partitioned {
            state.send(Msg::Reply {
                to: from,
                seq,
                grant,
            });
        }
    }

    /// APPLY at the region: the reply to its open claim, in time, sets the share.
    fn apply(&self, state: &mut State, to: RegionId, seq: Seq, grant: Option<u8>) {
        let now = state.now;
        let region = &mut state.regions[usize::from(to)];
        let Some(claim) = region.claim else {
            // No claim open: the reply is ignored.
            return;
        };
        if claim.seq != seq && self.apply == Apply::OpenClaim {
            // The claim was replaced: the reply is not for it, and is ignored.
            return;
        }
        region.claim = None;
        match grant {
            Some(grant) if now < claim.claimed_at + self.deadline => {
                let from = match self.deadline_from {
                    DeadlineFrom::Claim => claim.claimed_at,
                    DeadlineFrom::Reply => now,
                };
                region.share = grant;
                region.deadline = if grant > 0 { from + self.deadline } else { 0 };
                if grant < claim.in_force {
                    region.confirm = Some(claim.demand);
                }
            }
            // Too late, or stale: the claim is closed, the reply ignored.
            _ => {}
        }
    }

    /// Time advances. A confirm not sent in the tick of its shrink is not sent (its
    /// claimer is gone); the region's next claim is an ordinary one.
    fn tick(state: &mut State) {
        state.now += 1;
        for region in &mut state.regions {
            region.confirm = None;
        }
    }

    /// Brings a state to its canonical form, so that states that behave the same are
    /// one state. Whatever no rule can read any more is cleared: an expired share or
    /// home record, a `held` that `share` covers, the details of a claim whose reply
    /// can no longer be applied. Messages that can change nothing are dropped
    /// (delivering them is the same as losing them). And each region's sequence
    /// numbers are renumbered by rank: the protocol only compares them, and a new
    /// claim takes the largest plus one.
    fn normalise(&self, state: &mut State) {
        let now = state.now;
        for region in &mut state.regions {
            if now >= region.deadline || region.share == 0 {
                region.share = 0;
                region.deadline = 0;
            }
            if let Some(claim) = region.claim.as_mut()
                && now >= claim.claimed_at + self.deadline.max(self.claim_timeout)
            {
                // Its reply can only close it now, and it may time out.
                claim.claimed_at = 0;
                claim.demand = 0;
                claim.in_force = 0;
            }
        }
        for record in &mut state.home {
            if now >= record.expires {
                record.share = 0;
                record.expires = 0;
                record.demand = 0;
            }
            if now >= record.held_expires
                || (record.held <= record.share && record.held_expires <= record.expires)
            {
                record.held = 0;
                record.held_expires = 0;
            }
            if self.home_ttl && record.expires == 0 && record.held_expires == 0 {
                record.seq = 0;
            }
        }
        let mut ranks: [Vec<Seq>; REGIONS] =
            std::array::from_fn(|id| vec![0, state.home[id].seq, state.regions[id].seq]);
        let regions = &state.regions;
        let home = &state.home;
        state.network.retain(|msg| match *msg {
            // Stale: home refuses it, and its claim is not open (the open claim's own
            // renewal is the only one with its number), so the refusal is ignored.
            Msg::Renew { from, seq, .. } => {
                self.seq_check == SeqCheck::Unchecked || seq > home[usize::from(from)].seq
            }
            // A reply is applied, or closes its claim, only while its claim is open.
            Msg::Reply { to, seq, .. } => {
                self.apply == Apply::AnyReply
                    || regions[usize::from(to)]
                        .claim
                        .as_ref()
                        .is_some_and(|claim| claim.seq == seq)
            }
        });
        for msg in &state.network {
            ranks[usize::from(msg.region())].push(msg.seq());
        }
        for seqs in &mut ranks {
            seqs.sort_unstable();
            seqs.dedup();
        }
        let rank = |id: usize, seq: Seq| -> Seq {
            let rank = ranks[id].iter().position(|&s| s == seq).unwrap_or(0);
            Seq::try_from(rank).unwrap_or(Seq::MAX)
        };
        for id in 0..REGIONS {
            state.home[id].seq = rank(id, state.home[id].seq);
            let region = &mut state.regions[id];
            region.seq = rank(id, region.seq);
            if let Some(claim) = region.claim.as_mut() {
                claim.seq = rank(id, claim.seq);
            }
        }
        if ranks
            .iter()
            .any(|seqs| seqs.windows(2).any(|w| w[1] != w[0] + 1))
        {
            for msg in &mut state.network {
                *msg = msg.with_seq(rank(usize::from(msg.region()), msg.seq()));
            }
            state.network.sort_unstable();
        }
    }

    /// Whether the region may claim now: it has no open claim, or it timed out.
    fn may_claim(&self, state: &State, region: &Region) -> bool {
        state.claims < self.max_claims && region.claim.as_ref().is_none_or(|claim| claim.timed_out)
    }
}

impl Model for ShareModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        self.starts
            .iter()
            .map(|shares| {
                let seq = |share: u8| Seq::from(share > 0);
                State {
                    now: 0,
                    home: shares.map(|share| HomeRecord {
                        share,
                        expires: if share > 0 { self.hold } else { 0 },
                        held: 0,
                        held_expires: 0,
                        demand: share,
                        seq: seq(share),
                    }),
                    regions: shares.map(|share| Region {
                        share,
                        deadline: if share > 0 { self.deadline } else { 0 },
                        claim: None,
                        seq: seq(share),
                        confirm: None,
                        partitioned: false,
                    }),
                    network: Vec::new(),
                    claims: 0,
                    partitions: 0,
                }
            })
            .collect()
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.last_tick {
            actions.push(Action::Tick);
        }
        for (id, region) in (0u8..).zip(&state.regions) {
            if self.may_claim(state, region) {
                if region.confirm.is_some() {
                    actions.push(Action::Confirm(id));
                }
                for &demand in self.demands {
                    actions.push(Action::Claim(id, demand));
                }
            }
            if region.claim.as_ref().is_some_and(|claim| {
                !claim.timed_out && state.now >= claim.claimed_at + self.claim_timeout
            }) {
                actions.push(Action::GiveUp(id));
            }
            if region.partitioned {
                actions.push(Action::Heal(id));
            } else if state.partitions < self.max_partitions {
                actions.push(Action::Partition(id));
            }
        }
        for msg in &state.network {
            actions.push(Action::Deliver(*msg));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => Self::tick(&mut state),
            Action::Claim(id, demand) => Self::claim(&mut state, id, demand),
            Action::Confirm(id) => {
                let demand = state.regions[usize::from(id)].confirm?;
                Self::claim(&mut state, id, demand);
            }
            Action::GiveUp(id) => {
                state.regions[usize::from(id)].claim.as_mut()?.timed_out = true;
            }
            Action::Partition(id) => {
                state.partitions += 1;
                state.regions[usize::from(id)].partitioned = true;
                state.network.retain(|msg| msg.region() != id);
            }
            Action::Heal(id) => {
                state.regions[usize::from(id)].partitioned = false;
            }
            Action::Deliver(msg) => {
                if !state.receive(&msg) {
                    return None;
                }
                match msg {
                    Msg::Renew {
                        from,
                        seq,
                        demand,
                        in_force,
                    } => self.renew(&mut state, from, seq, demand, in_force),
                    Msg::Reply { to, seq, grant } => self.apply(&mut state, to, seq, grant),
                }
            }
        }
        self.normalise(&mut state);
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        super::properties::all()
    }
}
