//! The store stack an engine decides on, finished: built by `crate::stack` from the
//! configuration (or, for a store in process, the store alone); the engine only
//! decides on it.

use std::sync::Arc;

use weir_store::{LeasingStore, MemoryStore, SlotStore, Store};

use super::Owed;

/// The stores an engine decides on: the top of the stack, and the two parts of it the
/// engine reaches for by name.
pub(crate) struct StoreStack {
    /// What every check goes to: the top of the stack.
    pub(crate) store: Arc<dyn Store>,
    /// The leases of the rules with `lease` (the top of the stack, when there are any
    /// on a shared store): given back on reload and shutdown.
    pub(crate) leasing: Option<Arc<LeasingStore>>,
    /// This instance's own limiter, for fail-open rules while a shared store is down;
    /// none when the store is in process (it never becomes unreachable).
    pub(crate) fallback: Option<MemoryStore>,
    /// The instance's settlements owed to a shared store (kept across reloads); none
    /// for a store in process.
    pub(crate) owed: Option<Arc<Owed>>,
    /// Where slots of requests in flight are taken (`algorithm: concurrency`): the
    /// primary store, kept across reloads with it. None for a store alone: the
    /// engine keeps its own in memory.
    pub(crate) slots: Option<Arc<dyn SlotStore>>,
}

impl std::fmt::Debug for StoreStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreStack")
            .field("leasing", &self.leasing.is_some())
            .field("fallback", &self.fallback.is_some())
            .field("owed", &self.owed.is_some())
            .finish_non_exhaustive()
    }
}

impl StoreStack {
    /// `store` alone, with nothing in front of it: the stack of a store in process
    /// (the memory store), which never fails over, leases or shares.
    pub(crate) fn alone(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            leasing: None,
            fallback: None,
            owed: None,
            slots: None,
        }
    }
}
