//! The bound itself: the phase-free window form is the worst phase of the exact form,
//! and a plain bucket reaches it.

use weir_lease_model::{bucket_bound, plain_bucket_admits, window_bound};

/// `window_bound(W)` is the largest `bucket_bound` over every window of `W` ticks.
#[test]
fn the_window_bound_is_the_worst_phase() {
    for capacity in 1..4 {
        for every in 1..5 {
            for window in 1..12 {
                let worst = (0..20)
                    .map(|first| bucket_bound(capacity, every, first, first + window - 1))
                    .max();
                assert_eq!(worst, Some(window_bound(capacity, every, window)));
                // C + floor(W / R), or one more, or (R = 1) one less.
                let simple = capacity + window / every;
                let bound = window_bound(capacity, every, window);
                assert!(bound + 1 >= simple && bound <= simple + 1);
            }
        }
    }
}

/// A plain bucket spending everything it has at every tick admits exactly the bound
/// from tick 0, and not one unit more.
#[test]
fn a_greedy_plain_bucket_reaches_the_bound() {
    let (capacity, every) = (2u32, 3u32);
    let greedy: Vec<u8> = (0..10u8)
        .map(|tick| match tick {
            0 => 2,
            t if t.is_multiple_of(3) => 1,
            _ => 0,
        })
        .collect();
    assert!(plain_bucket_admits(capacity, every, &greedy));
    let mut total = 0;
    for (last, &units) in (0u32..).zip(&greedy) {
        total += u32::from(units);
        assert_eq!(total, bucket_bound(capacity, every, 0, last));
    }
    let mut more = greedy.clone();
    more[4] = 1;
    assert!(!plain_bucket_admits(capacity, every, &more));
    // Saving up does not raise the burst above the capacity.
    assert!(!plain_bucket_admits(
        capacity,
        every,
        &[0, 0, 0, 0, 0, 0, 3]
    ));
}
