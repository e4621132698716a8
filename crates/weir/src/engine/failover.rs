//! When the shared store cannot decide: each rule's failure policy, and the local
//! fallback store fail-open rules are decided on, with each instance's share.

use weir_store::{MemoryStore, Store, StoreError};

use super::applied::Applied;
use super::settlement::StoreUsed;
use super::{Engine, Failure};
use crate::metrics::Outcome;

impl Engine {
    /// The local store to decide on after the shared one failed with `error`, if every
    /// rule fails open and the error is an outage; else why the request gets a 503
    /// (failed closed, or unavailable). A full store, a refused check or a protocol
    /// error is never an outage.
    pub(super) fn fail_over(
        &self,
        enforced: &[Applied<'_>],
        error: &StoreError,
    ) -> Result<&MemoryStore, Outcome> {
        let fallback = self.fallback.as_ref().filter(|_| error.is_unavailable());
        let Some(fallback) = fallback else {
            tracing::warn!(%error, "the store could not decide");
            return Err(Outcome::Unavailable);
        };
        if let Some(closed) = enforced.iter().find(|a| a.rule.failure == Failure::Closed) {
            tracing::warn!(%error, rule = %closed.rule.name, "store unavailable: failing closed");
            return Err(Outcome::FailedClosed);
        }
        self.log_fallback(error);
        Ok(fallback)
    }

    /// Logs that the engine decides on its local fallback, at most every 10 s.
    pub(super) fn log_fallback(&self, error: &StoreError) {
        if self.fallback_logged.due(self.clock.now()) {
            tracing::warn!(%error, "store unavailable: deciding fail-open rules on this instance's local fallback limits");
        }
    }

    /// This instance's local fallback store, when the shared store may fail.
    pub(super) fn fallback_store(&self) -> Option<&MemoryStore> {
        self.fallback.as_ref()
    }

    /// The store a request was decided on.
    pub(super) fn store_used(&self, used: StoreUsed) -> &dyn Store {
        match (used, &self.fallback) {
            (StoreUsed::Fallback, Some(fallback)) => fallback,
            _ => self.store.as_ref(),
        }
    }
}

/// The rules with each instance's share of their callers' limits (a plan's, or a
/// custom one), for the local fallback.
pub(super) fn on_fallback(applied: Vec<Applied<'_>>) -> Vec<Applied<'_>> {
    applied
        .into_iter()
        .map(|a| Applied {
            policy: a.rule.fallback_policy(&a.policy),
            ..a
        })
        .collect()
}
