//! The production clock: monotonic, anchored to the Unix epoch once.

use std::time::{SystemTime, UNIX_EPOCH};

use weir_core::Clock;

/// Nanoseconds since the Unix epoch, read from a monotonic timer.
///
/// The wall clock is read once, at construction; from then on time advances with a
/// monotonic counter (`quanta`: the CPU's invariant TSC where it has one, else the OS's
/// monotonic clock), so a wall-clock step (NTP, a manual change) never moves it,
/// backwards or forwards. Reading it costs a few nanoseconds, which matters on a path
/// that every request takes. Fixed windows stay aligned to calendar minutes to within
/// the drift since start.
#[derive(Debug, Clone)]
pub struct SystemClock {
    epoch_nanos_at_start: u64,
    timer: quanta::Clock,
    start: u64,
}

impl SystemClock {
    /// A clock anchored to the wall clock now.
    pub fn new() -> Self {
        let timer = quanta::Clock::new();
        let start = timer.raw();
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            epoch_nanos_at_start: u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX),
            timer,
            start,
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        let elapsed = self.timer.delta_as_nanos(self.start, self.timer.raw());
        self.epoch_nanos_at_start.saturating_add(elapsed)
    }

    /// Read from the wall clock each time: a token's expiry is another system's wall
    /// time, and a process started before the clock was set must not judge tokens by
    /// its start-up time for ever.
    fn wall_secs(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_the_wall_clock_and_never_goes_back() {
        let clock = SystemClock::new();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let first = clock.now();
        assert!(first.abs_diff(wall) < 1_000_000_000, "{first} vs {wall}");
        let mut last = first;
        for _ in 0..10_000 {
            let now = clock.now();
            assert!(now >= last);
            last = now;
        }
    }
}
