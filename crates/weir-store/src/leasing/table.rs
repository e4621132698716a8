//! One leased rule's keys on this instance: a slot per key asked for recently, bounded.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use weir_core::Policy;

use super::slot::Slot;

/// The most keys of one rule this instance keeps a slot for. Past it, a new key's
/// requests check on the store directly (a take spent at once, one call each) until
/// quiet keys are forgotten: never a weaker check, only a costlier one.
pub const MAX_SLOTS: usize = 100_000;

/// A key's slot, the policy its leases are taken under, and the wake-up of the
/// requests waiting for its take.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) slot: Slot,
    /// Only requests under this policy spend the slot's leases: callers of different
    /// plans can share a key, and a lease taken under a larger limit must not be
    /// spent by a caller of a smaller one.
    pub(super) policy: Policy,
    pub(super) taken: tokio::sync::Notify,
}

/// A rule's slots, by identity.
#[derive(Debug, Default)]
pub(super) struct Slots {
    by_key: RwLock<HashMap<Box<str>, Arc<Entry>, foldhash::fast::RandomState>>,
}

impl Slots {
    /// The slot of `identity`, made for `policy` if there is room.
    pub(super) fn get_or_make(&self, identity: &str, policy: &Policy) -> Option<Arc<Entry>> {
        if let Some(entry) = self.get(identity) {
            return Some(entry);
        }
        let mut by_key = self.by_key.write();
        if let Some(entry) = by_key.get(identity) {
            return Some(Arc::clone(entry));
        }
        if by_key.len() >= MAX_SLOTS {
            return None;
        }
        let entry = Arc::new(Entry {
            slot: Slot::default(),
            policy: *policy,
            taken: tokio::sync::Notify::new(),
        });
        by_key.insert(identity.into(), Arc::clone(&entry));
        Some(entry)
    }

    /// The slot of `identity`, if it has one.
    pub(super) fn get(&self, identity: &str) -> Option<Arc<Entry>> {
        self.by_key.read().get(identity).cloned()
    }

    /// The slots holding a lease, with their identities (for giving leases back), in
    /// the order of their identities whatever the table's seed: the give-backs then
    /// come in one order (a simulation on a virtual clock replays, breaker and all).
    pub(super) fn leased(&self) -> Vec<(Box<str>, Arc<Entry>)> {
        let mut leased: Vec<_> = self
            .by_key
            .read()
            .iter()
            .filter(|(_, v)| v.slot.holds_lease())
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        leased.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        leased
    }

    /// Drops the slots holding nothing whose key was not asked for in the last two
    /// seconds before `now`.
    pub(super) fn forget_idle(&self, now: u64) {
        let second = now / 1_000_000_000;
        let quiet = |entry: &Entry| entry.slot.last_asked() + 2 < second && entry.slot.is_idle(now);
        if !self.by_key.read().values().any(|e| quiet(e)) {
            return;
        }
        // A request holding a slot just dropped finishes on it; its next request makes
        // a new one (a lease it took meanwhile is given back by its deadline: the
        // dropped slot is still in that take's hands).
        self.by_key
            .write()
            .retain(|_, e| Arc::strong_count(e) > 1 || !quiet(e));
    }
}
