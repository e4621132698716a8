//! Slots of requests in flight (`algorithm: concurrency`): taken at the decision,
//! before the rate rules' step (a request the rate rules deny gives its slots back),
//! and held by the request as [`HeldSlots`] until it ends: its answer's body sent, the
//! client gone, the upstream failed, or (`/v1/decide`) its settlement settled or
//! expired. Released when dropped, so every way a request can end releases exactly
//! once.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use weir_core::Decision;
use weir_store::{Key, SlotStore, SlotTake, SlotsFree, StoreError};

use super::Engine;
use super::applied::Applied;
use super::settlement::StoreUsed;
use crate::metrics::Outcome;

/// The wait a denial by a `concurrency` rule suggests (`Retry-After: 1`): a slot
/// frees when any request of the key ends, a time nothing tells in advance.
pub(super) const IN_FLIGHT_RETRY: Duration = Duration::from_secs(1);

/// The slots a request holds; released when dropped.
pub(crate) struct HeldSlots {
    store: Arc<dyn SlotStore>,
    /// Each slot's rule name and identity.
    keys: Vec<(String, String)>,
    id: u64,
    /// Each slot's rule's gauge of slots held (`weir_slots_held`), one added each.
    held: Vec<prometheus_client::metrics::gauge::Gauge>,
}

impl std::fmt::Debug for HeldSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldSlots")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl Drop for HeldSlots {
    fn drop(&mut self) {
        for gauge in &self.held {
            gauge.dec();
        }
        let store = Arc::clone(&self.store);
        let keys = std::mem::take(&mut self.keys);
        let id = self.id;
        let mut release = Box::pin(async move {
            let keys: Vec<Key<'_>> = keys
                .iter()
                .map(|(rule, identity)| Key { rule, identity })
                .collect();
            if let Err(error) = store.release_slots(&keys, id).await {
                tracing::warn!(%error, "could not release the slots of a request that ended; they expire with their lease");
            }
        });
        // Released at once by a store that answers at once (memory): the next request
        // finds the slot free. Else in a task of its own.
        let mut cx = Context::from_waker(Waker::noop());
        if release.as_mut().poll(&mut cx) == Poll::Ready(()) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(release);
            }
            Err(_) => {
                tracing::warn!(
                    "the slots of a request that ended could not be released outside a runtime; they expire with their lease"
                );
            }
        }
    }
}

/// What taking the slots of a request's `concurrency` rules found.
pub(super) struct Taken {
    /// Which store decided.
    pub(super) used: StoreUsed,
    /// Each rule's decision, as its RateLimit fields report it.
    pub(super) decisions: Vec<Decision>,
    /// The slots, when every rule had one free.
    pub(super) held: Option<HeldSlots>,
}

impl Engine {
    /// Takes a slot under each of `slotted` (the request's `concurrency` rules), all or
    /// nothing, within `timeout`; when the shared store cannot, the rules' failure
    /// policy: this instance's share of the slots on its local fallback, or why not.
    pub(super) async fn take_slots(
        &self,
        slotted: &[Applied<'_>],
        timeout: Option<Duration>,
    ) -> Result<Taken, Outcome> {
        let id = self.settlement_ids.next().0 as u64;
        let takes = |fallback: bool| -> Vec<SlotTake<'_>> {
            slotted
                .iter()
                .map(|a| SlotTake {
                    key: Key {
                        rule: &a.rule.name,
                        identity: &a.identity,
                    },
                    limit: match fallback {
                        false => a.policy.limit(),
                        true => a.rule.fallback_policy(&a.policy).limit(),
                    },
                })
                .collect()
        };
        let shared = takes(false);
        let call = self.slots.take_slots(&shared, id, self.slot_lease);
        let taken = match timeout {
            Some(within) => tokio::time::timeout(within, call)
                .await
                .unwrap_or(Err(StoreError::Timeout(within))),
            None => call.await,
        };
        let (used, store, takes, free) = match taken {
            Ok(free) => (StoreUsed::Shared, &self.slots, shared, free),
            Err(error) => {
                self.fail_over(slotted, &error)?;
                let Some(fallback) = &self.fallback_slots else {
                    return Err(Outcome::Unavailable);
                };
                let local = takes(true);
                match fallback.take_slots(&local, id, self.slot_lease).await {
                    Ok(free) => (StoreUsed::Fallback, fallback, local, free),
                    Err(error) => {
                        tracing::warn!(%error, "the local fallback store could not take a slot");
                        return Err(Outcome::Unavailable);
                    }
                }
            }
        };
        let allowed = free.first().is_some_and(|f| f.allowed);
        let decisions = takes
            .iter()
            .zip(&free)
            .map(|(take, free)| decision(take.limit, *free))
            .collect();
        let held = allowed.then(|| HeldSlots {
            store: Arc::clone(store),
            keys: takes
                .iter()
                .map(|t| (t.key.rule.to_owned(), t.key.identity.to_owned()))
                .collect(),
            id,
            held: takes
                .iter()
                .map(|t| {
                    let gauge = self.metrics.slots_held(t.key.rule);
                    gauge.inc();
                    gauge
                })
                .collect(),
        });
        Ok(Taken {
            used,
            decisions,
            held,
        })
    }
}

/// A take's finding as a rule's decision: `remaining` the slots free; a denial
/// retried after [`IN_FLIGHT_RETRY`].
fn decision(limit: u64, free: SlotsFree) -> Decision {
    let wait = (!free.allowed).then_some(IN_FLIGHT_RETRY);
    Decision {
        allowed: free.allowed,
        limit,
        remaining: free.free,
        reset_after: wait.unwrap_or(Duration::ZERO),
        retry_after: wait,
        delay: Duration::ZERO,
    }
}
