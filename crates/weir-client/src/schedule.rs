//! The backoff schedule of one request: backon's capped exponential steps (base,
//! doubling, cap, at most `max_retries` of them), each drawn with full jitter (a wait
//! uniform in `[0, step)`, AWS's "full jitter") from the client's own randomness.
//! backon's own jitter adds `[0, step)` to the step, which keeps clients that failed
//! together in step; and its generator could not be handed in for tests.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The steps of one request's retries.
#[derive(Debug)]
pub(crate) struct Steps {
    steps: ExponentialBackoff,
}

impl Steps {
    /// Steps from `base`, doubling up to `cap`, `max_retries` of them.
    pub(crate) fn new(base: Duration, cap: Duration, max_retries: usize) -> Self {
        let steps = ExponentialBuilder::new()
            .with_min_delay(base)
            .with_max_delay(cap)
            .with_factor(2.0)
            .with_max_times(max_retries)
            .build();
        Self { steps }
    }

    /// The next step (the bound of its jitter), or `None` when the retries are spent.
    pub(crate) fn next_step(&mut self) -> Option<Duration> {
        self.steps.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn steps_double_up_to_the_cap_and_stop_after_max_retries() {
        let mut steps = Steps::new(MS(100), MS(1000), 6);
        // backon multiplies in f32: to the microsecond.
        let all: Vec<u128> = std::iter::from_fn(|| steps.next_step())
            .map(|step| step.as_micros())
            .collect();
        assert_eq!(
            all,
            [100_000, 200_000, 400_000, 800_000, 1_000_000, 1_000_000]
        );
        let mut none = Steps::new(MS(100), MS(1000), 0);
        assert_eq!(none.next_step(), None);
    }
}
