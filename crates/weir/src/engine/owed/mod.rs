//! Settlements owed to the shared store: the refunds and charges of answered requests
//! that it could not take when they were made (down, or no answer in time), kept by
//! this instance and written when it answers again. Without them an outage would
//! under-count exactly the requests whose cost is known last (`cost_from`) and give
//! nothing back to those counted by outcome.
//!
//! - **Bounded**: at most `settlements.max_owed` per instance; past it the oldest is
//!   given up (counted): the newest say most about what the limits should hold when
//!   the store is back, the oldest would mostly have been refilled by then.
//! - **Sent again when the store answers**, oldest first, by a task that runs only
//!   while something is owed and looks every [`LOOK_EVERY`] at the store's readiness
//!   (what its health loop and breaker know): nothing is sent while it is out.
//! - **Never written twice**: each settlement keeps the id it was first sent under, and
//!   the store remembers ids it wrote (`Store::settle_all`), so a try whose answer was
//!   lost after it was written is not written again. A try that may have been written
//!   longer ago than the store remembers is given up instead (counted `stale`).
//! - **In memory**: a crash loses what is owed; a graceful stop sends it once more and
//!   logs what is left ([`Owed::settle_before_exit`]).
//!
//! One queue per instance, kept across reloads: each debt holds the store stack it was
//! made on.

mod debt;

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use weir_core::Clock;

pub(crate) use self::debt::{Debt, Tried, is_outage};
use crate::metrics::{Dropped, Metrics, OwedMetrics};

/// How many settlements an instance keeps owed, unless configured.
pub(crate) const DEFAULT_MAX_OWED: usize = 100_000;

/// How often the task sending owed settlements again looks at the store.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// How often, at most, giving the oldest up past the bound is logged (ns).
const FULL_LOG_EVERY: u64 = 10_000_000_000;

/// This instance's owed settlements.
pub(crate) struct Owed {
    queue: Mutex<Queue>,
    clock: Arc<dyn Clock>,
    metrics: OwedMetrics,
    full_logged: super::Throttle,
}

struct Queue {
    debts: VecDeque<Debt>,
    max: usize,
    /// The task sending them again, while any are owed.
    sender: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Owed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owed")
            .field("owed", &self.queue.lock().debts.len())
            .finish_non_exhaustive()
    }
}

impl Owed {
    /// An empty queue of at most `max`, counting into `metrics`.
    pub(crate) fn new(max: usize, clock: Arc<dyn Clock>, metrics: &Metrics) -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(Queue {
                debts: VecDeque::new(),
                max,
                sender: None,
            }),
            clock,
            metrics: OwedMetrics::new(metrics),
            full_logged: super::Throttle::new(FULL_LOG_EVERY),
        })
    }

    /// Keeps at most `max` from now on (a reload), giving the oldest up past it.
    pub(crate) fn set_max(&self, max: usize) {
        let mut queue = self.queue.lock();
        queue.max = max;
        self.trim(&mut queue);
    }

    /// Keeps `debt` to send again, and starts the task that does (in the current Tokio
    /// runtime) unless it runs.
    pub(crate) fn owe(self: &Arc<Self>, debt: Debt) {
        let mut queue = self.queue.lock();
        queue.debts.push_back(debt);
        self.trim(&mut queue);
        if queue.sender.as_ref().is_none_or(JoinHandle::is_finished)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            queue.sender = Some(runtime.spawn(send_while_owed(Arc::downgrade(self))));
        }
    }

    /// Gives the oldest up past the bound, counted.
    fn trim(&self, queue: &mut Queue) {
        let over = queue.debts.len().saturating_sub(queue.max);
        if over > 0 {
            queue.debts.drain(..over);
            self.metrics.dropped(Dropped::Full, over as u64);
            if self.full_logged.due(self.clock.now()) {
                tracing::warn!(
                    max_owed = queue.max,
                    "more settlements owed to the store than settlements.max_owed: the oldest are given up"
                );
            }
        }
        self.metrics.owed(queue.debts.len());
    }

    /// Takes the oldest debt from position `at` on whose store is not in `out`
    /// (stores found out during this pass), and its position. It still counts as owed
    /// until [`Owed::done`] or [`Owed::put_back`].
    fn next_from(&self, at: usize, out: &[usize]) -> Option<(usize, Debt)> {
        let mut queue = self.queue.lock();
        let at = (at..queue.debts.len()).find(|&i| !out.contains(&queue.debts[i].store_id()))?;
        let debt = queue.debts.remove(at)?;
        Some((at, debt))
    }

    /// Counts a debt taken by [`Owed::next_from`] as no longer owed (written or given
    /// up).
    fn done(&self) {
        self.metrics.owed(self.queue.lock().debts.len());
    }

    /// Puts back a debt taken from position `at` (or as near as the queue, trimmed
    /// meanwhile, allows).
    fn put_back(&self, at: usize, debt: Debt) {
        let mut queue = self.queue.lock();
        let at = at.min(queue.debts.len());
        queue.debts.insert(at, debt);
        self.trim(&mut queue);
    }

    /// Sends what is owed, oldest first, to each store while it is ready: a store
    /// found out (not ready, or failing) keeps its debts in place for the next pass,
    /// and the debts of other stores (a reload that changed the `store` section) go on.
    /// Returns whether nothing is owed any more.
    async fn send_again(&self) -> bool {
        let mut out: Vec<usize> = Vec::new();
        let mut at = 0;
        while let Some((position, debt)) = self.next_from(at, &out) {
            at = position;
            let now = self.clock.now();
            if self.given_up_as_stale(&debt, now) {
                self.done();
                continue;
            }
            if !debt.store_ready() {
                out.push(debt.store_id());
                self.put_back(at, debt);
                at += 1;
                continue;
            }
            match debt.send(now).await {
                Ok(repeated) => {
                    self.metrics.retried(repeated);
                    self.done();
                }
                Err(Some(debt)) => {
                    out.push(debt.store_id());
                    self.put_back(at, debt);
                    at += 1;
                }
                Err(None) => {
                    self.metrics.dropped(Dropped::Refused, 1);
                    self.done();
                }
            }
        }
        self.queue.lock().debts.is_empty()
    }

    /// Whether `debt` may have been written longer ago than its store remembers
    /// settlements: then it is given up (counted, logged) rather than risk writing it
    /// twice.
    fn given_up_as_stale(&self, debt: &Debt, now: u64) -> bool {
        if !debt.is_stale(now) {
            return false;
        }
        self.metrics.dropped(Dropped::Stale, 1);
        tracing::warn!(
            "an owed settlement may have been written longer ago than the store remembers settlements: given up rather than risk writing it twice"
        );
        true
    }

    /// At a graceful stop: sends what is owed once more, oldest first, for at most
    /// `within` and until the store fails one, then gives up what is left, counted and
    /// logged with its count. Returns how many were given up.
    pub(crate) async fn settle_before_exit(&self, within: Duration) -> usize {
        let debts: Vec<Debt> = self.queue.lock().debts.drain(..).collect();
        if debts.is_empty() {
            return 0;
        }
        let deadline = tokio::time::Instant::now() + within;
        let mut left = debts.len();
        for debt in debts {
            let now = self.clock.now();
            if !self.given_up_as_stale(&debt, now) {
                match tokio::time::timeout_at(deadline, debt.send(now)).await {
                    Ok(Ok(repeated)) => self.metrics.retried(repeated),
                    Ok(Err(None)) => self.metrics.dropped(Dropped::Refused, 1),
                    Ok(Err(Some(_))) | Err(_) => break,
                }
            }
            left -= 1;
        }
        self.done();
        if left > 0 {
            self.metrics.dropped(Dropped::Shutdown, left as u64);
            tracing::warn!(
                settlements = left,
                "settlements still owed to the store at shutdown are lost: their refunds and charges are not written"
            );
        } else {
            tracing::info!("every settlement owed to the store was written before shutdown");
        }
        left
    }
}

/// Sends the owed settlements again whenever the store is ready, until none is owed
/// (or the queue is gone).
async fn send_while_owed(owed: Weak<Owed>) {
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        let Some(owed) = owed.upgrade() else { return };
        if owed.send_again().await {
            let mut queue = owed.queue.lock();
            // A debt owed while this pass ran after its last look is sent by this
            // task's next pass; none: the task ends, and the next debt starts another.
            if queue.debts.is_empty() {
                queue.sender = None;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
