//! Runs the model checker over the lease protocol with every take's batch chosen by the
//! checker, from one unit to the capacity (issue 41: `auto` sizes batches from the
//! key's take rate the store reports): every property holds whatever the sizing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is a failing test, with its message"
)]

mod common;

use common::explore;
use stateright::Checker;
use weir_lease_model::{LeaseModel, SizedLeaseModel};

/// 3 instances, `C = 3`, refill 1 every 2 ticks, held 3 ticks, over ticks 0..=3: 2
/// takes of any batch from 1 to 3 (two leases of unequal sizes out at once, or one of
/// the whole burst), a crash, every reordering, delay and loss of messages, timeouts.
#[test]
fn batches_of_every_size_never_over_admit() {
    let model = SizedLeaseModel {
        inner: LeaseModel {
            last_tick: 3,
            max_takes: 2,
            max_crashes: 1,
            max_direct: 0,
            ..LeaseModel::new(3, 2, 3, 3)
        },
    };
    explore("batches 1..=C", model).assert_properties();
}

/// A refill at every tick and holds of 2 ticks, over ticks 0..=3: the cap binds at
/// every tick a lease of any size is out, leases expire within the run, and a direct
/// caller checks beside them.
#[test]
fn batches_of_every_size_under_a_refill_every_tick_never_over_admit() {
    let model = SizedLeaseModel {
        inner: LeaseModel {
            last_tick: 3,
            max_takes: 2,
            max_crashes: 1,
            max_direct: 1,
            ..LeaseModel::new(3, 1, 3, 2)
        },
    };
    explore("batches 1..=C, R = 1", model).assert_properties();
}
