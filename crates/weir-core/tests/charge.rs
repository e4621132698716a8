//! Charges past the limit (`weir_core::charge`): a debt that later checks wait out, and
//! never more admitted over time than the bucket allows.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::time::Duration;

use proptest::prelude::*;
use weir_core::{Algorithm, Policy, State, charge, check, refund};

const START: u64 = 1_796_032_800_000_000_000;
const SECOND: u64 = 1_000_000_000;

fn bucket(algorithm: Algorithm, limit: u64, period: Duration, burst: Option<u64>) -> Policy {
    Policy::new(algorithm, limit, period, burst).unwrap()
}

#[test]
fn a_debt_is_waited_out_at_the_rate_then_the_bucket_refills_as_usual() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        // 10 a second, bursts of 10: spend 4, then learn the request cost 4 + 10.
        let policy = bucket(algorithm, 10, Duration::from_secs(1), None);
        let mut state = None;
        assert!(check(&policy, &mut state, START, 4).allowed);
        charge(&policy, &mut state, START, 10);
        // 4 tokens are owed: 400 ms to pay them, 100 ms more for the next token.
        let denied = check(&policy, &mut state, START, 1);
        assert!(!denied.allowed, "{algorithm}");
        assert_eq!(denied.remaining, 0);
        assert_eq!(denied.retry_after, Some(Duration::from_millis(500)));
        assert_eq!(
            denied.reset_after,
            Duration::from_millis(1_400),
            "{algorithm}"
        );
        // A peek is no request: allowed, with nothing left.
        let peek = check(&policy, &mut state, START, 0);
        assert_eq!((peek.allowed, peek.remaining), (true, 0), "{algorithm}");
        let early = START + 500 * 1_000_000 - 1;
        assert!(!check(&policy, &mut state, early, 1).allowed, "{algorithm}");
        assert!(
            check(&policy, &mut state, early + 1, 1).allowed,
            "{algorithm}"
        );
        // Then as usual: 1.4 s after the charge, 9 of the 10 back (one spent at 0.5 s).
        let later = check(&policy, &mut state, START + 1_400_000_000, 0);
        assert_eq!(later.remaining, 9, "{algorithm}");
        assert!(check(&policy, &mut state, START + 3 * SECOND, 10).allowed);
    }
}

#[test]
fn a_charge_that_fits_spends_like_a_check_and_one_past_capacity_owes_a_bucket() {
    let policy = bucket(
        Algorithm::TokenBucket,
        100,
        Duration::from_secs(60),
        Some(20),
    );
    let mut state = None;
    charge(&policy, &mut state, START, 5);
    assert_eq!(check(&policy, &mut state, START, 0).remaining, 15);
    // A charge of a million counts as the capacity (20): 5 owed, 0.6 s each at
    // 100/min, and 0.6 s more for the next.
    charge(&policy, &mut state, START, 1_000_000);
    let denied = check(&policy, &mut state, START, 1);
    assert_eq!(denied.retry_after, Some(Duration::from_millis(3_600)));
    // Nothing changes for a charge of 0; another algorithm's state is replaced.
    let before = state.clone();
    charge(&policy, &mut state, START, 0);
    assert_eq!(state, before);
}

#[test]
fn windows_and_logs_carry_no_debt_a_charge_spends_only_what_fits() {
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        assert!(!algorithm.carries_debt());
        let policy = bucket(algorithm, 10, Duration::from_secs(1), None);
        let mut state = None;
        charge(&policy, &mut state, START, 4);
        assert_eq!(check(&policy, &mut state, START, 0).remaining, 6);
        charge(&policy, &mut state, START, 7);
        assert_eq!(
            check(&policy, &mut state, START, 0).remaining,
            6,
            "{algorithm}"
        );
    }
}

/// What a step of a run does.
#[derive(Debug, Clone, Copy)]
enum Step {
    Check,
    Charge,
    /// Gives back up to `cost` of what was consumed (a reservation that cost less).
    Refund,
}

/// A run of checks, charges and refunds: (gap in ns, cost, step).
fn runs() -> impl Strategy<Value = (Policy, Vec<(u64, u64, Step)>)> {
    (
        prop::sample::select(
            &[
                Algorithm::TokenBucket,
                Algorithm::Gcra,
                Algorithm::LeakyBucket,
            ][..],
        ),
        1u64..=20,
        prop_oneof![Just(1_000u64), Just(7_000), 1u64..100_000],
        proptest::option::of(1u64..=30),
    )
        .prop_flat_map(|(algorithm, limit, period_ms, burst)| {
            let policy = bucket(algorithm, limit, Duration::from_millis(period_ms), burst);
            let period = policy.period_ns();
            let capacity = policy.capacity();
            let step = (
                prop_oneof![Just(0u64), 0..period / 4 + 1, 0..2 * period],
                0..=capacity + 2,
                prop_oneof![
                    6 => Just(Step::Check),
                    3 => Just(Step::Charge),
                    2 => Just(Step::Refund),
                ],
            );
            (Just(policy), proptest::collection::vec(step, 1..80))
        })
}

proptest! {
    /// However checks, charges and refunds are mixed, each unit admitted keeps the
    /// bucket's bound: everything consumed since the start (less what was given back),
    /// that unit included, is at most the capacity plus the rate times the time gone. A
    /// refund while in debt pays the debt; it is not spendable before. And at the end,
    /// `retry_after` names the next instant a unit is admitted exactly (1 ns earlier is
    /// denied).
    #[test]
    fn debts_are_paid_before_anything_more_is_admitted((policy, run) in runs()) {
        let mut state: Option<State> = None;
        let (mut now, mut consumed) = (START, 0u128);
        let bound = |at: u64| {
            u128::from(policy.capacity())
                + u128::from(at - START) * u128::from(policy.limit()) / u128::from(policy.period_ns())
        };
        for (gap, cost, step) in run {
            now += gap;
            match step {
                Step::Charge => {
                    charge(&policy, &mut state, now, cost);
                    consumed += u128::from(cost.min(policy.capacity()));
                }
                Step::Refund => {
                    let back = u64::try_from(consumed.min(u128::from(cost))).unwrap();
                    refund(&policy, &mut state, now, back);
                    consumed -= u128::from(back);
                }
                Step::Check => {
                    if check(&policy, &mut state, now, cost).allowed && cost > 0 {
                        consumed += u128::from(cost);
                        prop_assert!(
                            consumed <= bound(now),
                            "consumed {} by {} ns: more than {}",
                            consumed, now - START, bound(now)
                        );
                    }
                }
            }
        }
        let d = check(&policy, &mut state.clone(), now, 1);
        let at = now + d.retry_after.map_or(0, |r| r.as_nanos() as u64);
        if let Some(wait) = d.retry_after {
            prop_assert!(!wait.is_zero());
            let mut earlier = state.clone();
            prop_assert!(!check(&policy, &mut earlier, at - 1, 1).allowed);
        }
        prop_assert!(check(&policy, &mut state, at, 1).allowed);
        prop_assert!(
            consumed < bound(at),
            "consumed {} + 1 by {} ns: more than {}",
            consumed, at - START, bound(at)
        );
    }

    /// The token bucket and GCRA are one admission, charges and refunds included: the
    /// same run decides alike under both.
    #[test]
    fn token_bucket_and_gcra_owe_alike((policy, run) in runs()) {
        let other = |a| bucket(a, policy.limit(), policy.period(), policy.burst());
        let (bucket_policy, gcra_policy) = (other(Algorithm::TokenBucket), other(Algorithm::Gcra));
        let (mut tb, mut gcra, mut now) = (None, None, START);
        for (gap, cost, step) in run {
            now += gap;
            match step {
                Step::Charge => {
                    charge(&bucket_policy, &mut tb, now, cost);
                    charge(&gcra_policy, &mut gcra, now, cost);
                }
                Step::Refund => {
                    refund(&bucket_policy, &mut tb, now, cost);
                    refund(&gcra_policy, &mut gcra, now, cost);
                }
                Step::Check => {
                    let a = check(&bucket_policy, &mut tb, now, cost);
                    let b = check(&gcra_policy, &mut gcra, now, cost);
                    prop_assert_eq!((a.allowed, a.remaining), (b.allowed, b.remaining));
                    prop_assert_eq!(a.retry_after, b.retry_after);
                }
            }
        }
    }
}
