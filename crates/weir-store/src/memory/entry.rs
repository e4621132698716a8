//! What a shard keeps per key whose state is not one word (those are in `words.rs`):
//! the key's identity (its rule's tables hold the rule), and its state.
//!
//! Identities of up to 24 bytes are stored inline, so finding one touches no memory
//! beyond the table; longer ones are on the heap.

use compact_str::CompactString;
use weir_core::State;

use crate::Key;

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
