//! The production clock: monotonic, anchored to the Unix epoch once.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use weir_core::Clock;

/// Nanoseconds since the Unix epoch, read from a monotonic timer.
///
/// The wall clock is read once, at construction; from then on time advances with
/// [`Instant`], so a wall-clock step (NTP, a manual change) never moves it, backwards or
/// forwards. Fixed windows stay aligned to calendar minutes to within the drift since
/// start.
#[derive(Debug, Clone)]
pub struct SystemClock {
    epoch_nanos_at_start: u64,
    start: Instant,
}

impl SystemClock {
    /// A clock anchored to the wall clock now.
    pub fn new() -> Self {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            epoch_nanos_at_start: u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX),
            start: Instant::now(),
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
        let elapsed = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.epoch_nanos_at_start.saturating_add(elapsed)
    }
}
