//! Runs the model checker over the slot leases of `algorithm: concurrency` on Redis for
//! 2 instances: every property holds under the protocol, the lease's trade is found
//! without timely renewals, and each pitfall is found.
//!
//! Each run is exhaustive within its bounds (ticks, requests, a crash); together they
//! take a few seconds in a debug build (`cargo test -p weir-lease-model --test
//! slots_checker`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is a failing test, with its message"
)]

use std::time::Instant;

use stateright::{Checker, Model};
use weir_lease_model::slots::properties::{
    CRASH_BOUND, FULL, HELD, IN_FLIGHT, LATE_RENEWAL, LIMIT, NO_RESURRECTION, REUSED,
};
use weir_lease_model::slots::{Clock, Expire, Ids, RenewCheck, SlotModel, TakeWait};

const SAFE: [&str; 5] = [LIMIT, IN_FLIGHT, HELD, CRASH_BOUND, NO_RESURRECTION];

/// Explores every state of `model` within its bounds (depth first; the instances
/// differ in lease or clock in some runs, so no symmetry is assumed).
fn explore(name: &str, model: SlotModel) -> impl Checker<SlotModel> {
    let start = Instant::now();
    let checker = model.checker().spawn_dfs().join();
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

/// Asserts that exactly the properties `failing` have counterexamples.
fn assert_found(name: &str, checker: &impl Checker<SlotModel>, failing: &[&str]) {
    for property in SAFE {
        let found = checker.discovery(property);
        if let Some(path) = &found {
            eprintln!(
                "{name}: {property:?} fails: {:?}",
                path.clone().into_actions()
            );
        }
        assert_eq!(
            found.is_some(),
            failing.contains(&property),
            "{name}: {property:?}"
        );
    }
}

/// One slot, two instances, a crash: every property holds, and a slot lost in the
/// crash is taken again by the other instance. (With one slot the key expires with
/// it, so no renewal ever finds it expired.)
#[test]
fn one_slot_holds_through_crashes_and_late_messages() {
    let checker = explore("limit 1", SlotModel::new(1, 2));
    assert_found("limit 1", &checker, &[]);
    assert!(checker.discovery(FULL).is_some());
    assert!(checker.discovery(REUSED).is_some());
}

/// Two slots, three requests, leases that differ (a rolling change of
/// `store.slot_lease`): every property holds, and renewals arrive late at slots past
/// their deadline, kept alive by the other.
#[test]
fn two_slots_with_different_leases_hold() {
    let model = SlotModel {
        leases: [3, 2],
        max_crashes: 0,
        ..SlotModel::new(2, 2)
    };
    let checker = explore("limit 2, leases 3 and 2", model);
    assert_found("limit 2, leases 3 and 2", &checker, &[]);
    assert!(checker.discovery(FULL).is_some());
    assert!(checker.discovery(LATE_RENEWAL).is_some());
}

/// Two slots, two requests, a crash, leases that differ.
#[test]
fn two_slots_hold_through_a_crash() {
    let model = SlotModel {
        leases: [2, 3],
        max_requests: 2,
        ..SlotModel::new(2, 2)
    };
    let checker = explore("limit 2, a crash", model);
    assert_found("limit 2, a crash", &checker, &[]);
}

/// Without timely renewals a request may outlive its slot, and another take it: the
/// lease's trade. The set itself never counts more than `limit`, and crashes and late
/// renewals stay bounded.
#[test]
fn without_timely_renewals_a_request_outlives_its_slot() {
    let model = SlotModel {
        timely: false,
        ..SlotModel::new(1, 2)
    };
    let checker = explore("untimely", model);
    assert_found("untimely", &checker, &[IN_FLIGHT, HELD]);
}

/// `PEXPIRE key lease` at every take and renewal (`slots.lua` as first written): the
/// shorter lease expires the key under a longer-leased slot in flight.
#[test]
fn a_ttl_set_to_the_shorter_lease_loses_slots_in_flight() {
    let model = SlotModel {
        leases: [3, 2],
        expire: Expire::Set,
        max_requests: 2,
        ..SlotModel::new(2, 2)
    };
    let checker = explore("PEXPIRE lease", model);
    assert_found("PEXPIRE lease", &checker, &[HELD]);
}

/// Renewals that do not check the deadline, or not even that the slot is held.
#[test]
fn unchecked_renewals_resurrect_slots() {
    let present = SlotModel {
        renew: RenewCheck::Present,
        leases: [2, 3],
        max_requests: 2,
        ..SlotModel::new(2, 2)
    };
    assert_found("ZADD XX", &explore("ZADD XX", present), &[NO_RESURRECTION]);
    let upsert = SlotModel {
        renew: RenewCheck::Upsert,
        ..SlotModel::new(1, 2)
    };
    assert_found("ZADD", &explore("ZADD", upsert), &[LIMIT, NO_RESURRECTION]);
}

/// Slot ids counted per instance: two instances' requests share a slot, and one's
/// release frees the other's.
#[test]
fn ids_per_instance_share_slots() {
    let model = SlotModel {
        ids: Ids::PerInstance,
        max_requests: 2,
        ..SlotModel::new(2, 2)
    };
    let checker = explore("ids per instance", model);
    assert!(checker.discovery(HELD).is_some());
}

/// Scripts reading the instance's clock, one instance a tick ahead of Redis.
#[test]
fn an_instance_clock_ahead_drops_others_slots() {
    let model = SlotModel {
        clock: Clock::Instance,
        skew: [0, 1],
        ..SlotModel::new(1, 2)
    };
    let checker = explore("instance clock", model);
    assert!(checker.discovery(IN_FLIGHT).is_some());
    assert!(checker.discovery(HELD).is_some());
}

/// An instance that waits for a take's reply longer than the lease (as long as
/// `store.timeout`): a reply after the slot's deadline starts a request whose slot
/// another take has already dropped.
#[test]
fn a_take_reply_after_the_lease_starts_a_request_without_a_slot() {
    let model = SlotModel {
        take_wait: TakeWait::Timeout,
        ..SlotModel::new(1, 2)
    };
    let checker = explore("take waits past the lease", model);
    assert!(checker.discovery(IN_FLIGHT).is_some());
    assert!(checker.discovery(HELD).is_some());
    assert!(checker.discovery(LIMIT).is_none());
}
