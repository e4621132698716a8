//! The properties the checker proves over every reachable state of the slot model.
//!
//! Safety (`always`): the set never counts more than `limit` unexpired slots; under
//! timely renewals, no more than `limit` requests of live instances are in flight and
//! each holds its own unexpired slot; a crashed instance's slots expire within its
//! lease of the crash; a slot once freed never comes back. Non-vacuity (`sometimes`):
//! the interesting things do happen in the explored space.

use stateright::Property;

use super::actions::SlotModel;
use super::state::{Msg, Phase, State};

/// Name of the store's bound: at most `limit` unexpired slots in the set.
pub const LIMIT: &str = "the set holds at most limit unexpired slots";
/// Name of the bound on requests: at most `limit` requests of live instances in
/// flight. Holds under timely renewals only: the lease's trade.
pub const IN_FLIGHT: &str = "at most limit requests of live instances are in flight";
/// Name of the cover: each request in flight at a live instance holds its own slot,
/// unexpired. (Under timely renewals; no release, renewal or take of another takes it
/// away.)
pub const HELD: &str = "each request in flight at a live instance holds an unexpired slot";
/// Name of the crash bound: a crashed instance's slots expire at most its lease after
/// the crash.
pub const CRASH_BOUND: &str = "a crashed instance's slots expire within its lease of the crash";
/// Name of the no-resurrection rule: a slot released, dropped or expired is never
/// unexpired again (a late or retried renewal cannot bring it back).
pub const NO_RESURRECTION: &str = "a slot once freed never comes back";

/// Name of a non-vacuity check: `limit` requests in flight at once.
pub const FULL: &str = "limit requests are in flight at once";
/// Name of a non-vacuity check: a slot lost in a crash is taken again.
pub const REUSED: &str = "a live request holds the slot of a request lost in a crash";
/// Name of a non-vacuity check: a late renewal is on its way to an expired slot.
pub const LATE_RENEWAL: &str = "a renewal is in flight for a slot past its deadline";

/// Every property, in the order the checker reports them.
#[must_use]
pub fn all() -> Vec<Property<SlotModel>> {
    vec![
        Property::always(LIMIT, |model: &SlotModel, state: &State| {
            state.unexpired() <= usize::from(model.limit)
        }),
        Property::always(IN_FLIGHT, |model: &SlotModel, state: &State| {
            state.in_flight() <= usize::from(model.limit)
        }),
        Property::always(HELD, |_: &SlotModel, state: &State| {
            state.requests.iter().all(|r| {
                r.phase != Phase::Holding
                    || !state.live(r.instance)
                    || state.entry(r.id).is_some_and(|e| e.deadline > state.now)
            })
        }),
        Property::always(CRASH_BOUND, |model: &SlotModel, state: &State| {
            state.requests.iter().all(|r| {
                let i = usize::from(r.instance);
                match (state.crashed_at[i], state.entry(r.id)) {
                    (Some(crash), Some(e)) if e.deadline > state.now => {
                        e.deadline <= crash + model.leases[i]
                    }
                    _ => true,
                }
            })
        }),
        Property::always(NO_RESURRECTION, |_: &SlotModel, state: &State| {
            state
                .slots
                .iter()
                .all(|e| e.deadline <= state.now || state.freed.binary_search(&e.id).is_err())
        }),
        Property::sometimes(FULL, |model: &SlotModel, state: &State| {
            state.in_flight() == usize::from(model.limit)
        }),
        Property::sometimes(REUSED, |model: &SlotModel, state: &State| {
            state.in_flight() == usize::from(model.limit)
                && state
                    .requests
                    .iter()
                    .any(|r| r.phase == Phase::Holding && !state.live(r.instance))
        }),
        Property::sometimes(LATE_RENEWAL, |_: &SlotModel, state: &State| {
            state.network.iter().any(|msg| match *msg {
                Msg::Renew(r) => {
                    let id = state.requests[usize::from(r)].id;
                    state.entry(id).is_some_and(|e| e.deadline <= state.now)
                }
                _ => false,
            })
        }),
    ]
}
