//! Logging at most once a period, from many threads: an outage would otherwise log
//! every request.

use std::sync::atomic::{AtomicU64, Ordering};

/// When something was last logged (ns on the engine's clock), and how often it may be.
#[derive(Debug)]
pub(crate) struct Throttle {
    last: AtomicU64,
    every: u64,
}

impl Throttle {
    /// At most once every `every` nanoseconds.
    pub(crate) const fn new(every: u64) -> Self {
        Self {
            last: AtomicU64::new(0),
            every,
        }
    }

    /// Whether to log at `now`: true for one caller once `every` has passed.
    pub(crate) fn due(&self, now: u64) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        now.saturating_sub(last) >= self.every
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn once_a_period_whoever_asks() {
        let throttle = Throttle::new(10);
        assert!(throttle.due(10));
        assert!(!throttle.due(15));
        assert!(!throttle.due(19));
        assert!(throttle.due(20));
    }
}
