//! Whether a remote store answers, as its health loop last saw it.
//!
//! A store that can be lost (Redis) runs a loop in the background that probes it: every
//! 100-250 ms (with jitter) while it is lost, reconnecting as it goes, and while it is
//! healthy only when it has been idle or a check has just failed. What the loop sees is
//! kept here, where `/readyz` and the [`Breaker`](crate::Breaker) read it: `/readyz`
//! tells the truth with or without traffic, and the breaker closes as soon as the store
//! is back instead of waiting for its next timed probe. The loop also logs the loss
//! (once, warn) and the return (once, info, with the outage's duration).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::StoreError;

/// How often a healthy store is probed when no check has been answered since the last
/// look: a lost store is noticed within this plus the store's timeout, traffic or not.
pub(crate) const IDLE_PROBE: Duration = Duration::from_millis(500);

/// The shortest and longest wait between probes of a lost store.
const LOST_PROBE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_millis(250));

/// A store's reachability, shared by its health loop, its breaker and `/readyz`.
#[derive(Debug)]
pub struct StoreHealth {
    up: AtomicBool,
    /// How many times the store came (back) up: a breaker opened before the last
    /// return closes.
    recoveries: AtomicU64,
    /// Whether a check was answered since the loop last looked (so no probe is needed).
    answered: AtomicBool,
    /// Wakes the loop when a check fails for want of the store.
    wake: Notify,
    /// When the store was lost (`None` before the first connection), for the log.
    lost_at: Mutex<Option<Instant>>,
}

impl StoreHealth {
    /// A store reported up (connected) or down (not connected yet).
    pub(crate) fn new(up: bool) -> Self {
        Self {
            up: AtomicBool::new(up),
            recoveries: AtomicU64::new(u64::from(up)),
            answered: AtomicBool::new(false),
            wake: Notify::new(),
            lost_at: Mutex::new(None),
        }
    }

    /// Whether the store answered its last probe: what `/readyz` reports.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// How many times the store came up, the first connection included. A breaker
    /// compares it with the count when it opened: a larger count means the store
    /// answered since.
    pub fn recoveries(&self) -> u64 {
        self.recoveries.load(Ordering::Acquire)
    }

    /// Notes that a check was answered. Writes at most once per look of the loop, so
    /// the request path costs one shared read.
    pub(crate) fn answered(&self) {
        if !self.answered.load(Ordering::Relaxed) {
            self.answered.store(true, Ordering::Relaxed);
        }
    }

    /// Notes that a check failed for want of the store: the loop probes at once.
    pub(crate) fn failed(&self) {
        self.wake.notify_one();
    }

    /// Records a probe's outcome; logs when the store is lost or back.
    pub(crate) fn record(&self, probe: &Result<(), StoreError>) {
        match probe {
            Ok(()) => {
                if !self.up.swap(true, Ordering::AcqRel) {
                    self.recoveries.fetch_add(1, Ordering::AcqRel);
                    match self.lost_at.lock().take() {
                        Some(lost_at) => tracing::info!(
                            outage = ?lost_at.elapsed(),
                            "store reachable again: limits are shared again"
                        ),
                        None => tracing::info!("connected to the store"),
                    }
                }
            }
            Err(error) => {
                let was_up = self.up.swap(false, Ordering::AcqRel);
                let mut lost_at = self.lost_at.lock();
                if was_up || lost_at.is_none() {
                    *lost_at = Some(Instant::now());
                    tracing::warn!(%error, "store unreachable: rules follow their failure policy until it is back");
                }
            }
        }
    }

    /// Waits until the next probe is due: for a lost store, 100-250 ms (`jitter` picks
    /// where, so that instances do not probe in step); for a healthy one, until a check
    /// fails or none was answered for [`IDLE_PROBE`].
    pub(crate) async fn next_probe(&self, jitter: u64) {
        if self.is_up() {
            loop {
                tokio::select! {
                    () = self.wake.notified() => return,
                    () = tokio::time::sleep(IDLE_PROBE) => {
                        if !self.answered.swap(false, Ordering::Relaxed) {
                            return;
                        }
                    }
                }
            }
        }
        let (least, most) = LOST_PROBE;
        let spread = u64::try_from((most - least).as_millis()).unwrap_or(0) + 1;
        tokio::time::sleep(least + Duration::from_millis(jitter % spread)).await;
    }
}
