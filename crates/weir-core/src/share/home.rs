//! The home of one key of a global rule: what each region holds of its limit.

use super::{Renewal, ns};
use crate::state::{Inner, State};

/// The region's demand-weighted part of `grantable`: `grantable × demand / (demand +
/// wanted)`, the demands halved first until the product stays below 2^53 (only their
/// proportion matters, and the Lua computes exactly below it), a demand above 0 kept
/// at 1 at least.
fn target(grantable: u64, demand: u64, wanted: u128) -> u64 {
    if demand == 0 {
        return 0;
    }
    let (mut demand, mut wanted) = (u128::from(demand), wanted);
    while u128::from(grantable) * (demand + wanted) >= u128::from(super::EXACT) {
        demand /= 2;
        wanted /= 2;
    }
    let demand = demand.max(1);
    u64::try_from(u128::from(grantable) * demand / (demand + wanted)).unwrap_or(0)
}

/// One region's lease of the key's grantable part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Record {
    /// Units per period granted, until `expires`.
    share: u64,
    expires: u64,
    /// The share the region said it enforced when it last renewed, counted until
    /// `held_expires`: a reply lost or not yet applied leaves the region enforcing it.
    held: u64,
    held_expires: u64,
    /// Units per period the region was asked for, as of its last renewal.
    demand: u64,
    /// The number of the region's last claim renewed here.
    seq: u64,
}

impl Record {
    /// Units of the grantable part this region may be enforcing at `now`.
    fn reserved(&self, now: u64) -> u64 {
        let share = if now < self.expires { self.share } else { 0 };
        let held = if now < self.held_expires {
            self.held
        } else {
            0
        };
        share.max(held)
    }
}

/// Per region (by index), its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Home {
    regions: Vec<Record>,
    /// Read for another number of regions while its records were live: see
    /// [`Home::renew`]. Never stored.
    frozen: bool,
}

impl Home {
    /// The records in `state` for `regions` regions at `now` (none yet when there are
    /// none, when every lease in them has expired, which a store may still hold, or
    /// when the count changed: a new configuration, whose shares start afresh).
    pub(crate) fn take_from(state: &mut Option<State>, regions: u32, now: u64) -> Self {
        let count = regions as usize;
        let fresh = |frozen| Self {
            regions: vec![Record::default(); count],
            frozen,
        };
        match state.take().map(|s| s.0) {
            Some(Inner::Home(home)) if home.live_until() > now => {
                if home.regions.len() == count {
                    *home
                } else {
                    // Kept as it is, and nothing granted until its records expire.
                    *state = Some(State(Inner::Home(home)));
                    fresh(true)
                }
            }
            _ => fresh(false),
        }
    }

    /// The records as the state to keep (into `state`): none once every lease has
    /// expired; a frozen read leaves `state` as it was.
    pub(crate) fn keep_into(self, state: &mut Option<State>, now: u64) {
        if !self.frozen {
            *state = (self.live_until() > now).then(|| State(Inner::Home(Box::new(self))));
        }
    }

    /// When the last lease expires.
    pub(crate) fn live_until(&self) -> u64 {
        self.regions
            .iter()
            .map(|r| r.expires.max(r.held_expires))
            .max()
            .unwrap_or(0)
    }

    /// Grants region `renewal.region` its demand-weighted part of `grantable`, at most
    /// what the others leave, and records it with what it enforces now; `None` for a
    /// stale claim.
    pub(crate) fn renew(&mut self, grantable: u64, now: u64, renewal: &Renewal) -> Option<u64> {
        let me = renewal.region as usize;
        if renewal.seq <= self.regions[me].seq {
            return None;
        }
        if self.frozen {
            // Records for another number of regions are still live: the regions are
            // being reconfigured, and their shares may be in force. Nothing is
            // granted, or recorded, until they expire.
            return Some(0);
        }
        let others = || {
            self.regions
                .iter()
                .enumerate()
                .filter(move |(i, _)| *i != me)
        };
        let reserved: u64 = others().map(|(_, r)| r.reserved(now)).sum();
        let available = grantable.saturating_sub(reserved);
        let wanted: u128 = others()
            .filter(|(_, r)| now < r.expires)
            .map(|(_, r)| u128::from(r.demand))
            .sum();
        let target = target(grantable, renewal.demand, wanted);
        let granted = target.min(available);
        let until = now.saturating_add(ns(renewal.hold));
        // What the region says it enforces stays reserved, but never more than its
        // record reserved until now: a renewal arriving after that record expired
        // (delayed) must not take back units home has granted to others since (the
        // region's share lapsed with it). Found by the model checker
        // (weir-lease-model's `share`).
        let previous = self.regions[me].reserved(now);
        self.regions[me] = Record {
            share: granted,
            expires: until,
            held: renewal.enforcing.min(previous),
            held_expires: until,
            demand: renewal.demand,
            seq: renewal.seq,
        };
        Some(granted)
    }
}
