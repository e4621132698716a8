//! A count over a sliding window of time, kept in ten buckets: what the retry budget
//! and the throttle count requests, retries and accepts with.

use std::time::Duration;

/// Buckets per window: the window slides a tenth at a time.
const BUCKETS: usize = 10;

/// Events counted over the last `span` (to within a tenth of it).
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// The length of one bucket, in nanoseconds (at least 1).
    width: u128,
    /// Per bucket: the number of the slot it counts (time / width), and its count.
    buckets: [(u128, u64); BUCKETS],
}

impl Window {
    /// A window of `span` (a zero span counts over a nanosecond).
    pub(crate) fn new(span: Duration) -> Self {
        Self {
            width: (span.as_nanos() / BUCKETS as u128).max(1),
            buckets: [(0, 0); BUCKETS],
        }
    }

    fn slot(&self, now: Duration) -> u128 {
        now.as_nanos() / self.width
    }

    /// Counts `n` events at `now`.
    pub(crate) fn add(&mut self, now: Duration, n: u64) {
        let slot = self.slot(now);
        let bucket = &mut self.buckets[(slot % BUCKETS as u128) as usize];
        if bucket.0 != slot {
            *bucket = (slot, 0);
        }
        bucket.1 = bucket.1.saturating_add(n);
    }

    /// The events counted in the window ending at `now`.
    pub(crate) fn sum(&self, now: Duration) -> u64 {
        let slot = self.slot(now);
        self.buckets
            .iter()
            .filter(|(s, _)| *s <= slot && slot - *s < BUCKETS as u128)
            .fold(0, |sum, (_, n)| sum.saturating_add(*n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_slide_out_a_tenth_at_a_time() {
        let mut window = Window::new(Duration::from_secs(10));
        let at = Duration::from_secs;
        window.add(at(0), 3);
        window.add(at(5), 2);
        assert_eq!(window.sum(at(5)), 5);
        assert_eq!(window.sum(at(9)), 5);
        // The bucket of second 0 leaves the window at second 10.
        assert_eq!(window.sum(at(10)), 2);
        assert_eq!(window.sum(at(14)), 2);
        assert_eq!(window.sum(at(15)), 0);
        // A bucket reused for a later slot starts again from zero.
        window.add(at(20), 1);
        assert_eq!(window.sum(at(20)), 1);
    }

    #[test]
    fn a_zero_span_and_huge_times_do_not_panic() {
        let mut window = Window::new(Duration::ZERO);
        window.add(Duration::MAX, u64::MAX);
        window.add(Duration::MAX, u64::MAX);
        assert_eq!(window.sum(Duration::MAX), u64::MAX);
        assert_eq!(window.sum(Duration::ZERO), 0, "the future is not counted");
    }
}
