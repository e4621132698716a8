//! The keys of a rule whose state is one word, in two tables by the identity's length.
//!
//! Identities of up to 24 bytes (IPv4 addresses, user ids) sit inline in 32-byte
//! entries. Identities of 25 to 40 bytes (UUIDs, IPv6 addresses, API keys) sit inline
//! in 48-byte entries, so that finding one reads no memory beyond its entry: with the
//! identity on the heap, a check at a million keys would miss the cache twice, once on
//! the entry and once on the identity. Anything longer is on the heap, in the first
//! table. An identity's length says which table holds it.

use std::sync::atomic::AtomicU64;

use compact_str::CompactString;
use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::entry::{HashedKey, same};
use super::shard::hash_identity;

/// The longest identity kept inline in the second table.
const LONG: usize = 40;

/// A key's word (`State::word`: GCRA's arrival time in whole nanoseconds, which is
/// also when the key is full again), never 0 in a table, live while after `now`;
/// changed by compare-and-swap under the shard's read lock, or in place under its
/// write lock.
#[derive(Debug)]
struct WordEntry<I> {
    identity: I,
    word: AtomicU64,
}

/// An identity as a word table stores it.
trait Stored: Sized {
    /// `identity` as stored.
    fn store(identity: &str) -> Self;
    /// Whether this is `identity` (one of this table's).
    fn is(&self, identity: &str) -> bool;
    /// The identity's bytes, to hash again when the table grows.
    fn bytes(&self) -> &[u8];
}

impl Stored for CompactString {
    fn store(identity: &str) -> Self {
        CompactString::from(identity)
    }

    fn is(&self, identity: &str) -> bool {
        same(self.as_bytes(), identity.as_bytes())
    }

    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// An identity of 25 to 40 bytes not ending in a NUL byte, padded with NUL bytes: the
/// padding ends where the identity does.
#[derive(Debug)]
struct Inline([u8; LONG]);

impl Stored for Inline {
    fn store(identity: &str) -> Self {
        let mut bytes = [0; LONG];
        bytes[..identity.len()].copy_from_slice(identity.as_bytes());
        Inline(bytes)
    }

    fn is(&self, identity: &str) -> bool {
        let (head, padding) = self.0.split_at(identity.len());
        same(head, identity.as_bytes()) && padding.iter().all(|&b| b == 0)
    }

    fn bytes(&self) -> &[u8] {
        let end = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        &self.0[..end]
    }
}

/// Whether `identity` belongs inline in the table of long identities.
fn is_long(identity: &str) -> bool {
    identity.len() > 24 && identity.len() <= LONG && !identity.ends_with('\0')
}

/// The word keys of one rule in one shard.
#[derive(Debug, Default)]
pub(super) struct Words {
    /// Identities of up to 24 bytes inline, and those too long for `long`.
    compact: HashTable<WordEntry<CompactString>>,
    /// Identities of 25 to 40 bytes, inline.
    long: HashTable<WordEntry<Inline>>,
}

/// `$body` with `$table` bound to the table of `$key`'s identity.
macro_rules! on_table {
    ($words:ident, $key:expr, |$table:ident| $body:expr) => {
        if is_long($key.key.identity) {
            let $table = &$words.long;
            $body
        } else {
            let $table = &$words.compact;
            $body
        }
    };
    (mut $words:ident, $key:expr, |$table:ident| $body:expr) => {
        if is_long($key.key.identity) {
            let $table = &mut $words.long;
            $body
        } else {
            let $table = &mut $words.compact;
            $body
        }
    };
}

impl Words {
    /// The key's word, if held.
    pub(super) fn find(&self, key: HashedKey<'_>) -> Option<&AtomicU64> {
        on_table!(self, key, |table| table
            .find(key.hash, |e| e.identity.is(key.key.identity))
            .map(|e| &e.word))
    }

    /// The key's word, if held, to change under the write lock.
    pub(super) fn find_mut(&mut self, key: HashedKey<'_>) -> Option<&mut u64> {
        on_table!(mut self, key, |table| table
            .find_mut(key.hash, |e| e.identity.is(key.key.identity))
            .map(|e| e.word.get_mut()))
    }

    /// Removes the key; returns whether it was held.
    pub(super) fn remove(&mut self, key: HashedKey<'_>) -> bool {
        on_table!(mut self, key, |table| table
            .find_entry(key.hash, |e| e.identity.is(key.key.identity))
            .map(|found| found.remove())
            .is_ok())
    }

    /// Adds a key that is not held (`hasher` hashes keys again as a table grows).
    pub(super) fn insert(&mut self, key: HashedKey<'_>, word: u64, hasher: &RandomState) {
        on_table!(mut self, key, |table| {
            let entry = WordEntry {
                identity: Stored::store(key.key.identity),
                word: AtomicU64::new(word),
            };
            table.insert_unique(key.hash, entry, |e| {
                hash_identity(hasher, e.identity.bytes())
            });
        })
    }

    /// Drops every key full again at `now`; returns how many.
    pub(super) fn sweep(&mut self, now: u64) -> usize {
        let before = self.len();
        self.compact.retain(|e| *e.word.get_mut() > now);
        self.long.retain(|e| *e.word.get_mut() > now);
        before - self.len()
    }

    /// Keys held.
    pub(super) fn len(&self) -> usize {
        self.compact.len() + self.long.len()
    }
}
