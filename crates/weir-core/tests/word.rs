//! `check_word` against `check`: on random sequences, under random policies that pack,
//! the same decisions and the same states, including clocks stepping backwards, peeks,
//! refunds in between, costs that never fit and arrival times near the end of time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::time::Duration;

use proptest::prelude::*;
use weir_core::{Algorithm, Policy, State, check, check_word, refund};

const START: u64 = 1_796_032_800_000_000_000;

/// One step: time moved by `shift` (backwards when negative), then a check of `cost`,
/// or a refund of it.
#[derive(Debug, Clone)]
struct Step {
    shift: i64,
    cost: u64,
    refund: bool,
}

/// Policies that pack: GCRA or leaky bucket, a period a whole number of ns per unit.
fn packing_policies() -> impl Strategy<Value = Policy> {
    (
        proptest::sample::select(&[Algorithm::Gcra, Algorithm::LeakyBucket][..]),
        prop_oneof![1u64..=20, Just(1_000_000_000)],
        prop_oneof![1u64..=1_000, Just(366 * 24 * 3600 * 1_000)],
        proptest::option::of(prop_oneof![1u64..=30, Just(1_000_000_000)]),
    )
        .prop_filter_map("must pack", |(algorithm, limit, period_ms, burst)| {
            let policy =
                Policy::new(algorithm, limit, Duration::from_millis(period_ms), burst).ok()?;
            policy.packs().then_some(policy)
        })
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (
        prop_oneof![
            3 => Just(0i64),
            5 => 0i64..1_000_000_000,
            2 => -1_000_000_000i64..0,
            1 => Just(i64::MAX),
        ],
        prop_oneof![6 => Just(1u64), 3 => 0u64..40, 1 => Just(u64::MAX)],
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(shift, cost, refund)| Step {
            shift,
            cost,
            refund,
        });
    proptest::collection::vec(step, 1..100)
}

proptest! {
    #[test]
    fn check_word_is_check((policy, steps) in (packing_policies(), steps())) {
        let mut state: Option<State> = None;
        let mut word = 0u64;
        let mut now = START;
        for step in steps {
            now = now.saturating_add_signed(step.shift);
            if step.refund {
                // A store refunds through the state, then keeps its word again.
                refund(&policy, &mut state, now, step.cost);
                let mut from_word = State::from_word(word);
                refund(&policy, &mut from_word, now, step.cost);
                word = from_word.as_ref().map_or(Some(0), State::word).unwrap();
            } else {
                let expected = check(&policy, &mut state, now, step.cost);
                let decided = check_word(&policy, &mut word, now, step.cost);
                prop_assert_eq!(decided, Some(expected));
            }
            prop_assert_eq!(state.as_ref().map_or(Some(0), State::word), Some(word));
        }
    }
}

#[test]
fn only_policies_that_pack_have_a_word() {
    let minute = Duration::from_secs(60);
    let mut word = 0;
    let gcra = Policy::new(Algorithm::Gcra, 100, minute, None).unwrap();
    assert!(gcra.packs());
    assert!(check_word(&gcra, &mut word, START, 1).is_some());
    assert_eq!(word, START + 600_000_000);
    let seven = Policy::new(Algorithm::Gcra, 7, minute, None).unwrap();
    assert!(!seven.packs());
    let bucket = Policy::new(Algorithm::TokenBucket, 100, minute, None).unwrap();
    assert!(!bucket.packs());
    let mut untouched = word;
    assert_eq!(check_word(&bucket, &mut untouched, START, 1), None);
    assert_eq!(untouched, word);
}
