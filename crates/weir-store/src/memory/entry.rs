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
        same(stored.as_bytes(), self.key.identity.as_bytes())
    }

    /// The key as stored: its identity.
    pub(super) fn stored(&self) -> CompactString {
        CompactString::from(self.key.identity)
    }
}

/// Whether two byte strings are equal, compared in registers, eight bytes at a time
/// and the tail as one overlapping load: for strings as short as identities and rule
/// names, cheaper than a call to `memcmp` (two per check, a tenth of a check's
/// instructions under callgrind).
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if let (Some(a_tail), Some(b_tail)) = (a.last_chunk::<8>(), b.last_chunk::<8>()) {
        let (a_words, _) = a.as_chunks::<8>();
        let (b_words, _) = b.as_chunks::<8>();
        return a_tail == b_tail && a_words.iter().zip(b_words).all(|(x, y)| x == y);
    }
    match (a.first_chunk::<4>(), b.first_chunk::<4>()) {
        (Some(a_head), Some(b_head)) => {
            a_head == b_head && a.last_chunk::<4>() == b.last_chunk::<4>()
        }
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn same_is_equality_at_every_length() {
        let text = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH";
        for n in 0..=text.len() {
            let a = &text[..n];
            assert!(same(a, a), "{n}");
            for i in 0..n {
                let mut b = a.to_vec();
                b[i] ^= 1;
                assert!(!same(a, &b), "{n}, byte {i}");
            }
            if n > 0 {
                assert!(!same(a, &a[..n - 1]), "{n}, shorter");
            }
        }
    }
}
