//! Refunds: giving back what a check consumed, per algorithm, with explicit instants.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::time::Duration;

use weir_core::{Algorithm, Decision, Policy, State, check, refund};

const SEC: u64 = 1_000_000_000;
/// 2026-11-30 10:00:00 UTC, a whole minute since the epoch.
const TEN_AM: u64 = 1_796_032_800 * SEC;

/// 10 per minute.
fn ten_a_minute(algorithm: Algorithm) -> Policy {
    Policy::new(algorithm, 10, Duration::from_secs(60), None).unwrap()
}

/// What `state` reports at `now`, changing nothing.
fn peek(policy: &Policy, state: &Option<State>, now: u64) -> Decision {
    check(policy, &mut state.clone(), now, 0)
}

#[test]
fn a_refund_gets_back_to_where_the_state_was() {
    for algorithm in Algorithm::ALL {
        let p = ten_a_minute(algorithm);
        let mut before = None;
        assert!(check(&p, &mut before, TEN_AM + 5 * SEC, 3).allowed);
        let mut reserved = before.clone();
        let d = check(&p, &mut reserved, TEN_AM + 6 * SEC, 2);
        assert!(d.allowed, "{algorithm}");
        assert_eq!(
            d.remaining + 2,
            peek(&p, &before, TEN_AM + 6 * SEC).remaining,
            "{algorithm}"
        );
        // Settled a second later (the upstream's answer), nothing else in between.
        refund(&p, &mut reserved, TEN_AM + 7 * SEC, 2);
        for at in [7, 8, 30, 59, 61, 90, 200] {
            let now = TEN_AM + at * SEC;
            assert_eq!(
                peek(&p, &reserved, now),
                peek(&p, &before, now),
                "{algorithm} at {at} s"
            );
        }
    }
}

#[test]
fn a_refund_never_fills_beyond_the_capacity() {
    for algorithm in Algorithm::ALL {
        let p = ten_a_minute(algorithm);
        let mut state = None;
        assert!(check(&p, &mut state, TEN_AM, 1).allowed);
        refund(&p, &mut state, TEN_AM, 5);
        assert_eq!(state, None, "{algorithm}: full again, nothing to store");
        assert_eq!(peek(&p, &state, TEN_AM).remaining, 10, "{algorithm}");
        refund(&p, &mut state, TEN_AM, 10);
        assert_eq!(state, None, "{algorithm}: a full key stays full");
        // A cost that check never consumes gives nothing back either.
        assert!(check(&p, &mut state, TEN_AM, 4).allowed);
        refund(&p, &mut state, TEN_AM, 11);
        assert_eq!(peek(&p, &state, TEN_AM).remaining, 6, "{algorithm}");
    }
}

#[test]
fn buckets_give_back_only_what_has_not_refilled() {
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::LeakyBucket,
    ] {
        let p = ten_a_minute(algorithm);
        let mut state = None;
        assert!(check(&p, &mut state, TEN_AM, 6).allowed);
        assert_eq!(peek(&p, &state, TEN_AM + 12 * SEC).remaining, 6);
        // 12 s later two units have come back by themselves: 4 are still held.
        refund(&p, &mut state, TEN_AM + 12 * SEC, 3);
        assert_eq!(peek(&p, &state, TEN_AM + 12 * SEC).remaining, 9);
        refund(&p, &mut state, TEN_AM + 12 * SEC, 3);
        assert_eq!(state, None, "{algorithm}");
    }
}

#[test]
fn units_that_have_expired_are_not_given_back() {
    // Fixed window: the window of the reservation has rolled.
    let p = ten_a_minute(Algorithm::FixedWindow);
    let mut state = None;
    assert!(check(&p, &mut state, TEN_AM + 50 * SEC, 4).allowed);
    refund(&p, &mut state, TEN_AM + 61 * SEC, 4);
    assert_eq!(state, None);

    // Sliding window: in the next window the reservation weighs less and less, and
    // the refund takes off exactly that weight; two windows on, nothing is left.
    let p = ten_a_minute(Algorithm::SlidingWindow);
    let mut before = None;
    assert!(check(&p, &mut before, TEN_AM + 10 * SEC, 4).allowed);
    let mut reserved = before.clone();
    assert!(check(&p, &mut reserved, TEN_AM + 50 * SEC, 6).allowed);
    refund(&p, &mut reserved, TEN_AM + 75 * SEC, 6);
    assert_eq!(
        peek(&p, &reserved, TEN_AM + 75 * SEC),
        peek(&p, &before, TEN_AM + 75 * SEC)
    );
    assert_eq!(peek(&p, &reserved, TEN_AM + 75 * SEC).remaining, 7);
    let mut late = None;
    assert!(check(&p, &mut late, TEN_AM + 50 * SEC, 6).allowed);
    refund(&p, &mut late, TEN_AM + 120 * SEC, 6);
    assert_eq!(late, None);

    // Sliding log: the entry has left the trailing period.
    let p = ten_a_minute(Algorithm::SlidingLog);
    let mut state = None;
    assert!(check(&p, &mut state, TEN_AM, 4).allowed);
    refund(&p, &mut state, TEN_AM + 60 * SEC, 4);
    assert_eq!(state, None);
}

#[test]
fn a_clock_stepping_backwards_gives_back_no_more_than_the_cost() {
    for algorithm in Algorithm::ALL {
        let p = ten_a_minute(algorithm);
        let mut before = None;
        assert!(check(&p, &mut before, TEN_AM + 30 * SEC, 5).allowed);
        let mut reserved = before.clone();
        assert!(check(&p, &mut reserved, TEN_AM + 30 * SEC, 3).allowed);
        // The refund's clock reads 20 s earlier than the check's.
        refund(&p, &mut reserved, TEN_AM + 10 * SEC, 3);
        for at in [10, 20, 30, 31, 45, 60, 89, 100, 200] {
            let now = TEN_AM + at * SEC;
            let (after, without) = (peek(&p, &reserved, now), peek(&p, &before, now));
            assert!(
                after.remaining <= without.remaining,
                "{algorithm} at {at} s: {after:?} beyond {without:?}"
            );
        }
        // From the check's own instant on, exactly as if it had not happened.
        assert_eq!(
            peek(&p, &reserved, TEN_AM + 30 * SEC),
            peek(&p, &before, TEN_AM + 30 * SEC),
            "{algorithm}"
        );
    }
}

#[test]
fn a_sliding_log_refund_takes_the_newest_entries() {
    let p = ten_a_minute(Algorithm::SlidingLog);
    let mut state = None;
    assert!(check(&p, &mut state, TEN_AM, 2).allowed);
    // The reservation, then another request admitted before the refund.
    assert!(check(&p, &mut state, TEN_AM + 10 * SEC, 3).allowed);
    assert!(check(&p, &mut state, TEN_AM + 20 * SEC, 1).allowed);
    refund(&p, &mut state, TEN_AM + 21 * SEC, 3);
    let d = peek(&p, &state, TEN_AM + 21 * SEC);
    assert_eq!(d.remaining, 7, "the total is exact");
    // The 1 at 20 s and 2 of the 3 at 10 s were taken: 1 at 10 s is left, which expires
    // at 70 s where the request at 20 s would have lasted until 80 s.
    assert_eq!(d.reset_after, Duration::from_secs(49));
    assert_eq!(peek(&p, &state, TEN_AM + 60 * SEC).remaining, 9);
    assert_eq!(peek(&p, &state, TEN_AM + 70 * SEC).remaining, 10);
}
