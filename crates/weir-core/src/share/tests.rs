use std::time::Duration;

use super::*;
use crate::{Algorithm, check};

const SECOND: u64 = 1_000_000_000;
const T0: u64 = 1_800_000_000 * SECOND;
const ROUND: Duration = Duration::from_secs(2);
const HOLD: Duration = Duration::from_secs(6);

/// 600 a minute (10 a second) across 3 regions, each with a floor of 30 a minute.
fn policy() -> Policy {
    Policy::new(Algorithm::TokenBucket, 600, Duration::from_secs(60), None)
        .unwrap()
        .regional(30, 3)
        .unwrap()
}

fn admitted(policy: &Policy, state: &mut Option<State>, now: u64, tries: u64) -> u64 {
    (0..tries)
        .filter(|_| check(policy, state, now, 1).allowed)
        .count() as u64
}

fn report_at(state: &mut Option<State>, now: u64, offered: u64) -> Option<Claim> {
    let report = Report {
        offered,
        round: ROUND,
        force: false,
        hold: HOLD,
    };
    super::report(&policy(), state, now, &report).unwrap()
}

/// A renewal from region `region` of 3.
fn ask(region: u32, demand: u64, enforcing: u64, seq: u64) -> Renewal {
    Renewal {
        region,
        regions: 3,
        demand,
        enforcing,
        seq,
        hold: HOLD,
    }
}

fn renewal(region: u32, claim: Claim) -> Renewal {
    Renewal {
        region,
        regions: 3,
        demand: claim.demand,
        enforcing: claim.enforcing,
        seq: claim.seq,
        hold: HOLD,
    }
}

#[test]
fn a_key_new_to_a_region_is_decided_at_its_floor() {
    let (policy, mut state) = (policy(), None);
    // Capacity scaled as the rate: 600 × 30 / 600 = 30 units at once.
    assert_eq!(admitted(&policy, &mut state, T0, 100), 30);
    // Then 30 a minute: one every 2 s.
    assert_eq!(admitted(&policy, &mut state, T0 + 2 * SECOND, 10), 1);
    let denied = check(&policy, &mut state, T0 + 2 * SECOND, 1);
    assert_eq!(denied.retry_after, Some(Duration::from_secs(2)));
    assert_eq!(denied.limit, 600, "the rule's limit");
}

#[test]
fn a_granted_share_raises_the_rate_until_its_deadline_then_the_floor_returns() {
    let (policy, mut state) = (policy(), None);
    assert_eq!(admitted(&policy, &mut state, T0, 100), 30);
    let claim = report_at(&mut state, T0, 300).unwrap();
    // 300 offered over one round (2 s) when there was no earlier claim: 9,000 a minute.
    assert_eq!((claim.seq, claim.demand, claim.enforcing), (T0, 9_000, 0));
    let mut home = None;
    let grant = renew(&policy, &mut home, T0, &renewal(0, claim)).unwrap();
    // Alone: all of G = 600 - 3 × 30 = 510.
    assert_eq!(grant, Some(510));
    assert!(apply(&policy, &mut state, T0, claim.seq, 510, HOLD).unwrap());
    // 540 a minute from now: 9 a second (the bucket was empty; no burst comes with it).
    assert_eq!(admitted(&policy, &mut state, T0 + SECOND, 100), 9);
    // The deadline is 3/4 of the hold after the claim: 4.5 s. Up to it, 9 a second;
    // after it, the floor's rate (half a unit a second), with the floor's capacity.
    let deadline = T0 + 4 * SECOND + SECOND / 2;
    assert_eq!(admitted(&policy, &mut state, deadline - 1, 100), 31);
    assert_eq!(admitted(&policy, &mut state, deadline + 4 * SECOND, 100), 2);
}

#[test]
fn a_claim_is_made_once_a_round_and_only_by_one_instance() {
    let mut state = None;
    let first = report_at(&mut state, T0, 10).unwrap();
    // Another instance reports in the same round: its units wait for the next claim.
    assert_eq!(report_at(&mut state, T0 + SECOND / 2, 20), None);
    // The claim is open: even a round later, no second claim until it times out.
    assert_eq!(report_at(&mut state, T0 + SECOND + SECOND / 2, 0), None);
    let second = report_at(&mut state, T0 + 2 * SECOND, 0).unwrap();
    assert!(second.seq > first.seq);
    // The 20 units reported since the first claim, over its 2 s: 600 a minute,
    // averaged with the first claim's 300 (10 units over a round) as a round's
    // time constant weighs them: (300 × 2 + 600 × 2) / 4.
    assert_eq!(second.demand, 450);
    // The first claim's grant, late, is not applied: the claim was replaced.
    assert!(!apply(&policy(), &mut state, T0 + 2 * SECOND, first.seq, 100, HOLD).unwrap());
}

#[test]
fn nothing_wanted_and_nothing_held_makes_no_claim() {
    let mut state = None;
    assert_eq!(report_at(&mut state, T0, 0), None);
}

#[test]
fn a_grant_arriving_after_its_deadline_is_not_applied() {
    let mut state = None;
    let claim = report_at(&mut state, T0, 10).unwrap();
    let late = share_deadline_of(claim.seq);
    assert!(!apply(&policy(), &mut state, late, claim.seq, 100, HOLD).unwrap());
    assert!(
        !apply(&policy(), &mut state, T0, claim.seq, 100, HOLD).unwrap(),
        "closed"
    );
}

fn share_deadline_of(seq: u64) -> u64 {
    deadline(seq, HOLD)
}

#[test]
fn home_weighs_shares_by_demand_and_never_grants_beyond_what_others_hold() {
    let (policy, mut home) = (policy(), None);
    // G = 510. Region 0 alone: all of it.
    assert_eq!(
        renew(&policy, &mut home, T0, &ask(0, 800, 0, 1)).unwrap(),
        Some(510)
    );
    // Region 1 wants 200 against region 0's 800: a target of 102, but region 0 holds
    // everything until it renews.
    assert_eq!(
        renew(&policy, &mut home, T0 + 1, &ask(1, 200, 0, 1)).unwrap(),
        Some(0)
    );
    // Region 0 renews: 408 of it, while it still enforces 510 (held).
    assert_eq!(
        renew(&policy, &mut home, T0 + 2, &ask(0, 800, 510, 2)).unwrap(),
        Some(408)
    );
    assert_eq!(
        renew(&policy, &mut home, T0 + 3, &ask(1, 200, 0, 2)).unwrap(),
        Some(0)
    );
    // Region 0 confirms it enforces 408: region 1 gets its 102.
    assert_eq!(
        renew(&policy, &mut home, T0 + 4, &ask(0, 800, 408, 3)).unwrap(),
        Some(408)
    );
    assert_eq!(
        renew(&policy, &mut home, T0 + 5, &ask(1, 200, 0, 3)).unwrap(),
        Some(102)
    );
    // A stale claim changes nothing.
    assert_eq!(
        renew(&policy, &mut home, T0 + 6, &ask(1, 900, 0, 2)).unwrap(),
        None
    );
    // Once region 0's lease and held share expire, region 1 may have all of it.
    let later = T0 + 5 + 6 * SECOND;
    assert_eq!(
        renew(&policy, &mut home, later, &ask(1, 200, 102, 4)).unwrap(),
        Some(510)
    );
}

#[test]
fn a_region_that_reports_no_demand_gives_its_share_back() {
    let (policy, mut home) = (policy(), None);
    assert_eq!(
        renew(&policy, &mut home, T0, &ask(0, 50, 0, 1)).unwrap(),
        Some(510)
    );
    assert_eq!(
        renew(&policy, &mut home, T0 + 1, &ask(0, 0, 510, 2)).unwrap(),
        Some(0)
    );
    // Held until the region says it enforces nothing.
    assert_eq!(
        renew(&policy, &mut home, T0 + 2, &ask(2, 50, 0, 1)).unwrap(),
        Some(0)
    );
    assert_eq!(
        renew(&policy, &mut home, T0 + 3, &ask(0, 0, 0, 3)).unwrap(),
        Some(0)
    );
    assert_eq!(
        renew(&policy, &mut home, T0 + 4, &ask(2, 50, 0, 2)).unwrap(),
        Some(510)
    );
}

#[test]
fn shares_refuse_bad_regions_and_plain_policies() {
    let plain = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(1), None).unwrap();
    let ask = Renewal {
        region: 3,
        regions: 3,
        demand: 1,
        enforcing: 0,
        seq: 1,
        hold: HOLD,
    };
    assert_eq!(
        renew(&policy(), &mut None, T0, &ask),
        Err(ShareError::NoSuchRegion {
            region: 3,
            regions: 3
        })
    );
    assert_eq!(
        renew(&plain, &mut None, T0, &ask),
        Err(ShareError::NotRegional)
    );
    let gcra = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(1), None).unwrap();
    assert!(gcra.regional(1, 3).is_err());
    assert!(plain.regional(4, 3).is_err());
    assert!(plain.regional(0, 3).is_err());
}

#[test]
fn the_record_is_dropped_once_nothing_in_it_matters() {
    let (policy, mut state) = (policy(), None);
    assert!(check(&policy, &mut state, T0, 1).allowed);
    assert!(state.is_some());
    // Two seconds refill the unit: full, no share, nothing reported.
    check(&policy, &mut state, T0 + 2 * SECOND, 0);
    assert!(state.is_none());
    // A report keeps the record two rounds, for the claim.
    let claim = report_at(&mut state, T0, 5).unwrap();
    assert!(state.as_ref().unwrap().live_until() >= T0 + 4 * SECOND);
    assert!(apply(&policy, &mut state, T0, claim.seq, 10, HOLD).unwrap());
    assert_eq!(
        state.as_ref().unwrap().live_until(),
        deadline(claim.seq, HOLD)
    );
}

#[test]
fn a_delayed_renewal_never_takes_back_units_granted_since() {
    // The model checker's counterexample: region 0's renewal saying it enforces 510
    // arrives after its record expired and region 1 was granted everything.
    let (policy, mut home) = (policy(), None);
    assert_eq!(
        renew(&policy, &mut home, T0, &ask(0, 50, 0, 1)).unwrap(),
        Some(510)
    );
    let expired = T0 + 6 * SECOND;
    assert_eq!(
        renew(&policy, &mut home, expired, &ask(1, 50, 0, 1)).unwrap(),
        Some(510)
    );
    // The delayed renewal: nothing granted, and nothing held back from region 1's.
    assert_eq!(
        renew(&policy, &mut home, expired + 1, &ask(0, 0, 510, 2)).unwrap(),
        Some(0)
    );
    // Region 2 asks: region 1 holds everything (510), region 0 nothing, so 0; were
    // region 0's 510 held too, home would count 1,020 of 510 reserved.
    assert_eq!(
        renew(&policy, &mut home, expired + 2, &ask(2, 50, 0, 1)).unwrap(),
        Some(0)
    );
    // Region 1 renews with no demand: everything is free again for region 2.
    assert_eq!(
        renew(&policy, &mut home, expired + 3, &ask(1, 0, 0, 2)).unwrap(),
        Some(0)
    );
    assert_eq!(
        renew(&policy, &mut home, expired + 4, &ask(2, 50, 0, 2)).unwrap(),
        Some(510)
    );
}

#[test]
fn a_bucket_is_full_again_when_its_share_ends_if_not_before() {
    let (policy, mut state) = (policy(), None);
    let claim = report_at(&mut state, T0, 300).unwrap();
    assert!(apply(&policy, &mut state, T0, claim.seq, 510, HOLD).unwrap());
    // 540 a minute, capacity 540: emptied now, it would take a minute to fill; but at
    // the deadline (4.5 s) the capacity drops to the floor's 30, and 40.5 units have
    // come back by then: full at the deadline.
    let drained = admitted(&policy, &mut state, T0, 100);
    assert_eq!(
        drained, 30,
        "the bucket held the floor's 30 when the share came"
    );
    let peek = check(&policy, &mut state, T0, 0);
    assert_eq!(peek.reset_after, Duration::from_millis(4_500));
    // A second later, 9 more units taken: 4.5 s × 9 = 40.5 - 9 = 31.5 at the deadline.
    assert_eq!(admitted(&policy, &mut state, T0 + SECOND, 9), 9);
    let peek = check(&policy, &mut state, T0 + SECOND, 0);
    assert_eq!(peek.reset_after, Duration::from_millis(3_500));
}

#[test]
fn a_home_asked_for_another_number_of_regions_grants_nothing_while_its_records_live() {
    let (policy, mut home) = (policy(), None);
    let ask = |region, regions, seq| Renewal {
        region,
        regions,
        demand: 50,
        enforcing: 0,
        seq,
        hold: HOLD,
    };
    assert_eq!(
        renew(&policy, &mut home, T0, &ask(0, 3, 1)).unwrap(),
        Some(510)
    );
    let before = home.clone();
    // A region already configured for 2 regions: its count cannot be matched with
    // the records of shares in force, so nothing, and nothing recorded.
    assert_eq!(
        renew(&policy, &mut home, T0 + 1, &ask(1, 2, 1)).unwrap(),
        Some(0)
    );
    assert_eq!(home, before);
    // Once they have expired, the new count starts afresh: G = 600 - 2 × 30.
    let later = T0 + 6 * SECOND;
    assert_eq!(
        renew(&policy, &mut home, later, &ask(1, 2, 2)).unwrap(),
        Some(540)
    );
}
