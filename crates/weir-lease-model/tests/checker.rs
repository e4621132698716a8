//! Runs the model checker over the lease protocol for 3 instances: every property holds
//! with the cap, and over-admission is found without it.
//!
//! Each run is exhaustive within its bounds (ticks, takes, crashes, direct checks);
//! together they take about 40 s in a debug build on 2 cores.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is a failing test, with its message"
)]

use std::time::Instant;

use stateright::{Checker, Model};
use weir_lease_model::properties::{CAPACITY, CUMULATIVE, NO_OVER_ADMISSION, PLAIN_BUCKET};
use weir_lease_model::{LeaseModel, Refill};

/// Explores every state of `model` within its bounds, saying how many. Depth first:
/// stateright 0.31 applies symmetry reduction (the instances are interchangeable) in its
/// depth-first checker only.
fn explore(name: &str, model: LeaseModel) -> impl Checker<LeaseModel> {
    let start = Instant::now();
    let checker = model.checker().symmetry().spawn_dfs().join();
    eprintln!(
        "{name}: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    assert!(checker.is_done(), "{name}: the checker stopped early");
    checker
}

/// `C = 2`, refill 1 every 2 ticks, `B = 2`, `H = 3`, over ticks 0..=3.
const fn policy() -> LeaseModel {
    LeaseModel {
        last_tick: 3,
        max_takes: 3,
        max_crashes: 1,
        max_direct: 0,
        ..LeaseModel::new(2, 2, 2, 3)
    }
}

/// One lease can take the whole burst; 3 takes, a crash, every reordering and loss.
#[test]
fn a_batch_of_the_whole_burst_never_over_admits() {
    explore("B = C", policy()).assert_properties();
}

/// Batches of one: several instances hold leases at once.
#[test]
fn small_batches_held_by_several_instances_never_over_admit() {
    explore(
        "B = 1",
        LeaseModel {
            batch: 1,
            ..policy()
        },
    )
    .assert_properties();
}

/// A refill at every tick: the cap binds at every tick a lease is out.
#[test]
fn a_refill_every_tick_never_over_admits() {
    explore(
        "R = 1",
        LeaseModel {
            refill_every: 1,
            ..policy()
        },
    )
    .assert_properties();
}

/// A non-leasing caller checks the same key directly, beside the leases.
#[test]
fn direct_checks_beside_leases_never_over_admit() {
    let model = LeaseModel {
        max_takes: 2,
        max_direct: 1,
        ..policy()
    };
    explore("direct", model).assert_properties();
}

/// Without the cap the bucket refills under the leases: the checker finds a window that
/// admits more than a plain bucket could. The cumulative bound still holds (every unit
/// admitted still left the bucket once), which is why the window form is the one that
/// matters.
#[test]
fn without_the_cap_the_checker_finds_over_admission() {
    let model = LeaseModel {
        refill: Refill::Uncapped,
        max_takes: 2,
        max_direct: 1,
        ..policy()
    };
    let checker = explore("uncapped", model);
    let path = checker
        .discovery(NO_OVER_ADMISSION)
        .expect("without the cap, some window over-admits");
    eprintln!("counterexample: {:?}", path.clone().into_actions());
    eprintln!("its last state: {:#?}", path.last_state());
    assert!(checker.discovery(PLAIN_BUCKET).is_some());
    assert!(checker.discovery(CAPACITY).is_some());
    assert!(checker.discovery(CUMULATIVE).is_none());
}
