//! Batches of every size: the lease protocol with each take asking for a batch the
//! checker chooses, from one unit to the whole capacity (issue 41).
//!
//! `lease: auto` sizes a batch from the key's demand where the store sees it: the
//! store reports with every grant the units leased on the key by every instance in a
//! recent second, and an instance's batch is its part of those takes times the
//! capacity (at least a sixteenth of it), at most its own demand expected while a
//! lease may be spent and the key's refill in that time. So a batch may be anything from one unit to the whole
//! capacity (an instance alone on a key), and it changes from one take to the next as
//! the instances' demand moves.
//!
//! The bound must not depend on that rule: the store grants `min(batch, tokens)` under
//! the cap of the units out, whatever the batch. [`SizedLeaseModel`] checks exactly
//! that: it is [`LeaseModel`] with the batch of every take a free choice, so every
//! sizing rule (the share of the takes, the sixteenth before it, a rule not yet
//! written) is among the runs explored, and every safety property of
//! [`crate::properties`] holds in all of them. What a stranded unit costs stays one
//! batch per instance: an instance holds one lease at a time, and a take gives back the
//! lease held before it is granted another.

use stateright::{Model, Property};

use crate::actions::{Action, LeaseModel};
use crate::bound::plain_bucket_admits;
use crate::properties::{
    CAPACITY, CUMULATIVE, LEDGER, NO_OVER_ADMISSION, ONE_PLACE, PLAIN_BUCKET, cumulative,
    ledger_balances, no_over_admission, one_place,
};
use crate::state::{Msg, State};

/// [`LeaseModel`] whose takes each ask for a batch of the checker's choosing, from 1
/// to the capacity (`inner.batch` is not read).
#[derive(Clone, Debug)]
pub struct SizedLeaseModel {
    /// The protocol, its policy and its bounds.
    pub inner: LeaseModel,
}

/// A step of the protocol, or a take delivered with the batch it asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SizedAction {
    /// Any step but a take's delivery, as [`LeaseModel`] takes it.
    Protocol(Action),
    /// A take reaches the store asking for up to `batch` units.
    Take {
        /// The take message.
        msg: Msg,
        /// Units it asks for.
        batch: u8,
    },
}

impl Model for SizedLeaseModel {
    type State = State;
    type Action = SizedAction;

    fn init_states(&self) -> Vec<State> {
        self.inner.init_states()
    }

    fn actions(&self, state: &State, actions: &mut Vec<SizedAction>) {
        let mut steps = Vec::new();
        self.inner.actions(state, &mut steps);
        for step in steps {
            match step {
                Action::Deliver(msg @ Msg::Take { .. }) => {
                    for batch in 1..=self.inner.capacity {
                        actions.push(SizedAction::Take {
                            msg: msg.clone(),
                            batch,
                        });
                    }
                }
                step => actions.push(SizedAction::Protocol(step)),
            }
        }
    }

    fn next_state(&self, last: &State, action: SizedAction) -> Option<State> {
        match action {
            SizedAction::Protocol(step) => self.inner.next_state(last, step),
            SizedAction::Take { msg, batch } => {
                let sized = LeaseModel {
                    batch,
                    ..self.inner.clone()
                };
                sized.next_state(last, Action::Deliver(msg))
            }
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_OVER_ADMISSION, |m: &Self, s: &State| {
                no_over_admission(&m.inner, s)
            }),
            Property::always(CUMULATIVE, |m: &Self, s: &State| cumulative(&m.inner, s)),
            Property::always(PLAIN_BUCKET, |m: &Self, s: &State| {
                plain_bucket_admits(
                    m.inner.capacity.into(),
                    m.inner.refill_every.into(),
                    &s.admitted,
                )
            }),
            Property::always(CAPACITY, |m: &Self, s: &State| {
                u32::from(s.store.tokens) + u32::from(s.store.outstanding())
                    <= u32::from(m.inner.capacity)
            }),
            Property::always(LEDGER, |_: &Self, s: &State| ledger_balances(s)),
            Property::always(ONE_PLACE, |_: &Self, s: &State| one_place(s)),
            Property::sometimes(WHOLE_BURST, |m: &Self, s: &State| {
                s.store
                    .leases
                    .values()
                    .any(|record| record.units == m.inner.capacity)
            }),
            Property::sometimes(UNEQUAL_BATCHES, |_: &Self, s: &State| {
                let mut units = s.store.leases.values().map(|record| record.units);
                units
                    .next()
                    .is_some_and(|first| units.any(|other| other != first))
            }),
            Property::sometimes(
                "leases admit the whole burst at tick 0",
                |m: &Self, s: &State| s.admitted.first().copied().unwrap_or(0) >= m.inner.capacity,
            ),
        ]
    }
}

/// Name of the property that one lease holds the whole capacity (an instance alone on
/// a key, its share all of it).
pub const WHOLE_BURST: &str = "a lease holds the whole capacity";
/// Name of the property that leases of different sizes are out together.
pub const UNEQUAL_BATCHES: &str = "leases of different sizes are out at once";
