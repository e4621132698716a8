//! Regional shares of a global limit: each region enforces, per key, a floor of its own
//! and a share of the rest, leased from the key's home and renewed by a rebalancing
//! loop (issue 22; `weir-lease-model`'s `share` module is the checked specification).
//!
//! A rule whose limit `L` is global across `N` regions keeps, per key:
//!
//! - **in each region's store**, a [`Regional`] record: the bucket the region decides
//!   requests on, of rate `floor + share` per period and capacity scaled alike
//!   ([`Policy::regional`]); the share in force until its deadline (then the floor
//!   alone); the units the region's instances reported offered since the last claim;
//!   and the open claim. Checks read it atomically with the bucket: every instance of
//!   a region enforces the same share.
//! - **in the home region's store** (one region, by the key's hash), a [`Home`] record:
//!   per region, its share and its expiry, the share it may still be enforcing
//!   (`held`, until it could no longer be), its last demand and its claim's number.
//!
//! One rebalance of one key in one region, done by one instance:
//!
//! 1. [`report`] (region's store): adds the units offered here; if a renewal is due
//!    and none is open, opens a claim numbered by the time (`seq`), and hands back
//!    the demand since the last claim (units per period) and the share in force now.
//! 2. [`renew`] (home's store): grants `min(target, G - reserved by the others)`,
//!    where `G = L - N × floor` and the target is the region's demand-weighted part of
//!    `G`, and records it until `now + hold`, with the share the region said it
//!    enforces held as long (but never more than its replaced record reserved: a
//!    renewal delayed past that record's expiry must not reserve units granted to
//!    others since). A claim older than the one recorded is refused (stale).
//! 3. [`apply`] (region's store): if the claim is still the open one and its deadline
//!    (`seq + 3/4 hold`, on the region store's clock) has not passed, the share is in
//!    force until then; the bucket is first brought to now at the old rate.
//!
//! **The bound.** Whatever messages are lost, delayed or reordered, the shares in
//! force in the regions never add up to more than `G`: a region enforces only a grant
//! whose record (or, after a later renewal, whose `held`) home keeps until after the
//! region's deadline (durations on each side's own clock, from a claim made before the
//! grant). With the floors, the regions' rates add up to at most `L` per period and
//! their capacities to at most the burst, so any window of length `T` admits at most
//! `burst + L × T / period` between them: the bound of one bucket (and one unit per
//! region, capacities being rounded up).
//!
//! `weir-lease-model`'s `share` module checks the protocol with stateright: 3 regions,
//! messages delayed, reordered and lost, claims given up, partitions and healing; the
//! shares in force never exceed `G`, and home never reserves more than `G`.

mod home;
mod regional;

use std::fmt;
use std::time::Duration;

pub(crate) use home::Home;
pub(crate) use regional::Regional;

use crate::{Decision, Policy, State};

/// The most regions a global limit is shared by.
pub const MAX_REGIONS: u32 = 16;

/// 2^53: the Lua mirror computes in doubles, exact below this; counts and demands are
/// bounded so that its products stay below it, and bounded alike here.
const EXACT: u64 = 1 << 53;

/// What a region's instance reports for one key at a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Units this instance was asked for on the key since its last report (allowed or
    /// denied: the demand, not what the share let through).
    pub offered: u64,
    /// The rebalance period: a claim is due once half of it has passed since the last,
    /// and an open claim not applied within it is given up.
    pub round: Duration,
    /// Claim even if the last claim is recent, or nothing is wanted or held (not if a
    /// claim is open): the renewal that follows a shrink, so that home stops holding
    /// the larger share at once.
    pub force: bool,
    /// The hold renewals use now: the share in force ends no later than a new claim's
    /// deadline under it (so that a hold shortened by a reload never leaves a share in
    /// force longer than home holds it).
    pub hold: Duration,
}

/// A claim opened by [`report`]: this instance renews the region's share of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// The claim's number: the region store's time when it was opened (later claims
    /// have larger numbers); [`apply`] and [`renew`] carry it.
    pub seq: u64,
    /// Units per period offered in the region since the previous claim.
    pub demand: u64,
    /// The share in force in the region now.
    pub enforcing: u64,
}

/// What a region asks of the key's home ([`renew`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal {
    /// The region's index among the regions (in the order every region lists them).
    pub region: u32,
    /// How many regions share the limit.
    pub regions: u32,
    /// The claim's demand.
    pub demand: u64,
    /// The claim's share in force.
    pub enforcing: u64,
    /// The claim's number.
    pub seq: u64,
    /// How long home keeps the grant: the region's deadline is three quarters of it
    /// after its claim.
    pub hold: Duration,
}

/// Why a share operation cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShareError {
    /// The policy is not a regional share ([`Policy::regional`]).
    NotRegional,
    /// The region's index is not below the number of regions, or there are more than
    /// [`MAX_REGIONS`].
    NoSuchRegion {
        /// The index given.
        region: u32,
        /// The number of regions given.
        regions: u32,
    },
}

impl fmt::Display for ShareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShareError::NotRegional => f.write_str("the rule is not global across regions"),
            ShareError::NoSuchRegion { region, regions } => write!(
                f,
                "region {region} of {regions} (at most {MAX_REGIONS} regions, indexed from 0)"
            ),
        }
    }
}

impl std::error::Error for ShareError {}

/// The region's floor, or why the policy has none.
fn floor(policy: &Policy) -> Result<u64, ShareError> {
    policy.region_floor().ok_or(ShareError::NotRegional)
}

/// A duration in nanoseconds, saturating.
fn ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The region's deadline for a grant to the claim numbered `seq`.
pub fn deadline(seq: u64, hold: Duration) -> u64 {
    seq.saturating_add(ns(hold) / 4 * 3)
}

/// [`crate::check`] of a regional share: the region's bucket at the rate in force.
pub(crate) fn check(policy: &Policy, state: &mut Option<State>, now: u64, cost: u64) -> Decision {
    let mut regional = Regional::take_from(policy, state, now);
    let decision = regional.check(policy, now, cost);
    *state = regional.keep(policy, now);
    decision
}

/// [`crate::refund`] of a regional share: `cost` back into the region's bucket, up to
/// the capacity in force.
pub(crate) fn refund(policy: &Policy, state: &mut Option<State>, now: u64, cost: u64) {
    if !matches!(
        state.as_ref().map(|s| &s.0),
        Some(crate::state::Inner::Regional(_))
    ) {
        return;
    }
    let mut regional = Regional::take_from(policy, state, now);
    regional.refund(policy, now, cost);
    *state = regional.keep(policy, now);
}

/// Step 1 of a rebalance, on the region's record of a key at `now` (the region
/// store's time): adds `report.offered`, and opens a claim if one is due (see
/// [`Report`]) and none is open, unless the region neither wants nor holds anything.
pub fn report(
    policy: &Policy,
    state: &mut Option<State>,
    now: u64,
    report: &Report,
) -> Result<Option<Claim>, ShareError> {
    floor(policy)?;
    let mut regional = Regional::take_from(policy, state, now);
    let claim = regional.report(policy, now, report);
    *state = regional.keep(policy, now);
    Ok(claim)
}

/// Step 3: puts `grant` in force for the claim numbered `seq`, if it is still the
/// open claim and its deadline ([`deadline`]) has not passed; else closes the claim
/// if it is that one, and changes nothing else. Returns whether the grant is in force.
pub fn apply(
    policy: &Policy,
    state: &mut Option<State>,
    now: u64,
    seq: u64,
    grant: u64,
    hold: Duration,
) -> Result<bool, ShareError> {
    floor(policy)?;
    let mut regional = Regional::take_from(policy, state, now);
    let applied = regional.apply(policy, now, seq, grant, hold);
    *state = regional.keep(policy, now);
    Ok(applied)
}

/// Step 2, at the key's home at `now` (home's time): the share granted, or `None` for
/// a claim older than the region's last (stale: nothing changes).
pub fn renew(
    policy: &Policy,
    state: &mut Option<State>,
    now: u64,
    renewal: &Renewal,
) -> Result<Option<u64>, ShareError> {
    let floor = floor(policy)?;
    if renewal.regions > MAX_REGIONS || renewal.region >= renewal.regions {
        return Err(ShareError::NoSuchRegion {
            region: renewal.region,
            regions: renewal.regions,
        });
    }
    let grantable = policy
        .limit()
        .saturating_sub(floor.saturating_mul(u64::from(renewal.regions)));
    let mut home = Home::take_from(state, renewal.regions, now);
    let granted = home.renew(grantable, now, renewal);
    home.keep_into(state, now);
    Ok(granted)
}

#[cfg(test)]
mod tests;
