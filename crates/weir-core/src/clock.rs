//! Where "now" comes from.
//!
//! Algorithms take `now` as an argument; stores ask a [`Clock`] once per check. Time is
//! integer nanoseconds since the Unix epoch, so that fixed windows line up with calendar
//! minutes, but a production clock must be monotonic (anchored to the wall clock once,
//! then advanced by a monotonic timer), so that a wall-clock step never grants anything.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A source of the current time, in nanoseconds since the Unix epoch.
///
/// Implementations must never go backwards; the algorithms tolerate it anyway (time that
/// runs backwards is treated as "no time has passed"), but a monotonic clock keeps
/// decisions exact.
pub trait Clock: Send + Sync + 'static {
    /// The current time in nanoseconds since the Unix epoch.
    fn now(&self) -> u64;

    /// The wall clock's time in whole seconds since the Unix epoch, for comparing with
    /// times other systems wrote (a token's `exp`): unlike [`Clock::now`], it follows
    /// the wall clock when it is set (NTP after boot). By default, `now` in seconds,
    /// which is what a clock that only moves when told to should answer.
    fn wall_secs(&self) -> u64 {
        self.now() / 1_000_000_000
    }
}

/// A clock that only moves when told to: for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock that reads `start` nanoseconds since the Unix epoch.
    pub fn new(start: u64) -> Self {
        Self {
            nanos: AtomicU64::new(start),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the clock to `nanos` (backwards too, to test clock steps).
    pub fn set(&self, nanos: u64) {
        self.nanos.store(nanos, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst)
    }
}
