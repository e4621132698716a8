//! The design article's examples (`shared/seed`), and the behaviours every algorithm
//! shares, with explicit instants.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::time::Duration;

use weir_core::{Algorithm, Decision, Policy, State, check};

const SEC: u64 = 1_000_000_000;
/// 2026-11-30 10:00:00 UTC, a whole minute since the epoch.
const TEN_AM: u64 = 1_796_032_800 * SEC;

fn policy(algorithm: Algorithm, limit: u64, period_secs: u64, burst: Option<u64>) -> Policy {
    Policy::new(algorithm, limit, Duration::from_secs(period_secs), burst).unwrap()
}

fn admitted(policy: &Policy, state: &mut Option<State>, now: u64, requests: u64) -> u64 {
    (0..requests)
        .filter(|_| check(policy, state, now, 1).allowed)
        .count() as u64
}

#[test]
fn fixed_window_lets_double_through_around_a_boundary() {
    let p = policy(Algorithm::FixedWindow, 100, 60, None);
    let mut state = None;
    let before = admitted(&p, &mut state, TEN_AM + 59 * SEC, 100);
    let after = admitted(&p, &mut state, TEN_AM + 60 * SEC, 100);
    assert_eq!(before + after, 200);
    // ... and no more within the new window.
    let d = check(&p, &mut state, TEN_AM + 61 * SEC, 1);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_secs(59)));
}

#[test]
fn sliding_window_admits_at_80_previous_30_current_15s_in() {
    let p = policy(Algorithm::SlidingWindow, 100, 60, None);
    let mut state = None;
    assert_eq!(admitted(&p, &mut state, TEN_AM + 20 * SEC, 80), 80);
    assert_eq!(admitted(&p, &mut state, TEN_AM + 75 * SEC, 30), 30);
    // 15 s into the current minute: 80 × 0.75 + 30 = 90, so the next one fits.
    let d = check(&p, &mut state, TEN_AM + 75 * SEC, 1);
    assert!(d.allowed);
    assert_eq!(d.remaining, 9);
    // Nine more fit (estimate 100), the tenth does not.
    assert_eq!(admitted(&p, &mut state, TEN_AM + 75 * SEC, 10), 9);
    let d = check(&p, &mut state, TEN_AM + 75 * SEC, 1);
    assert!(!d.allowed);
    // 80 × (60 − e)/60 + 40 + 1 <= 100 first holds at e = 15.75 s.
    assert_eq!(d.retry_after, Some(Duration::from_millis(750)));
}

#[test]
fn token_bucket_bursts_ten_then_one_per_six_seconds_for_a_300ms_retrier() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let p = policy(algorithm, 10, 60, None);
        let mut state = None;
        assert_eq!(admitted(&p, &mut state, TEN_AM, 11), 10, "{algorithm}");
        let mut through = Vec::new();
        for step in 1..=200u64 {
            let now = TEN_AM + step * 300_000_000;
            if check(&p, &mut state, now, 1).allowed {
                through.push(now - TEN_AM);
            }
        }
        let expected: Vec<u64> = (1..=10).map(|k| k * 6 * SEC).collect();
        assert_eq!(through, expected, "{algorithm}");
    }
}

#[test]
fn token_bucket_reports_fractional_waits() {
    let p = policy(Algorithm::TokenBucket, 10, 60, None);
    let mut state = None;
    admitted(&p, &mut state, TEN_AM, 10);
    let d = check(&p, &mut state, TEN_AM + 300_000_000, 1);
    assert_eq!(
        d,
        Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            reset_after: Duration::from_millis(59_700),
            retry_after: Some(Duration::from_millis(5_700)),
            delay: Duration::ZERO,
        }
    );
}

#[test]
fn leaky_bucket_spaces_a_burst_at_the_steady_rate() {
    let p = policy(Algorithm::LeakyBucket, 10, 60, Some(3));
    let mut state = None;
    let delays: Vec<_> = (0..3)
        .map(|_| check(&p, &mut state, TEN_AM, 1).delay)
        .collect();
    assert_eq!(
        delays,
        [0, 6, 12].map(Duration::from_secs).to_vec(),
        "each request leaves 6 s after the one before"
    );
    let full = check(&p, &mut state, TEN_AM, 1);
    assert!(!full.allowed, "the queue holds 3");
    assert_eq!(full.retry_after, Some(Duration::from_secs(6)));
    let d = check(&p, &mut state, TEN_AM + 6 * SEC, 1);
    assert!(d.allowed);
    assert_eq!(d.delay, Duration::from_secs(12));
}

#[test]
fn sliding_log_is_exact_over_any_trailing_period() {
    let p = policy(Algorithm::SlidingLog, 3, 60, None);
    let mut state = None;
    for t in [0, 10, 20] {
        assert!(check(&p, &mut state, TEN_AM + t * SEC, 1).allowed);
    }
    let d = check(&p, &mut state, TEN_AM + 59 * SEC, 1);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
    assert!(check(&p, &mut state, TEN_AM + 60 * SEC, 1).allowed);
    assert!(!check(&p, &mut state, TEN_AM + 69 * SEC, 1).allowed);
    assert!(check(&p, &mut state, TEN_AM + 70 * SEC, 1).allowed);
}

#[test]
fn a_cost_that_can_never_fit_is_denied_without_retry_and_consumes_nothing() {
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 10, 60, None);
        let mut state = None;
        let d = check(&p, &mut state, TEN_AM, 11);
        assert!(!d.allowed, "{algorithm}");
        assert_eq!(d.retry_after, None, "{algorithm}");
        assert_eq!(d.remaining, 10, "{algorithm}");
        assert_eq!(state, None, "{algorithm}: nothing stored");
        assert_eq!(
            check(&p, &mut state, TEN_AM, 10).remaining,
            0,
            "{algorithm}"
        );
    }
}

#[test]
fn cost_zero_is_a_peek() {
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 10, 60, None);
        let mut state = None;
        let d = check(&p, &mut state, TEN_AM, 0);
        assert!(d.allowed, "{algorithm}");
        assert_eq!((d.remaining, state.clone()), (10, None), "{algorithm}");
        check(&p, &mut state, TEN_AM, 4);
        let before = state.clone();
        for _ in 0..5 {
            assert_eq!(check(&p, &mut state, TEN_AM, 0).remaining, 6, "{algorithm}");
        }
        assert_eq!(state, before, "{algorithm}: a peek changes nothing");
    }
}

#[test]
fn a_clock_stepping_backwards_grants_nothing() {
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 10, 60, None);
        let mut state = None;
        assert_eq!(admitted(&p, &mut state, TEN_AM + 30 * SEC, 10), 10);
        for back in [1, 29, 30, 31, 3600] {
            let d = check(&p, &mut state, TEN_AM + 30 * SEC - back * SEC, 1);
            assert!(!d.allowed, "{algorithm}, {back} s back");
        }
    }
}

#[test]
fn state_is_dropped_once_full_again() {
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 10, 60, None);
        let mut state = None;
        let d = check(&p, &mut state, TEN_AM + 5 * SEC, 3);
        assert!(state.is_some(), "{algorithm}");
        let later = TEN_AM + 5 * SEC + d.reset_after.as_nanos() as u64;
        assert_eq!(check(&p, &mut state, later, 0).remaining, 10, "{algorithm}");
        assert_eq!(state, None, "{algorithm}: full at reset_after");
    }
}

#[test]
fn exact_rates_that_do_not_divide_evenly() {
    // 7 per minute: one token every 8.571428571... s, kept exactly. Checking every
    // millisecond, each token is taken at the first whole millisecond after it appears,
    // with no drift however long it runs.
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let p = policy(algorithm, 7, 60, None);
        let mut state = None;
        assert_eq!(admitted(&p, &mut state, TEN_AM, 7), 7);
        let mut through = Vec::new();
        for ms in 1..=(7 * 60_000u64) {
            if check(&p, &mut state, TEN_AM + ms * 1_000_000, 1).allowed {
                through.push(ms);
            }
        }
        let expected: Vec<u64> = (1..=49u64).map(|k| (k * 60_000).div_ceil(7)).collect();
        assert_eq!(through, expected, "{algorithm}");
    }
}
