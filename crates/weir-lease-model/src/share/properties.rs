//! The properties the checker proves over every reachable state of the share model.
//!
//! Safety (`always`): the shares the regions enforce never sum to more than `G`; home
//! never reserves more than `G`; and the inductive reason for the first, home reserves
//! for each region at least the share it enforces. Non-vacuity (`sometimes`): the
//! interesting things do happen in the explored space.

use stateright::Property;

use super::actions::ShareModel;
use super::state::{Msg, State};

/// Name of the invariant: the shares in force at the regions sum to at most `G`.
pub const IN_FORCE: &str = "the shares in force at the regions sum to at most G";
/// Name of home's bound: home never reserves more than `G` in all.
pub const RESERVED: &str = "home reserves at most G for all the regions together";
/// Name of the per-region cover: home reserves for each region at least what it
/// enforces. With [`RESERVED`] it implies [`IN_FORCE`]; it is the invariant the
/// argument in the module doc proves.
pub const COVERED: &str = "home reserves for each region at least the share it enforces";

/// Every property, in the order the checker reports them.
#[must_use]
pub fn all() -> Vec<Property<ShareModel>> {
    vec![
        Property::always(IN_FORCE, |model: &ShareModel, state: &State| {
            state.in_force() <= u32::from(model.grantable)
        }),
        Property::always(RESERVED, |model: &ShareModel, state: &State| {
            state.reserved() <= u32::from(model.grantable)
        }),
        Property::always(COVERED, |_: &ShareModel, state: &State| {
            state
                .regions
                .iter()
                .zip(&state.home)
                .all(|(region, record)| region.in_force(state.now) <= record.reserved(state.now))
        }),
        Property::sometimes(
            "the shares in force add up to G",
            |model: &ShareModel, state: &State| state.in_force() == u32::from(model.grantable),
        ),
        Property::sometimes(
            "two regions enforce shares at once",
            |_: &ShareModel, state: &State| {
                state
                    .regions
                    .iter()
                    .filter(|region| region.in_force(state.now) > 0)
                    .count()
                    >= 2
            },
        ),
        Property::sometimes(
            "home reserves a region's previous share beyond its new one",
            |_: &ShareModel, state: &State| {
                state
                    .home
                    .iter()
                    .any(|record| record.held > record.share && record.reserved(state.now) > 0)
            },
        ),
        Property::sometimes(
            "a region shrinks and is to confirm",
            |_: &ShareModel, state: &State| {
                state.regions.iter().any(|region| region.confirm.is_some())
            },
        ),
        Property::sometimes(
            "two renewals of one region are in flight",
            |_: &ShareModel, state: &State| {
                (0u8..).zip(&state.regions).any(|(id, _)| {
                    state
                        .network
                        .iter()
                        .filter(|msg| matches!(msg, Msg::Renew { from, .. } if *from == id))
                        .count()
                        >= 2
                })
            },
        ),
        Property::sometimes(
            "a reply in flight comes too late to be applied",
            |model: &ShareModel, state: &State| {
                state.network.iter().any(|msg| match *msg {
                    Msg::Reply { to, seq, .. } => state.regions[usize::from(to)]
                        .claim
                        .as_ref()
                        .is_some_and(|claim| {
                            claim.seq == seq && state.now >= claim.claimed_at + model.deadline
                        }),
                    Msg::Renew { .. } => false,
                })
            },
        ),
        Property::sometimes("a claim times out", |_: &ShareModel, state: &State| {
            state
                .regions
                .iter()
                .any(|region| region.claim.as_ref().is_some_and(|claim| claim.timed_out))
        }),
        Property::sometimes(
            "a region's share expires while it waits for a reply",
            |_: &ShareModel, state: &State| {
                state.regions.iter().any(|region| {
                    region
                        .claim
                        .as_ref()
                        .is_some_and(|claim| claim.in_force > 0 && region.in_force(state.now) == 0)
                })
            },
        ),
    ]
}
