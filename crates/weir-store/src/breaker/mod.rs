//! A circuit breaker in front of a store that can fail (Redis).
//!
//! After `threshold` failures in a row that say the store is unreachable or too slow,
//! the breaker opens: checks fail at once, costing microseconds instead of a timeout
//! each. After a pause one check is let through as a probe; if it succeeds the breaker
//! closes, else it opens again for a longer pause (doubling per failed probe, up to a
//! maximum, with up to a quarter more at random so that instances do not probe in
//! step). Errors that are not about availability (a bug, a refused policy) pass through
//! without counting.
//!
//! A call counts only for the state it was admitted in: when many checks are in flight
//! as the store goes away, their failures open the breaker once, and the ones that come
//! back after it opened count for nothing; only a failed probe lengthens the pause.
//!
//! A breaker that follows a [`StoreHealth`] (the store's own health loop) also opens as
//! soon as the loop finds the store lost, and closes as soon as the loop finds it back,
//! without waiting for its timed probe.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use weir_core::Clock;

use crate::jitter::Jitter;
use crate::{Layer, Store, StoreError, StoreFuture, StoreHealth, SystemClock, Wraps};

/// When the breaker opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Failures in a row that open the breaker.
    pub threshold: u32,
    /// The pause before the first probe; doubled by each failed probe.
    pub pause: Duration,
    /// The longest pause (before jitter).
    pub max_pause: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            threshold: 3,
            pause: Duration::from_millis(200),
            max_pause: Duration::from_secs(5),
        }
    }
}

/// A store behind a circuit breaker.
pub struct Breaker<S> {
    inner: S,
    config: BreakerConfig,
    clock: Arc<dyn Clock>,
    health: Option<Arc<StoreHealth>>,
    jitter: Jitter,
    /// Clock time (ns) until which the breaker refuses; 0 when closed.
    open_until: AtomicU64,
    /// Moves at every opening, reopening and closing: a call's outcome counts only for
    /// the state it was admitted in.
    generation: AtomicU64,
    /// Failures in a row while closed (written on success only when not 0).
    failures: AtomicU32,
    /// The health's recovery count when the breaker opened.
    recoveries_at_opening: AtomicU64,
    open: Mutex<Opening>,
}

/// What an opening remembers (changed under the lock).
#[derive(Debug, Default)]
struct Opening {
    /// Probes that failed since the breaker opened.
    failed_probes: u32,
    /// Whether a probe is in flight.
    probing: bool,
    /// Clock time (ns) of the opening, for the log.
    since: u64,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Breaker<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("inner", &self.inner)
            .field("open", &(self.open_until.load(Ordering::Relaxed) != 0))
            .finish_non_exhaustive()
    }
}

/// What the breaker lets a call do, and in which state (generation) it was let.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Pass(u64),
    Probe(u64),
    Refuse,
}

/// A probe in flight: released if its call is dropped before it finishes (a client
/// that hung up), so that the breaker does not wait forever for its outcome.
struct InFlight<'b, S> {
    breaker: &'b Breaker<S>,
    admission: Admission,
}

impl<S> Drop for InFlight<'_, S> {
    fn drop(&mut self) {
        if let Admission::Probe(generation) = self.admission {
            let mut open = self.breaker.open.lock();
            if self.breaker.generation.load(Ordering::Acquire) == generation {
                open.probing = false;
            }
        }
    }
}

impl<S: Store> Breaker<S> {
    /// `inner` behind a breaker, on the system clock.
    pub fn new(inner: S, config: BreakerConfig) -> Self {
        Self::with_clock(inner, config, Arc::new(SystemClock::new()))
    }

    /// `inner` behind a breaker whose pauses are measured on `clock` (tests use a
    /// `ManualClock`).
    pub fn with_clock(inner: S, config: BreakerConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            config,
            clock,
            health: None,
            jitter: Jitter::new(),
            open_until: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            failures: AtomicU32::new(0),
            recoveries_at_opening: AtomicU64::new(0),
            open: Mutex::new(Opening::default()),
        }
    }

    /// Follows the store's health loop: opens when it finds the store lost, closes when
    /// it finds it back, and is ready only while it finds the store up.
    pub fn following(mut self, health: Arc<StoreHealth>) -> Self {
        self.health = Some(health);
        self
    }

    /// Draws the jitter of its pauses from `seed` rather than at random: a simulation
    /// on a virtual clock replays the same pauses from the same seed.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::seeded(seed);
        self
    }

    /// Whether the breaker is closed (the store is being used).
    pub fn is_closed(&self) -> bool {
        self.open_until.load(Ordering::Acquire) == 0
    }

    fn now(&self) -> u64 {
        self.clock.now().max(1)
    }

    /// Whether the health loop found the store back since the breaker opened.
    fn recovered(&self) -> bool {
        self.health.as_ref().is_some_and(|health| {
            health.recoveries() > self.recoveries_at_opening.load(Ordering::Acquire)
        })
    }

    fn admit(&self) -> Admission {
        let generation = self.generation.load(Ordering::Acquire);
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            if self.health.as_ref().is_some_and(|h| !h.is_up()) {
                self.trip(generation);
                return Admission::Refuse;
            }
            return Admission::Pass(generation);
        }
        if self.recovered() {
            self.close();
            return Admission::Pass(self.generation.load(Ordering::Acquire));
        }
        if self.now() < until {
            return Admission::Refuse;
        }
        let mut open = self.open.lock();
        if open.probing || self.generation.load(Ordering::Acquire) != generation {
            return Admission::Refuse;
        }
        open.probing = true;
        Admission::Probe(generation)
    }

    /// The pause after `failed_probes` failed probes, jitter included. While the
    /// health loop finds the store up (it answers, only too slowly for a rule's
    /// `store_timeout`), the pause does not grow: a probe every base pause finds the
    /// end of the slowness within a fraction of a second, at the cost of one check.
    fn pause(&self, failed_probes: u32) -> Duration {
        let slow_not_lost = self.health.as_ref().is_some_and(|h| h.is_up());
        let failed_probes = if slow_not_lost { 0 } else { failed_probes };
        let pause = self
            .config
            .pause
            .saturating_mul(1 << failed_probes.min(16))
            .min(self.config.max_pause);
        // Up to a quarter more, so that many instances do not probe at once.
        pause + pause.mul_f64((self.jitter.next() % 1001) as f64 / 4000.0)
    }

    /// Opens (or reopens) for the pause after `open.failed_probes` failed probes.
    fn open_for(&self, open: &mut Opening) {
        let pause = self.pause(open.failed_probes);
        let now = self.now();
        open.probing = false;
        self.failures.store(0, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.open_until.store(
            now.saturating_add(u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX)),
            Ordering::Release,
        );
        tracing::debug!(?pause, failed_probes = open.failed_probes, "circuit open");
    }

    /// Opens a closed breaker, if it is still in state `generation`.
    fn trip(&self, generation: u64) {
        let mut open = self.open.lock();
        if self.generation.load(Ordering::Acquire) != generation || !self.is_closed() {
            return;
        }
        let recoveries = self.health.as_ref().map_or(0, |h| h.recoveries());
        self.recoveries_at_opening
            .store(recoveries, Ordering::Release);
        open.failed_probes = 0;
        open.since = self.now();
        self.open_for(&mut open);
    }

    fn close(&self) {
        let mut open = self.open.lock();
        if self.is_closed() {
            return;
        }
        self.failures.store(0, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.open_until.store(0, Ordering::Release);
        let outage = Duration::from_nanos(self.now().saturating_sub(open.since));
        *open = Opening::default();
        tracing::debug!(?outage, "circuit closed");
    }

    fn record<T>(&self, result: &Result<T, StoreError>, admission: Admission) {
        match (result, admission) {
            // Part of a cluster the health loop found lost: refused before it was
            // tried, so nothing learned of the rest (a probe's release is left to
            // `InFlight`).
            (Err(StoreError::SlotLost(_)), _) => {}
            (Ok(_), _) => {
                if !self.is_closed() {
                    self.close();
                } else if self.failures.load(Ordering::Relaxed) != 0 {
                    self.failures.store(0, Ordering::Relaxed);
                }
            }
            (Err(error), Admission::Probe(generation)) if error.is_unavailable() => {
                let mut open = self.open.lock();
                if self.generation.load(Ordering::Acquire) == generation {
                    open.failed_probes = open.failed_probes.saturating_add(1);
                    self.open_for(&mut open);
                }
            }
            // Failures of calls admitted before the breaker last moved belong to an
            // opening already counted.
            (Err(error), Admission::Pass(generation))
                if error.is_unavailable()
                    && self.generation.load(Ordering::Acquire) == generation
                    && self.failures.fetch_add(1, Ordering::AcqRel) + 1
                        >= self.config.threshold =>
            {
                self.trip(generation);
            }
            // Not about availability, or refused: nothing learned; a probe's release
            // is left to `InFlight`.
            _ => {}
        }
    }

    async fn guarded<T>(&self, call: StoreFuture<'_, T>) -> Result<T, StoreError> {
        let admission = self.admit();
        if admission == Admission::Refuse {
            return Err(StoreError::Unavailable("circuit open".into()));
        }
        let in_flight = InFlight {
            breaker: self,
            admission,
        };
        let result = call.await;
        self.record(&result, admission);
        drop(in_flight);
        result
    }
}

/// Every call guarded: refused at once while open, its outcome counted. A
/// [`Store::decide`] given up after its timeout counts as a failure here too, so a slow
/// store opens the circuit whichever timeout caught it.
impl<S: Store> Wraps for Breaker<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn around<'a, T: Send + 'a>(&'a self, call: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        Box::pin(self.guarded(call))
    }
}

impl<S: Store> Layer for Breaker<S> {
    /// Closed (or found back by the health loop since it opened), the health loop
    /// finding the store up, and the store itself ready.
    fn ready(&self) -> bool {
        (self.is_closed() || self.recovered())
            && self.health.as_ref().is_none_or(|h| h.is_up())
            && self.inner.is_ready()
    }
}

#[cfg(test)]
mod tests;
