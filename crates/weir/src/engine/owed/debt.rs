//! One settlement owed to the shared store: what it writes, owned (the request that
//! made it is gone), the store it was made on, and whether a try may have been written.

use std::sync::Arc;
use std::time::Duration;

use weir_core::Policy;
use weir_store::{Check, Key, SETTLEMENTS_REMEMBERED, Store, StoreError};

/// How long after a try that may have been written a settlement is still sent again:
/// what the store remembers of it, less a minute for the try's own way there and the
/// two clocks. Later, a second write could not be told from a first, so it is given up.
const SEND_AGAIN_WITHIN: Duration = SETTLEMENTS_REMEMBERED.saturating_sub(Duration::from_secs(60));

/// One refund or charge, owned.
struct Owned {
    rule: String,
    identity: String,
    policy: Policy,
    cost: u64,
}

impl Owned {
    fn of(check: &Check<'_>) -> Self {
        Self {
            rule: check.key.rule.to_owned(),
            identity: check.key.identity.to_owned(),
            policy: *check.policy,
            cost: check.cost,
        }
    }

    fn check(&self) -> Check<'_> {
        Check {
            key: Key {
                rule: &self.rule,
                identity: &self.identity,
            },
            policy: &self.policy,
            cost: self.cost,
        }
    }
}

/// A settlement the store did not take.
pub(crate) struct Debt {
    /// The store stack it was made on (a reload may have replaced the engine's since).
    store: Arc<dyn Store>,
    /// Its id, which the store remembers once it is written.
    id: u128,
    refunds: Vec<Owned>,
    charges: Vec<Owned>,
    /// When a try that may have been written was first sent (ns on the engine's
    /// clock): one that reached the store and got no answer. `None` while every try
    /// was refused before it was sent (the breaker open, the store lost).
    sent_at: Option<u64>,
}

impl Debt {
    /// The settlement `id` of `refunds` and `charges` on `store`, tried at `now`:
    /// `sent` when the try may have been written.
    pub(crate) fn new(
        store: &Arc<dyn Store>,
        id: u128,
        refunds: &[Check<'_>],
        charges: &[Check<'_>],
        tried: Tried,
    ) -> Self {
        let mut debt = Self {
            store: Arc::clone(store),
            id,
            refunds: refunds.iter().map(Owned::of).collect(),
            charges: charges.iter().map(Owned::of).collect(),
            sent_at: None,
        };
        debt.tried(tried);
        debt
    }

    /// Notes a try that failed.
    fn tried(&mut self, tried: Tried) {
        if tried.sent && self.sent_at.is_none() {
            self.sent_at = Some(tried.at);
        }
    }

    /// Whether a try may have been written longer ago than the store remembers it.
    pub(super) fn is_stale(&self, now: u64) -> bool {
        self.sent_at
            .is_some_and(|at| Duration::from_nanos(now.saturating_sub(at)) >= SEND_AGAIN_WITHIN)
    }

    /// Which store stack it is owed to (the stack's address, to tell stacks apart).
    pub(super) fn store_id(&self) -> usize {
        Arc::as_ptr(&self.store).cast::<()>().addr()
    }

    /// Whether its store is expected to answer now.
    pub(super) fn store_ready(&self) -> bool {
        self.store.is_ready()
    }

    /// Sends it again, at `now`: `Ok(repeated)` once written (`repeated`: an earlier try
    /// had been), `Err` with the debt back when the store is still out, or `Err(None)`
    /// when it refused it (logged).
    pub(super) async fn send(mut self, now: u64) -> Result<bool, Option<Self>> {
        let ready = self.store.is_ready();
        let result = {
            let refunds: Vec<Check<'_>> = self.refunds.iter().map(Owned::check).collect();
            let charges: Vec<Check<'_>> = self.charges.iter().map(Owned::check).collect();
            self.store.settle_all(self.id, &refunds, &charges).await
        };
        match result {
            Ok(settled) => Ok(settled == weir_store::Settled::Repeated),
            Err(error) if is_outage(&error) => {
                self.tried(Tried::of(&error, ready, now));
                Err(Some(self))
            }
            Err(error) => {
                tracing::warn!(%error, "the store refused an owed settlement; given up");
                Err(None)
            }
        }
    }
}

/// A try that failed: when, and whether it may have been written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tried {
    at: u64,
    sent: bool,
}

impl Tried {
    /// A try at `at` that failed with `error`, the store `ready` when it was made: one
    /// refused before it was sent (the store not ready, so the breaker refuses it; a
    /// cluster slot known lost) cannot have been written.
    pub(crate) fn of(error: &StoreError, ready: bool, at: u64) -> Self {
        Self {
            at,
            sent: ready && !matches!(error, StoreError::SlotLost(_)),
        }
    }
}

/// Whether `error` says the store is out (down, too slow, a slot lost): what is owed,
/// as opposed to a settlement it refuses.
pub(crate) fn is_outage(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Timeout(_) | StoreError::Unavailable(_) | StoreError::SlotLost(_)
    )
}
