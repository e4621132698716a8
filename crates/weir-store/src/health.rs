//! Whether a remote store answers, as its health loop last saw it.
//!
//! A store that can be lost (Redis) runs a loop in the background that probes it: every
//! 100-250 ms (with jitter) while it is lost, reconnecting as it goes, and while it is
//! healthy only when it has been idle (no check answered for 200-400 ms) or a check has
//! just failed. What the loop sees is
//! kept here, where `/readyz` and the [`Breaker`](crate::Breaker) read it: `/readyz`
//! tells the truth with or without traffic, and the breaker closes as soon as the store
//! is back instead of waiting for its next timed probe. The loop also logs the loss
//! (once, warn) and the return (once, info, with the outage's duration).
//!
//! On a Redis Cluster the loop also keeps which hash slots it found lost: those whose
//! primary did not answer while the rest of the cluster did. Checks on them fail at
//! once (see [`StoreError::SlotLost`]); the other slots go on being decided, and the
//! store is up, though not ready (`/readyz` says degraded until every slot is back).

use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::StoreError;

/// How often the loop looks at a healthy store, probing it when no check was answered
/// since its last look. A store lost just after a check answered is probed at most two
/// looks later (the look in between still saw that answer), so an idle instance notices
/// a loss within `2 * IDLE_PROBE` plus the probe's own time (a failed `PING` and a
/// failed reconnect, each within the store's timeout): 400 ms plus twice 50 ms by
/// default, well within the second `/readyz` promises. (At 500 ms the worst case was
/// a whole second, measured at 1.02 s.)
pub(crate) const IDLE_PROBE: Duration = Duration::from_millis(200);

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
    /// The hash slots of a cluster whose primary the last probe found lost (the rest
    /// answering); empty when every slot answered, and on a single server.
    lost_slots: ArcSwap<Vec<RangeInclusive<u16>>>,
    /// When slots were first found lost, for the log.
    slots_lost_at: Mutex<Option<Instant>>,
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
            lost_slots: ArcSwap::from_pointee(Vec::new()),
            slots_lost_at: Mutex::new(None),
        }
    }

    /// Whether the store answered its last probe, all of it or (a cluster missing a
    /// primary) the rest of it.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Whether every part of the store answered its last probe: what `/readyz` reports.
    pub fn is_whole(&self) -> bool {
        self.is_up() && self.lost_slots.load().is_empty()
    }

    /// How many cluster hash slots the last probe found lost, the rest answering.
    pub fn slots_lost(&self) -> u64 {
        self.lost_slots.load().iter().map(|r| r.len() as u64).sum()
    }

    /// The hash slot `slot()` names, if the last probe found its primary lost;
    /// `slot` is not called while no slot is lost.
    pub(crate) fn slot_lost(&self, slot: impl FnOnce() -> u16) -> Option<u16> {
        let lost = self.lost_slots.load();
        if lost.is_empty() {
            return None;
        }
        let slot = slot();
        lost.iter()
            .any(|range| range.contains(&slot))
            .then_some(slot)
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

    /// Asks the loop to probe at once, as when the sentinels announce a new primary.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Records a probe's outcome (the slots it found lost, if the rest answered); logs
    /// when the store, or part of it, is lost or back.
    pub(crate) fn record(&self, probe: &Result<Vec<RangeInclusive<u16>>, StoreError>) {
        match probe {
            Ok(lost) => {
                let newly_lost = self.record_slots(lost);
                if !self.up.swap(true, Ordering::AcqRel) {
                    self.recoveries.fetch_add(1, Ordering::AcqRel);
                    match self.lost_at.lock().take() {
                        Some(lost_at) => tracing::info!(
                            outage = ?lost_at.elapsed(),
                            "store reachable again: limits are shared again"
                        ),
                        None => tracing::info!("connected to the store"),
                    }
                } else if newly_lost {
                    // Checks on those slots may have opened a breaker before the loop
                    // found them; they are refused at once from now on, and the rest
                    // answers: counted as a return, so such a breaker closes at once.
                    self.recoveries.fetch_add(1, Ordering::AcqRel);
                }
            }
            Err(error) => {
                // Lost whole: no part of it is lost apart (and none is back: no log).
                self.lost_slots.store(std::sync::Arc::new(Vec::new()));
                self.slots_lost_at.lock().take();
                let was_up = self.up.swap(false, Ordering::AcqRel);
                let mut lost_at = self.lost_at.lock();
                if was_up || lost_at.is_none() {
                    *lost_at = Some(Instant::now());
                    tracing::warn!(%error, "store unreachable: rules follow their failure policy until it is back");
                }
            }
        }
    }

    /// Keeps the slots a probe found lost; logs when some are lost (warn, again when
    /// more are) and when all are back (info). Returns whether slots not lost before
    /// are now.
    fn record_slots(&self, lost: &[RangeInclusive<u16>]) -> bool {
        let before = self.lost_slots.load_full();
        if before.as_slice() == lost {
            return false;
        }
        self.lost_slots.store(std::sync::Arc::new(lost.to_vec()));
        let more = lost.iter().any(|range| {
            !before
                .iter()
                .any(|b| b.start() <= range.start() && range.end() <= b.end())
        });
        let mut lost_at = self.slots_lost_at.lock();
        if lost.is_empty() {
            if let Some(since) = lost_at.take() {
                tracing::info!(
                    outage = ?since.elapsed(),
                    "every Redis Cluster slot reachable again"
                );
            }
        } else {
            if more {
                let count: usize = lost.iter().map(|r| r.len()).sum();
                tracing::warn!(
                    slots = count,
                    ranges = ?lost,
                    "part of the Redis Cluster unreachable: keys in these slots follow their rules' failure policy, the rest are shared as usual"
                );
            }
            lost_at.get_or_insert_with(Instant::now);
        }
        more
    }

    /// Waits until the next probe is due: for a store lost, whole or in part, 100-250
    /// ms (`jitter` picks where, so that instances do not probe in step); for a healthy
    /// one, until a check fails or none was answered for [`IDLE_PROBE`].
    pub(crate) async fn next_probe(&self, jitter: u64) {
        if self.is_whole() {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// How long the loop waits before its next probe of a healthy store, on tokio's
    /// paused clock (which moves only when every task waits).
    async fn wait_for_probe(health: &StoreHealth) -> Duration {
        let start = Instant::now();
        health.next_probe(0).await;
        start.elapsed()
    }

    #[test]
    fn slots_found_lost_are_kept_until_a_probe_finds_them_back_or_the_store_lost_whole() {
        let health = StoreHealth::new(true);
        let recoveries = health.recoveries();
        health.record(&Ok(vec![0..=99, 200..=299]));
        assert!(health.is_up() && !health.is_whole());
        assert_eq!(health.slots_lost(), 200);
        let lost = |slot: u16| health.slot_lost(|| slot).is_some();
        assert!(lost(0) && lost(250) && !lost(150));
        // Newly lost slots count as a return: a breaker their timeouts opened closes.
        assert_eq!(health.recoveries(), recoveries + 1);
        // The same finding again changes nothing; fewer lost is no return.
        health.record(&Ok(vec![0..=99, 200..=299]));
        health.record(&Ok(vec![0..=99]));
        assert_eq!(health.recoveries(), recoveries + 1);
        assert!(!lost(250));
        // Lost whole: no slot is lost apart.
        health.record(&Err(StoreError::Unavailable("gone".into())));
        assert!(!health.is_up() && health.slots_lost() == 0 && !lost(0));
        health.record(&Ok(Vec::new()));
        assert!(health.is_whole());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_store_is_probed_within_two_looks_of_its_last_answer() {
        let health = StoreHealth::new(true);
        // Nothing answered: probed at the next look.
        assert_eq!(wait_for_probe(&health).await, IDLE_PROBE);
        // A check answered just before the store is lost: the first look sees it, the
        // second probes.
        health.answered();
        let waited = wait_for_probe(&health).await;
        assert_eq!(waited, 2 * IDLE_PROBE);
        // With the probe's failed PING and reconnect (the default 50 ms timeout each),
        // `/readyz` answers 503 well within a second.
        assert!(waited + 2 * Duration::from_millis(50) <= Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_store_is_probed_only_when_a_check_fails() {
        let health = Arc::new(StoreHealth::new(true));
        let traffic = {
            let health = Arc::clone(&health);
            tokio::spawn(async move {
                for _ in 0..100 {
                    health.answered();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                health.failed();
            })
        };
        // 100 checks 20 ms apart answered, then one fails: the probe comes then, not
        // at a look.
        assert_eq!(wait_for_probe(&health).await, Duration::from_millis(2000));
        traffic.await.unwrap();
    }
}
