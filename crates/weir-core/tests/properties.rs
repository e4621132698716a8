//! Property tests over random request sequences: the guarantees each algorithm makes,
//! checked on what it actually admitted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::time::Duration;

use proptest::prelude::*;
use weir_core::{Algorithm, Decision, Policy, State, check, refund};

const START: u64 = 1_796_032_800_000_000_000;

/// One request: how long after the previous one it comes, and its cost.
#[derive(Debug, Clone)]
struct Step {
    gap: u64,
    cost: u64,
}

fn policies(algorithms: &'static [Algorithm]) -> impl Strategy<Value = Policy> {
    (
        proptest::sample::select(algorithms),
        1u64..=20,
        prop_oneof![Just(1_000u64), Just(7_000), Just(60_000), 1u64..100_000],
        proptest::option::of(1u64..=30),
    )
        .prop_map(|(algorithm, limit, period_ms, burst)| {
            let burst = burst.filter(|_| algorithm.takes_burst());
            Policy::new(algorithm, limit, Duration::from_millis(period_ms), burst).unwrap()
        })
}

fn steps(policy: &Policy) -> impl Strategy<Value = Vec<Step>> + use<> {
    let period = policy.period_ns();
    let capacity = policy.capacity();
    let step = (
        prop_oneof![
            3 => Just(0u64),
            5 => 0..period / 4 + 1,
            2 => 0..2 * period,
            1 => Just(period),
        ],
        prop_oneof![8 => Just(1u64), 3 => 0..=capacity, 1 => capacity..capacity + 3],
    )
        .prop_map(|(gap, cost)| Step { gap, cost });
    proptest::collection::vec(step, 1..120)
}

fn policy_and_steps(
    algorithms: &'static [Algorithm],
) -> impl Strategy<Value = (Policy, Vec<Step>)> {
    policies(algorithms).prop_flat_map(|p| (Just(p), steps(&p)))
}

/// Every check of a run: (now, cost, decision).
type Checks = Vec<(u64, u64, Decision)>;

/// Runs the sequence; returns every check and the admitted (now, cost).
fn run(policy: &Policy, steps: &[Step]) -> (Checks, Vec<(u64, u64)>) {
    let mut state: Option<State> = None;
    let mut now = START;
    let mut all = Vec::new();
    let mut admitted = Vec::new();
    for step in steps {
        now += step.gap;
        let decision = check(policy, &mut state, now, step.cost);
        if decision.allowed && step.cost > 0 {
            admitted.push((now, step.cost));
        }
        all.push((now, step.cost, decision));
    }
    (all, admitted)
}

/// The largest cost admitted in any closed interval of length `span`.
fn max_in_window(admitted: &[(u64, u64)], span: u64, open_start: bool) -> u64 {
    let mut best = 0;
    for (j, &(end, _)) in admitted.iter().enumerate() {
        let total: u64 = admitted[..=j]
            .iter()
            .filter(|&&(t, _)| {
                if open_start {
                    t + span > end
                } else {
                    t + span >= end
                }
            })
            .map(|&(_, c)| c)
            .sum();
        best = best.max(total);
    }
    best
}

const BUCKETS: &[Algorithm] = &[
    Algorithm::TokenBucket,
    Algorithm::Gcra,
    Algorithm::LeakyBucket,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Admitted cost in any interval [a, b] <= burst + rate × (b − a).
    #[test]
    fn buckets_never_exceed_burst_plus_rate((policy, steps) in policy_and_steps(BUCKETS)) {
        let (_, admitted) = run(&policy, &steps);
        let (limit, period) = (u128::from(policy.limit()), u128::from(policy.period_ns()));
        for i in 0..admitted.len() {
            let mut total = 0u128;
            for &(t, c) in &admitted[i..] {
                total += u128::from(c);
                let elapsed = u128::from(t - admitted[i].0);
                prop_assert!(
                    total * period <= u128::from(policy.capacity()) * period + elapsed * limit,
                    "{} admitted in {} ns", total, elapsed
                );
            }
        }
    }

    /// The sliding log never admits more than `limit` in any trailing period.
    #[test]
    fn sliding_log_never_exceeds_limit((policy, steps) in policy_and_steps(&[Algorithm::SlidingLog])) {
        let (_, admitted) = run(&policy, &steps);
        prop_assert!(max_in_window(&admitted, policy.period_ns(), true) <= policy.limit());
    }

    /// A fixed window never admits more than twice the limit across any period.
    #[test]
    fn fixed_window_never_exceeds_twice_the_limit((policy, steps) in policy_and_steps(&[Algorithm::FixedWindow])) {
        let (_, admitted) = run(&policy, &steps);
        prop_assert!(max_in_window(&admitted, policy.period_ns(), false) <= 2 * policy.limit());
    }

    /// The sliding window counter's estimate bounds it by twice the limit per period too.
    #[test]
    fn sliding_window_never_exceeds_twice_the_limit((policy, steps) in policy_and_steps(&[Algorithm::SlidingWindow])) {
        let (_, admitted) = run(&policy, &steps);
        prop_assert!(max_in_window(&admitted, policy.period_ns(), false) <= 2 * policy.limit());
    }

    /// Remaining is within [0, capacity]; a denial never carries a delay; retry times are
    /// given exactly when the cost can fit.
    #[test]
    fn decisions_are_consistent((policy, steps) in policy_and_steps(&Algorithm::ALL)) {
        let (all, _) = run(&policy, &steps);
        for (_, cost, d) in all {
            prop_assert!(d.remaining <= policy.capacity());
            prop_assert_eq!(d.limit, policy.limit());
            if d.allowed {
                prop_assert!(d.retry_after.is_none());
            } else {
                prop_assert_eq!(d.delay, Duration::ZERO);
                prop_assert_eq!(d.retry_after.is_some(), cost <= policy.capacity());
                prop_assert!(d.retry_after.is_none_or(|r| r > Duration::ZERO));
            }
        }
    }

    /// A client that retries at now + retry_after (rounded up to whole milliseconds, as
    /// the API reports it) with the same cost is admitted, when nobody else came.
    #[test]
    fn a_retry_at_retry_after_is_admitted((policy, steps) in policy_and_steps(&Algorithm::ALL)) {
        let mut state: Option<State> = None;
        let mut now = START;
        for step in &steps {
            now += step.gap;
            let before = state.clone();
            let d = check(&policy, &mut state, now, step.cost);
            if let Some(retry) = d.retry_after {
                let exact = retry.as_nanos() as u64;
                let whole_ms = exact.div_ceil(1_000_000) * 1_000_000;
                for wait in [exact, whole_ms] {
                    let mut retry_state = before.clone();
                    let again = check(&policy, &mut retry_state, now + wait, step.cost);
                    prop_assert!(again.allowed, "denied at retry_after {:?}: {:?}", retry, again);
                }
                if exact > 1 {
                    // ... and not much before (a tight retry time), for exact algorithms.
                    let mut early = before.clone();
                    let d_early = check(&policy, &mut early, now + exact - 1, step.cost);
                    prop_assert!(!d_early.allowed, "admitted before retry_after {:?}", retry);
                }
            }
        }
    }

    /// Token bucket and GCRA are the same admission, kept differently.
    #[test]
    fn token_bucket_and_gcra_agree((policy, steps) in policy_and_steps(&[Algorithm::TokenBucket])) {
        let gcra = Policy::new(Algorithm::Gcra, policy.limit(), policy.period(), policy.burst()).unwrap();
        let (bucket_run, _) = run(&policy, &steps);
        let (gcra_run, _) = run(&gcra, &steps);
        for ((_, _, a), (_, _, b)) in bucket_run.iter().zip(&gcra_run) {
            prop_assert_eq!(a, b);
        }
    }

    /// Checking earlier than the last check never grants what a check at the later
    /// instant would deny.
    #[test]
    fn earlier_instants_grant_nothing_more(
        (policy, steps) in policy_and_steps(&Algorithm::ALL),
        back in 1u64..200_000_000_000,
        cost in 1u64..5,
    ) {
        let mut state: Option<State> = None;
        let mut now = START;
        for step in &steps {
            now += step.gap;
            check(&policy, &mut state, now, step.cost);
            let at_now = check(&policy, &mut state.clone(), now, cost);
            let earlier = check(&policy, &mut state.clone(), now.saturating_sub(back), cost);
            prop_assert!(!earlier.allowed || at_now.allowed);
        }
    }

    /// A check refunded at the same instant leaves a state that decides every later
    /// request exactly as if the check had not happened (and the check itself decided
    /// as the untouched state would).
    #[test]
    fn a_check_refunded_at_once_changes_nothing(
        (policy, steps) in policy_and_steps(&Algorithm::ALL),
        refunded in proptest::collection::vec(proptest::bool::ANY, 120),
    ) {
        let mut settled: Option<State> = None;
        let mut untouched: Option<State> = None;
        let mut now = START;
        for (i, (step, refunded)) in steps.iter().zip(refunded).enumerate() {
            now += step.gap;
            let d = check(&policy, &mut settled, now, step.cost);
            if refunded {
                prop_assert_eq!(d, check(&policy, &mut untouched.clone(), now, step.cost));
                if d.allowed {
                    refund(&policy, &mut settled, now, step.cost);
                }
            } else {
                let expected = check(&policy, &mut untouched, now, step.cost);
                prop_assert_eq!(d, expected, "step {}", i);
            }
        }
    }

    /// With nothing else counted in between, a refund never leaves more than the state
    /// held before the check it gives back, whenever it comes and whatever its clock
    /// says.
    #[test]
    fn a_refund_gives_back_at_most_the_reservation(
        (policy, steps) in policy_and_steps(&Algorithm::ALL),
        later in 0u64..120_000_000_000,
        back in 0u64..120_000_000_000,
        cost in 1u64..5,
    ) {
        let mut state: Option<State> = None;
        let mut now = START;
        for step in &steps {
            now += step.gap;
            check(&policy, &mut state, now, step.cost);
            let before = state.clone();
            let mut reserved = state.clone();
            if !check(&policy, &mut reserved, now, cost).allowed {
                continue;
            }
            let settled_at = (now + later).saturating_sub(back);
            refund(&policy, &mut reserved, settled_at, cost);
            // A state says nothing about instants before its last use (a full one is
            // dropped), so probe from the later of the two on.
            let from = now.max(settled_at);
            for probe in [from, from + policy.period_ns() / 3, from + policy.period_ns()] {
                let after = check(&policy, &mut reserved.clone(), probe, 0);
                let without = check(&policy, &mut before.clone(), probe, 0);
                prop_assert!(after.remaining <= without.remaining, "{:?} beyond {:?}", after, without);
            }
        }
    }
}

proptest! {
    /// One key checked under two limits of one algorithm (callers of two plans sharing
    /// a key, or a limit changed by a reload): no panic, what each check reports stays
    /// within its own limit, and nothing is admitted beyond it.
    #[test]
    fn a_key_shared_by_two_limits_reports_within_each((policy, steps) in policy_and_steps(&Algorithm::ALL), low in 1u64..=20) {
        let other = Policy::new(
            policy.algorithm(),
            low,
            policy.period(),
            policy.burst().map(|b| b.min(low)),
        )
        .unwrap();
        let mut state: Option<State> = None;
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            now += step.gap;
            let under = if i % 3 == 0 { &other } else { &policy };
            if i % 7 == 6 {
                refund(under, &mut state, now, step.cost.min(under.capacity()));
            }
            let decision = check(under, &mut state, now, step.cost);
            prop_assert!(decision.remaining <= under.capacity(), "{decision:?} under {under:?}");
            // For the counting windows, what the key holds after an admitted check is
            // within the limit it was admitted under (read by a peek of a far larger
            // limit, where the state is a count).
            if decision.allowed
                && step.cost > 0
                && matches!(policy.algorithm(), Algorithm::FixedWindow | Algorithm::SlidingLog)
            {
                let wide = Policy::new(policy.algorithm(), 10_000, policy.period(), None).unwrap();
                let held = 10_000 - check(&wide, &mut state, now, 0).remaining;
                prop_assert!(held <= under.limit(), "{held} held after admission under {under:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A peek (cost 0) is always allowed; its `remaining` says what a request would get:
    /// one of cost 1 at the same instant is admitted exactly when the peek's `remaining`
    /// is at least 1 (the guide's decision API chapter tells `/v1/check` callers to read it so).
    #[test]
    fn a_peeks_remaining_says_whether_a_request_of_one_would_pass(
        (policy, steps) in policy_and_steps(&Algorithm::ALL),
    ) {
        let mut state: Option<State> = None;
        let mut now = START;
        for step in &steps {
            now += step.gap;
            let peek = check(&policy, &mut state, now, 0);
            prop_assert!(peek.allowed);
            let mut trial = state.clone();
            let one = check(&policy, &mut trial, now, 1);
            prop_assert_eq!(one.allowed, peek.remaining >= 1, "{:?} at {}", peek, now);
            check(&policy, &mut state, now, step.cost);
        }
    }
}
