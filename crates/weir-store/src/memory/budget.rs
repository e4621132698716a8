//! The bound on keys held, shared by all shards.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many keys the store may hold, and how many it holds.
///
/// One counter for the whole store keeps the bound exact whatever the spread of keys
/// over shards; it is touched only when a key is added or dropped, never on a check of
/// an existing key.
#[derive(Debug)]
pub(super) struct KeyBudget {
    used: AtomicUsize,
    max: usize,
}

impl KeyBudget {
    pub(super) fn new(max: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            max,
        }
    }

    /// Takes room for `n` new keys, all or none.
    pub(super) fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + n <= self.max).then_some(used + n)
            })
            .is_ok()
    }

    /// Gives back the room of `n` dropped keys.
    pub(super) fn give_back(&self, n: usize) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Keys held.
    pub(super) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The bound.
    pub(super) fn max(&self) -> usize {
        self.max
    }
}
