//! Randomness, handed in: jitter and the throttle's coin come from a [`Random`], so
//! tests can fix them.

use std::time::Duration;

use parking_lot::Mutex;

/// A source of uniform numbers in `[0, 1)`.
pub trait Random: Send + Sync + 'static {
    /// A number in `[0, 1)`.
    fn unit(&self) -> f64;
}

/// fastrand's generator, seeded from the system or by the caller.
#[derive(Debug)]
pub struct FastRandom {
    rng: Mutex<fastrand::Rng>,
}

impl FastRandom {
    /// A generator seeded from the system.
    pub fn new() -> Self {
        Self {
            rng: Mutex::new(fastrand::Rng::new()),
        }
    }

    /// A generator that repeats its sequence for the same `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self {
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
        }
    }
}

impl Default for FastRandom {
    fn default() -> Self {
        Self::new()
    }
}

impl Random for FastRandom {
    fn unit(&self) -> f64 {
        self.rng.lock().f64()
    }
}

/// A uniform duration in `[0, upper)`: full jitter. A source that strays outside
/// `[0, 1)` (NaN included) counts as 0, so this never panics.
pub(crate) fn below(random: &dyn Random, upper: Duration) -> Duration {
    let unit = random.unit();
    if (0.0..1.0).contains(&unit) {
        upper.mul_f64(unit)
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
pub(crate) mod fixed {
    //! A source that answers the same number every time.

    /// Always `self.0`.
    pub(crate) struct Fixed(pub f64);

    impl super::Random for Fixed {
        fn unit(&self) -> f64 {
            self.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fixed::Fixed;

    #[test]
    fn jitter_stays_below_its_bound_and_survives_bad_sources() {
        let second = Duration::from_secs(1);
        assert_eq!(below(&Fixed(0.0), second), Duration::ZERO);
        assert_eq!(below(&Fixed(0.5), second), Duration::from_millis(500));
        assert_eq!(below(&Fixed(f64::NAN), second), Duration::ZERO);
        assert_eq!(below(&Fixed(1.0), second), Duration::ZERO);
        assert_eq!(below(&Fixed(-0.5), Duration::MAX), Duration::ZERO);
        let seeded = FastRandom::seeded(7);
        for _ in 0..1000 {
            assert!(below(&seeded, second) < second);
        }
    }
}
