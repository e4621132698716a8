//! Time, handed in: the client reads the clock and sleeps only through a [`Clock`], so
//! its tests move a [`ManualClock`] instead of sleeping, as weir's own tests do.

use std::future::{Future, ready};
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

/// A sleep handed out by a [`Clock`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where the client reads time and how it waits.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic time since an origin fixed for the clock's life: windows, pacing.
    fn now(&self) -> Duration;
    /// The wall clock: only to read a `Retry-After` given as an HTTP date.
    fn wall(&self) -> SystemTime;
    /// Completes after `duration`.
    fn sleep(&self, duration: Duration) -> Sleep;
}

/// The real clock: Tokio's monotonic time and timer, the system's wall clock. Needs a
/// Tokio runtime with the timer enabled, as reqwest and hyper do.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A clock that moves only when told, or when the client sleeps on it: a sleep moves
/// it forward by the sleep's length at once and is recorded. For tests.
#[derive(Debug)]
pub struct ManualClock {
    state: Mutex<Manual>,
}

#[derive(Debug)]
struct Manual {
    now: Duration,
    wall: SystemTime,
    slept: Vec<Duration>,
}

impl ManualClock {
    /// A clock at monotonic time zero whose wall clock reads `wall`.
    pub fn new(wall: SystemTime) -> Self {
        Self {
            state: Mutex::new(Manual {
                now: Duration::ZERO,
                wall,
                slept: Vec::new(),
            }),
        }
    }

    /// Moves both clocks forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut state = self.state.lock();
        state.now = state.now.saturating_add(by);
        state.wall = state.wall.checked_add(by).unwrap_or(state.wall);
    }

    /// The sleeps the client took, in order (zero-length waits are not slept).
    pub fn slept(&self) -> Vec<Duration> {
        self.state.lock().slept.clone()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.state.lock().now
    }

    fn wall(&self) -> SystemTime {
        self.state.lock().wall
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        self.advance(duration);
        self.state.lock().slept.push(duration);
        Box::pin(ready(()))
    }
}
