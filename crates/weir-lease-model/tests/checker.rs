//! Runs the model checker over the lease protocol for 3 instances: every property holds
//! with the cap, and over-admission is found without it.
//!
//! Each run is exhaustive within its bounds (ticks, takes, crashes, direct checks);
//! together they take about 30 s in a debug build on 2 cores (`cargo test -p
//! weir-lease-model`). The pitfall variants show the properties can fail.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is a failing test, with its message"
)]

mod common;

use std::time::Instant;

use std::collections::BTreeSet;

use common::explore;
use stateright::{Checker, HasDiscoveries, Model, Path};
use weir_lease_model::properties::{CAPACITY, CUMULATIVE, LEDGER, NO_OVER_ADMISSION, PLAIN_BUCKET};
use weir_lease_model::state::State;
use weir_lease_model::{HoldFrom, LeaseModel, Refill};

/// `C = 2`, refill 1 every 2 ticks, `B = 2`, `H = 3`, over ticks 0..=3: 3 takes, a
/// crash, every reordering, delay and loss of messages, timeouts.
const fn policy() -> LeaseModel {
    LeaseModel {
        last_tick: 3,
        max_takes: 3,
        max_crashes: 1,
        max_direct: 0,
        ..LeaseModel::new(2, 2, 2, 3)
    }
}

/// One lease can take the whole burst; over ticks 0..=4, so refills resume after the
/// first leases expire.
#[test]
fn a_batch_of_the_whole_burst_never_over_admits() {
    let model = LeaseModel {
        last_tick: 4,
        ..policy()
    };
    explore("B = C", model).assert_properties();
}

/// Batches of one, held 2 ticks: several instances hold leases at once.
#[test]
fn small_batches_held_by_several_instances_never_over_admit() {
    let model = LeaseModel {
        batch: 1,
        hold: 2,
        last_tick: 4,
        ..policy()
    };
    explore("B = 1", model).assert_properties();
}

/// A batch that does not divide the capacity: partial grants (`k < B`), and a direct
/// caller beside them.
#[test]
fn partial_grants_never_over_admit() {
    let model = LeaseModel {
        capacity: 3,
        max_takes: 2,
        max_direct: 1,
        ..policy()
    };
    explore("C = 3, B = 2", model).assert_properties();
}

/// A refill at every tick: the cap binds at every tick a lease is out.
#[test]
fn a_refill_every_tick_never_over_admits() {
    let model = LeaseModel {
        refill_every: 1,
        ..policy()
    };
    explore("R = 1", model).assert_properties();
}

/// A non-leasing caller checks the same key directly, beside the leases.
#[test]
fn direct_checks_beside_leases_never_over_admit() {
    let model = LeaseModel {
        max_takes: 2,
        max_direct: 1,
        last_tick: 4,
        ..policy()
    };
    explore("direct", model).assert_properties();
}

/// Runs breadth first until `property` fails, and returns the shortest counterexample
/// (stateright's breadth-first checker does not reduce by symmetry, so these runs are
/// small).
fn counterexample(
    name: &str,
    model: LeaseModel,
    property: &'static str,
) -> Path<State, weir_lease_model::Action> {
    let start = Instant::now();
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("{name}: the checker finds no counterexample to {property:?}"));
    eprintln!(
        "{name}: {property:?} fails after {} states, {:.1?}: {:?}",
        checker.unique_state_count(),
        start.elapsed(),
        path.clone().into_actions()
    );
    path
}

/// Without the cap the bucket refills under the leases: the checker finds a window that
/// admits more than a plain bucket could, and the bucket holding more than `C`. The
/// cumulative bound still holds (every unit admitted still left the bucket once), which
/// is why the window form is the one that matters.
#[test]
fn without_the_cap_the_checker_finds_over_admission() {
    let model = LeaseModel {
        refill: Refill::Uncapped,
        max_takes: 2,
        max_direct: 1,
        ..policy()
    };
    let checker = explore("uncapped", model.clone());
    assert!(checker.discovery(NO_OVER_ADMISSION).is_some());
    assert!(checker.discovery(PLAIN_BUCKET).is_some());
    assert!(checker.discovery(CAPACITY).is_some());
    assert!(checker.discovery(CUMULATIVE).is_none());
    let path = counterexample("uncapped", model, NO_OVER_ADMISSION);
    let last = path.last_state();
    eprintln!("its last state: {last:#?}");
}

/// A lazy store that caps the refill once per call, by what is outstanding after
/// dropping expired records, credits refill that came while the bucket sat at its cap:
/// the checker finds the window that over-admits.
#[test]
fn a_store_capping_once_per_call_over_admits() {
    let model = LeaseModel {
        refill: Refill::CappedPerCall,
        max_takes: 2,
        max_direct: 1,
        ..policy()
    };
    let checker = explore("capped per call", model.clone());
    assert!(checker.discovery(PLAIN_BUCKET).is_some());
    assert!(checker.discovery(CAPACITY).is_none());
    assert!(checker.discovery(LEDGER).is_none());
    counterexample("capped per call", model, NO_OVER_ADMISSION);
}

/// An instance measuring its hold from the grant's arrival spends, after a delayed
/// grant, units the store has already released: the ledger catches it, and the
/// over-admission follows.
#[test]
fn a_hold_measured_from_the_grant_spends_released_units() {
    let model = LeaseModel {
        hold_from: HoldFrom::Received,
        max_takes: 2,
        max_direct: 1,
        last_tick: 4,
        ..policy()
    };
    let checker = explore("hold from receipt", model.clone());
    assert!(checker.discovery(NO_OVER_ADMISSION).is_some());
    assert!(checker.discovery(CAPACITY).is_none());
    counterexample("hold from receipt", model, LEDGER);
}
