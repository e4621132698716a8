//! The properties the checker proves over every reachable state.
//!
//! Safety (`always`): leases never admit more than the plain bucket alone, in every
//! window and cumulatively; the store never holds more than the capacity; every unit
//! granted is accounted for exactly once. Non-vacuity (`sometimes`): the interesting
//! things do happen in the explored space (a full burst, a return, an ignored late
//! return, an expiry, a crash, a lost reply, a local denial).

use stateright::Property;

use crate::actions::{LeaseModel, Refill};
use crate::bound::{bucket_bound, plain_bucket_admits};
use crate::state::{Msg, State};

/// Name of the window property: in every window `first..=last` of ticks, what was
/// admitted is within [`bucket_bound`].
pub const NO_OVER_ADMISSION: &str = "every window admits at most the plain bucket's bound";
/// Name of the cumulative property: ticks `0..=t` admit at most `C + floor(t / R)`.
pub const CUMULATIVE: &str = "ticks 0..=t admit at most C + floor(t / R)";
/// Name of the replay property: the per-tick admissions are a plain bucket's.
pub const PLAIN_BUCKET: &str = "a plain bucket could have admitted exactly this";
/// Name of the capacity property: `tokens + outstanding <= C`.
pub const CAPACITY: &str = "tokens + outstanding <= C";
/// Name of the ledger property.
pub const LEDGER: &str = "every granted unit is spent, returned, released or live, once";
/// Name of the property that no unit is in two places at once.
pub const ONE_PLACE: &str = "no unspent unit is held or in flight twice";

/// Every property, in the order the checker reports them.
#[must_use]
pub fn all() -> Vec<Property<LeaseModel>> {
    vec![
        Property::always(NO_OVER_ADMISSION, |model: &LeaseModel, state: &State| {
            no_over_admission(model, state)
        }),
        Property::always(CUMULATIVE, |model: &LeaseModel, state: &State| {
            cumulative(model, state)
        }),
        Property::always(PLAIN_BUCKET, |model: &LeaseModel, state: &State| {
            plain_bucket_admits(
                model.capacity.into(),
                model.refill_every.into(),
                &state.admitted,
            )
        }),
        Property::always(CAPACITY, |model: &LeaseModel, state: &State| {
            u32::from(state.store.tokens) + u32::from(state.store.outstanding())
                <= u32::from(model.capacity)
        }),
        Property::always(LEDGER, |_: &LeaseModel, state: &State| {
            ledger_balances(state)
        }),
        Property::always(ONE_PLACE, |_: &LeaseModel, state: &State| one_place(state)),
        Property::sometimes(
            "C units are admitted at tick 0",
            |model: &LeaseModel, state: &State| {
                state.admitted.first().copied().unwrap_or(0) >= model.capacity
            },
        ),
        Property::sometimes(
            "leases admit the whole bound C + floor(t / R) at some t >= R",
            |model: &LeaseModel, state: &State| {
                let total: u32 = state.admitted.iter().map(|&units| u32::from(units)).sum();
                state.now >= model.refill_every
                    && total
                        == bucket_bound(
                            model.capacity.into(),
                            model.refill_every.into(),
                            0,
                            state.now.into(),
                        )
            },
        ),
        Property::sometimes("a lease is returned", |_: &LeaseModel, state: &State| {
            state.ledger.returned > 0
        }),
        Property::sometimes(
            "a late return is ignored",
            |_: &LeaseModel, state: &State| state.ledger.return_ignored,
        ),
        Property::sometimes(
            "a lease expires at the store",
            |_: &LeaseModel, state: &State| state.ledger.expired,
        ),
        Property::sometimes("an instance crashes", |_: &LeaseModel, state: &State| {
            state.crashes > 0
        }),
        Property::sometimes(
            "an instance gives up waiting for a reply",
            |_: &LeaseModel, state: &State| state.ledger.gave_up,
        ),
        Property::sometimes(
            "an instance denies locally",
            |_: &LeaseModel, state: &State| {
                state
                    .instances
                    .iter()
                    .any(|instance| instance.up && state.now < instance.denied_until)
            },
        ),
        Property::sometimes(
            "a refill tick finds the bucket full under a lease",
            |model: &LeaseModel, state: &State| {
                model.refill == Refill::Capped
                    && state.store.outstanding() > 0
                    && state.store.tokens + state.store.outstanding() == model.capacity
                    && state.now > 0
                    && state.now.is_multiple_of(model.refill_every)
            },
        ),
    ]
}

/// Every window `first..=last` (up to now) admits at most [`bucket_bound`].
#[must_use]
pub fn no_over_admission(model: &LeaseModel, state: &State) -> bool {
    let capacity = u32::from(model.capacity);
    let every = u32::from(model.refill_every);
    (0u32..).zip(&state.admitted).all(|(first, _)| {
        let mut sum = 0u32;
        (first..)
            .zip(&state.admitted[first as usize..])
            .all(|(last, &units)| {
                sum += u32::from(units);
                sum <= bucket_bound(capacity, every, first, last)
            })
    })
}

/// Ticks `0..=t` admit at most `C + floor(t / R)`: [`bucket_bound`] from tick 0.
#[must_use]
pub fn cumulative(model: &LeaseModel, state: &State) -> bool {
    let mut sum = 0u32;
    (0u32..).zip(&state.admitted).all(|(last, &units)| {
        sum += u32::from(units);
        sum <= bucket_bound(model.capacity.into(), model.refill_every.into(), 0, last)
    })
}

/// `granted == spent + returned + released + unspent units of live records`, every
/// accepted return carried exactly its record's unspent units, and every spend came
/// from a live record with units left.
#[must_use]
pub fn ledger_balances(state: &State) -> bool {
    let ledger = &state.ledger;
    let live: u32 = state
        .store
        .leases
        .values()
        .map(|record| u32::from(record.units.saturating_sub(record.spent)))
        .sum();
    let live_spent_ok = state
        .store
        .leases
        .values()
        .all(|record| record.spent <= record.units);
    ledger.spent_without_record == 0
        && ledger.wrong_returns == 0
        && live_spent_ok
        && u32::from(ledger.granted)
            == u32::from(ledger.spent)
                + u32::from(ledger.returned)
                + u32::from(ledger.released)
                + live
}

/// For every live record: the units its holder has, plus those in a grant or a return
/// for it in flight, are at most its unspent units (some may have vanished in a crash
/// or a lost message; none is in two places).
#[must_use]
pub fn one_place(state: &State) -> bool {
    state.store.leases.iter().all(|(&id, record)| {
        let held: u32 = state
            .instances
            .iter()
            .filter_map(|instance| instance.lease.as_ref())
            .filter(|held| held.id == id)
            .map(|held| u32::from(held.units))
            .sum();
        let in_flight: u32 = state
            .network
            .iter()
            .map(|msg| match *msg {
                Msg::Grant {
                    lease: Some(lease),
                    units,
                    ..
                }
                | Msg::Return { lease, units }
                    if lease == id =>
                {
                    u32::from(units)
                }
                _ => 0,
            })
            .sum();
        held + in_flight <= u32::from(record.units.saturating_sub(record.spent))
    })
}
