//! One shard of the memory store: a hash table of keys to state, with expiry.

use std::time::Duration;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::BuildHasher;
use weir_core::{Decision, Policy, State, check};

/// How often a full shard may sweep itself for expired entries: bounds the work a flood
/// of new keys can cause to one sweep per shard per interval.
const SWEEP_INTERVAL: u64 = 100_000_000;

/// A key's state and when it is full again (and so can be dropped).
///
/// `state` is `Some` while the entry is in the table; it is an `Option` so that the
/// algorithm can update it in place (and empty it when full).
#[derive(Debug)]
pub(super) struct Entry {
    key: Box<str>,
    expires_at: u64,
    state: Option<State>,
}

/// Keys whose hash falls in this shard.
#[derive(Debug, Default)]
pub(super) struct Shard {
    table: HashTable<Entry>,
    last_sweep: u64,
}

/// A key with its hash, computed once per check.
#[derive(Debug, Clone, Copy)]
pub(super) struct HashedKey<'a> {
    pub(super) hash: u64,
    pub(super) name: &'a str,
}

/// What a shard could not do.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ShardFull;

impl Shard {
    /// Number of keys held (expired ones included until swept).
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// The key's state at `now` (`None` when absent or expired), cloned.
    pub(super) fn get(&self, key: HashedKey<'_>, now: u64) -> Option<State> {
        self.table
            .find(key.hash, |e| *e.key == *key.name)
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
        capacity: usize,
        hasher: &RandomState,
    ) -> Result<Decision, ShardFull> {
        if let Ok(mut found) = self.table.find_entry(key.hash, |e| *e.key == *key.name) {
            let entry = found.get_mut();
            if entry.expires_at <= now {
                entry.state = None;
            }
            let decision = check(policy, &mut entry.state, now, cost);
            if entry.state.is_some() {
                entry.expires_at = expiry(now, decision.reset_after);
            } else {
                found.remove();
            }
            return Ok(decision);
        }
        let mut state = None;
        let decision = check(policy, &mut state, now, cost);
        if let Some(state) = state {
            self.make_room(now, capacity)?;
            let entry = Entry {
                key: key.name.into(),
                expires_at: expiry(now, decision.reset_after),
                state: Some(state),
            };
            self.table
                .insert_unique(key.hash, entry, |e| hasher.hash_one(&*e.key));
        }
        Ok(decision)
    }

    /// Stores `state` for the key (removing the key when `None`), as decided at `now`.
    pub(super) fn put(
        &mut self,
        key: HashedKey<'_>,
        state: Option<State>,
        expires_at: u64,
        hasher: &RandomState,
    ) {
        match (
            self.table.find_entry(key.hash, |e| *e.key == *key.name),
            state,
        ) {
            (Ok(mut found), Some(state)) => {
                let entry = found.get_mut();
                entry.state = Some(state);
                entry.expires_at = expires_at;
            }
            (Ok(found), None) => {
                found.remove();
            }
            (Err(_), Some(state)) => {
                let entry = Entry {
                    key: key.name.into(),
                    expires_at,
                    state: Some(state),
                };
                self.table
                    .insert_unique(key.hash, entry, |e| hasher.hash_one(&*e.key));
            }
            (Err(_), None) => {}
        }
    }

    /// Removes the key.
    pub(super) fn remove(&mut self, key: HashedKey<'_>) {
        if let Ok(found) = self.table.find_entry(key.hash, |e| *e.key == *key.name) {
            found.remove();
        }
    }

    /// Ensures there is room for one more key, sweeping expired entries if the shard is
    /// full and has not swept lately.
    pub(super) fn make_room(&mut self, now: u64, capacity: usize) -> Result<(), ShardFull> {
        if self.table.len() < capacity {
            return Ok(());
        }
        if now.saturating_sub(self.last_sweep) >= SWEEP_INTERVAL {
            self.sweep(now);
        }
        if self.table.len() < capacity {
            Ok(())
        } else {
            Err(ShardFull)
        }
    }

    /// Drops every entry whose state is full again.
    pub(super) fn sweep(&mut self, now: u64) {
        self.table.retain(|e| e.expires_at > now);
        self.last_sweep = now;
    }
}

/// When a state decided at `now` is full again.
pub(super) fn expiry(now: u64, reset_after: Duration) -> u64 {
    now.saturating_add(u64::try_from(reset_after.as_nanos()).unwrap_or(u64::MAX))
}
