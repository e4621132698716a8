//! One shard of the memory store: a hash table of keys to state, with expiry.

use std::time::Duration;

use compact_str::CompactString;
use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};
use weir_core::{Decision, Policy, State, check};

use super::budget::KeyBudget;
use crate::Key;

/// A key's state and when it is full again (and so can be dropped).
///
/// `state` is `Some` while the entry is in the table; it is an `Option` so that the
/// algorithm can update it in place (and empty it when full). Keys of up to 24 bytes
/// are stored inline, so finding one touches no memory beyond the table.
#[derive(Debug)]
pub(super) struct Entry {
    key: CompactString,
    expires_at: u64,
    state: Option<State>,
}

/// Keys whose hash falls in this shard.
#[derive(Debug, Default)]
pub(super) struct Shard {
    table: HashTable<Entry>,
}

/// A key with its hash, computed once per check.
#[derive(Debug, Clone, Copy)]
pub(super) struct HashedKey<'a> {
    pub(super) hash: u64,
    pub(super) key: Key<'a>,
}

impl HashedKey<'_> {
    /// Whether `stored` (`rule:identity`) is this key, compared in place.
    fn is(&self, stored: &str) -> bool {
        let Key { rule, identity } = self.key;
        stored.len() == rule.len() + 1 + identity.len()
            && stored.starts_with(rule)
            && stored.ends_with(identity)
            && stored.as_bytes()[rule.len()] == b':'
    }

    /// The key as stored: `rule:identity`.
    fn stored(&self) -> CompactString {
        let mut stored =
            CompactString::with_capacity(self.key.rule.len() + 1 + self.key.identity.len());
        stored.push_str(self.key.rule);
        stored.push(':');
        stored.push_str(self.key.identity);
        stored
    }
}

/// What a shard could not do.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ShardFull;

impl Shard {
    /// The key's state at `now` (`None` when absent or expired), cloned.
    pub(super) fn get(&self, key: HashedKey<'_>, now: u64) -> Option<State> {
        self.table
            .find(key.hash, |e| key.is(&e.key))
            .filter(|e| e.expires_at > now)
            .and_then(|e| e.state.clone())
    }

    /// Decides one check in place.
    pub(super) fn check(
        &mut self,
        key: HashedKey<'_>,
        policy: &Policy,
        cost: u64,
        now: u64,
        budget: &KeyBudget,
        hasher: &RandomState,
    ) -> Result<Decision, ShardFull> {
        if let Ok(mut found) = self.table.find_entry(key.hash, |e| key.is(&e.key)) {
            let entry = found.get_mut();
            if entry.expires_at <= now {
                entry.state = None;
            }
            let decision = check(policy, &mut entry.state, now, cost);
            if entry.state.is_some() {
                entry.expires_at = expiry(now, decision.reset_after);
            } else {
                found.remove();
                budget.give_back(1);
            }
            return Ok(decision);
        }
        let mut state = None;
        let decision = check(policy, &mut state, now, cost);
        if let Some(state) = state {
            if !budget.try_take(1) {
                return Err(ShardFull);
            }
            let entry = Entry {
                key: key.stored(),
                expires_at: expiry(now, decision.reset_after),
                state: Some(state),
            };
            self.table
                .insert_unique(key.hash, entry, |e| rehash(hasher, &e.key));
        }
        Ok(decision)
    }

    /// Stores `state` for the key (removing the key when `None`). Room for a new key
    /// must have been taken from `budget` already.
    pub(super) fn put(
        &mut self,
        key: HashedKey<'_>,
        state: Option<State>,
        expires_at: u64,
        budget: &KeyBudget,
        hasher: &RandomState,
    ) {
        match (self.table.find_entry(key.hash, |e| key.is(&e.key)), state) {
            (Ok(mut found), Some(state)) => {
                let entry = found.get_mut();
                entry.state = Some(state);
                entry.expires_at = expires_at;
            }
            (Ok(found), None) => {
                found.remove();
                budget.give_back(1);
            }
            (Err(_), Some(state)) => {
                let entry = Entry {
                    key: key.stored(),
                    expires_at,
                    state: Some(state),
                };
                self.table
                    .insert_unique(key.hash, entry, |e| rehash(hasher, &e.key));
            }
            (Err(_), None) => {}
        }
    }

    /// Removes the key.
    pub(super) fn remove(&mut self, key: HashedKey<'_>, budget: &KeyBudget) {
        if let Ok(found) = self.table.find_entry(key.hash, |e| key.is(&e.key)) {
            found.remove();
            budget.give_back(1);
        }
    }

    /// Drops every entry whose state is full again.
    pub(super) fn sweep(&mut self, now: u64, budget: &KeyBudget) {
        let before = self.table.len();
        self.table.retain(|e| e.expires_at > now);
        budget.give_back(before - self.table.len());
    }
}

/// The hash of a key: of its rule, `:` and its identity, so that a stored key hashes the
/// same from its parts or from its stored form.
pub(super) fn hash_key(hasher: &RandomState, key: Key<'_>) -> u64 {
    let mut state = hasher.build_hasher();
    state.write(key.rule.as_bytes());
    state.write(b":");
    state.write(key.identity.as_bytes());
    state.finish()
}

/// The hash of a stored `rule:identity` (rules contain no `:`), for table growth.
fn rehash(hasher: &RandomState, stored: &str) -> u64 {
    let (rule, identity) = stored.split_once(':').unwrap_or((stored, ""));
    hash_key(hasher, Key { rule, identity })
}

/// When a state decided at `now` is full again.
pub(super) fn expiry(now: u64, reset_after: Duration) -> u64 {
    now.saturating_add(u64::try_from(reset_after.as_nanos()).unwrap_or(u64::MAX))
}
