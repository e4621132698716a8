//! What a shard keeps per key: the key's identity (its rule's tables hold the rule),
//! and its state.
//!
//! Identities of up to 24 bytes are stored inline, so finding one touches no memory
//! beyond the table; longer ones are on the heap.

use std::sync::atomic::AtomicU64;

use compact_str::CompactString;
use weir_core::State;

use crate::Key;

/// A key whose state is one word (`State::word`: GCRA's arrival time in whole
/// nanoseconds, which is also when the key is full again). 32 bytes.
#[derive(Debug)]
pub(super) struct WordEntry {
    pub(super) key: CompactString,
    /// The state's word, never 0 in the table; live while after `now`. Changed by
    /// compare-and-swap under the shard's read lock, or in place under its write lock.
    pub(super) word: AtomicU64,
}

/// Any other key: its state and when it is full again (and so can be dropped). 64
/// bytes.
///
/// `state` is `Some` while the entry is in the table; it is an `Option` so that the
/// algorithm can update it in place (and empty it when full).
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) key: CompactString,
    pub(super) expires_at: u64,
    pub(super) state: Option<State>,
}

/// A key with its hash, computed once per check.
#[derive(Debug, Clone, Copy)]
pub(super) struct HashedKey<'a> {
    pub(super) hash: u64,
    pub(super) key: Key<'a>,
}

impl HashedKey<'_> {
    /// Whether `stored`, an identity in this key's rule's tables, is this key.
    pub(super) fn is(&self, stored: &str) -> bool {
        stored == self.key.identity
    }

    /// The key as stored: its identity.
    pub(super) fn stored(&self) -> CompactString {
        CompactString::from(self.key.identity)
    }
}
