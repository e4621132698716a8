//! A circuit breaker in front of a store that can fail (Redis).
//!
//! After `threshold` failures in a row that say the store is unreachable or too slow,
//! the breaker opens: checks fail at once, costing microseconds instead of a timeout
//! each. After a pause (growing with each opening, with jitter, up to a maximum) one
//! check is let through as a probe; if it succeeds the breaker closes, else it opens
//! again. Errors that are not about availability (a bug, a refused policy) pass through
//! without counting.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weir_core::{Decision, Policy};

use crate::{Check, Key, Store, StoreError, StoreFuture};

/// When the breaker opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Failures in a row that open the breaker.
    pub threshold: u32,
    /// The first pause before a probe; doubled at each opening in a row.
    pub pause: Duration,
    /// The longest pause.
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
    epoch: Instant,
    /// Nanoseconds since `epoch` until which the breaker is open; 0 when closed.
    open_until: AtomicU64,
    failures: AtomicU32,
    openings: AtomicU32,
    probing: AtomicBool,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Breaker<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("inner", &self.inner)
            .field("open", &(self.open_until.load(Ordering::Relaxed) != 0))
            .finish_non_exhaustive()
    }
}

/// What the breaker lets a call do.
enum Admission {
    Pass,
    Probe,
    Refuse,
}

impl<S: Store> Breaker<S> {
    /// `inner` behind a breaker.
    pub fn new(inner: S, config: BreakerConfig) -> Self {
        Self {
            inner,
            config,
            epoch: Instant::now(),
            open_until: AtomicU64::new(0),
            failures: AtomicU32::new(0),
            openings: AtomicU32::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Whether the breaker is closed (the store is being used).
    pub fn is_closed(&self) -> bool {
        self.open_until.load(Ordering::Acquire) == 0
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn admit(&self) -> Admission {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            Admission::Pass
        } else if self.now() < until || self.probing.swap(true, Ordering::AcqRel) {
            Admission::Refuse
        } else {
            Admission::Probe
        }
    }

    fn record<T>(&self, result: &Result<T, StoreError>, probe: bool) {
        match result {
            Err(error) if error.is_unavailable() => {
                let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
                if probe || failures >= self.config.threshold {
                    let openings = self.openings.fetch_add(1, Ordering::AcqRel);
                    let pause = self
                        .config
                        .pause
                        .saturating_mul(1 << openings.min(16))
                        .min(self.config.max_pause);
                    // Up to a quarter more, so that many instances do not probe at once.
                    let jitter = pause.mul_f64(f64::from(self.now() as u32 % 1000) / 4000.0);
                    let until = self.now().saturating_add(
                        u64::try_from((pause + jitter).as_nanos()).unwrap_or(u64::MAX),
                    );
                    if self.open_until.swap(until, Ordering::AcqRel) == 0 {
                        tracing::warn!(%error, ?pause, "store unavailable: circuit open, using each rule's failure policy");
                    }
                    self.probing.store(false, Ordering::Release);
                }
            }
            Err(_) => {
                if probe {
                    self.probing.store(false, Ordering::Release);
                }
            }
            Ok(_) => {
                self.failures.store(0, Ordering::Release);
                if self.open_until.swap(0, Ordering::AcqRel) != 0 {
                    tracing::info!("store available again: circuit closed");
                }
                self.openings.store(0, Ordering::Release);
                self.probing.store(false, Ordering::Release);
            }
        }
    }

    async fn guarded<T>(&self, call: StoreFuture<'_, T>) -> Result<T, StoreError> {
        let probe = match self.admit() {
            Admission::Refuse => return Err(StoreError::Unavailable("circuit open".into())),
            Admission::Probe => true,
            Admission::Pass => false,
        };
        let result = call.await;
        self.record(&result, probe);
        result
    }
}

impl<S: Store> Store for Breaker<S> {
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        Box::pin(self.guarded(self.inner.check(key, policy, cost)))
    }

    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.guarded(self.inner.check_all(checks)))
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.guarded(self.inner.preview_all(checks)))
    }

    fn decide_within<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        timeout: std::time::Duration,
    ) -> StoreFuture<'a, Vec<Decision>> {
        // The shorter wait counts as a failure here too, so a slow store opens the
        // circuit whichever timeout caught it.
        Box::pin(self.guarded(self.inner.decide_within(checks, preview, timeout)))
    }

    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(self.guarded(self.inner.refund_all(checks)))
    }

    fn reset<'a>(&'a self, key: Key<'a>) -> StoreFuture<'a, ()> {
        Box::pin(self.guarded(self.inner.reset(key)))
    }

    fn is_ready(&self) -> bool {
        self.is_closed() && self.inner.is_ready()
    }
}
