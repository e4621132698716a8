//! What the simulated stores tell the run loop about the request in flight: the
//! latency its store calls added (drawn per call from a hash of the seed, the request's
//! number and the call's, so that it does not depend on the order of calls elsewhere;
//! background work adds none), and whether a store call below its engine failed (then
//! the engine decided on its failure policy).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use weir_store::{Layer, Store, StoreFuture, Wraps};

use super::scenario::Latency;
use super::traffic::mix;

/// What the stores tell the run loop about the request in flight.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    seed: u64,
    /// Whether a request is waiting (else the calls are background work).
    on_path: AtomicBool,
    request: AtomicU64,
    calls: AtomicU64,
    latency: AtomicU64,
    failed: AtomicBool,
}

impl Recorder {
    /// A recorder drawing latencies from `seed`.
    pub(super) fn new(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    /// Request number `request` starts: the calls from now on are its.
    pub(super) fn begin(&self, request: u64) {
        self.request.store(request, Ordering::Relaxed);
        self.calls.store(0, Ordering::Relaxed);
        self.latency.store(0, Ordering::Relaxed);
        self.failed.store(false, Ordering::Relaxed);
        self.on_path.store(true, Ordering::Relaxed);
    }

    /// The request is decided: the latency its calls added (ns), and whether a call
    /// below the engine failed (then it decided on its failure policy).
    pub(super) fn end(&self) -> (u64, bool) {
        self.on_path.store(false, Ordering::Relaxed);
        (
            self.latency.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }

    /// A call's latency (ns) under `model`, or none for background work.
    pub(super) fn call(&self, model: &Latency) -> Option<u64> {
        if !self.on_path.load(Ordering::Relaxed) {
            return None;
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let request = self.request.load(Ordering::Relaxed);
        let hash = mix(self.seed ^ mix(request ^ mix(call.wrapping_add(0x5151))));
        let unit = |h: u64| (h >> 11) as f64 / (1u64 << 53) as f64;
        let (a, b, c) = (unit(hash), unit(mix(hash)), unit(mix(mix(hash))));
        let mut ns = model.base as f64 + model.spread as f64 * a;
        if b < model.tail {
            ns += -(1.0 - c).ln() * model.tail_mean as f64;
        }
        Some(ns as u64)
    }

    pub(super) fn add(&self, latency: u64) {
        self.latency.fetch_add(latency, Ordering::Relaxed);
    }

    fn failed(&self) {
        if self.on_path.load(Ordering::Relaxed) {
            self.failed.store(true, Ordering::Relaxed);
        }
    }
}

/// A gateway's store stack, watched: any error it returns is the request's (the
/// engine then decides on its failure policy).
pub(super) struct Watched<S> {
    inner: S,
    recorder: Arc<Recorder>,
}

impl<S: Sync> Watched<S> {
    /// `inner`, its errors told to `recorder`.
    pub(super) fn new(inner: S, recorder: Arc<Recorder>) -> Self {
        Self { inner, recorder }
    }
}

/// Every call watched: an error is told to the recorder.
impl<S: Store> Wraps for Watched<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn around<'a, T: Send + 'a>(&'a self, call: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        Box::pin(async move {
            let result = call.await;
            if result.is_err() {
                self.recorder.failed();
            }
            result
        })
    }
}

impl<S: Store> Layer for Watched<S> {}
