//! The in-process memory store: sharded, exact under concurrency, bounded, expiring.
//!
//! Keys are spread over shards by hash, each shard a hash table behind its own mutex, so
//! concurrent checks on different keys rarely contend, and checks on one key are
//! serialised (exact counts under any concurrency). An entry lives until its state is
//! full again (`reset_after`); expired entries are ignored on sight, dropped when next
//! touched, swept when a shard fills up, and by [`MemoryStore::sweep_expired`].
//!
//! The number of keys is bounded by [`MemoryStoreConfig::max_keys`]. When a shard is
//! full of live entries, a check that needs a new key fails with
//! [`StoreError::Full`]; existing keys are never evicted, because evicting a live key
//! resets its limit, which is exactly what an attacker flooding new keys would want.

mod shard;

use std::future::ready;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use foldhash::fast::RandomState;
use weir_core::{Clock, Decision, Policy, State, check};

use self::shard::{HashedKey, Shard, ShardFull, expiry};
use crate::{Check, Store, StoreError, StoreFuture};

/// Configuration of a [`MemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStoreConfig {
    /// The most keys held at once (approximately: the bound is kept per shard, and the
    /// shards hold `max_keys` between them).
    pub max_keys: usize,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        Self {
            max_keys: 1_000_000,
        }
    }
}

/// Keys a shard should be able to hold before the store uses more shards: keeps the
/// per-shard bound close to the configured total when `max_keys` is small.
const MIN_KEYS_PER_SHARD: usize = 1024;

/// The embedded store: limit state in this process's memory.
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
    shard_capacity: usize,
    max_keys: usize,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// A store holding at most `config.max_keys` keys (at least one), reading time from
    /// `clock`.
    pub fn new(config: MemoryStoreConfig, clock: Arc<dyn Clock>) -> Self {
        let max_keys = config.max_keys.max(1);
        let parallelism = std::thread::available_parallelism().map_or(1, usize::from);
        let wanted = (parallelism * 16).next_power_of_two().max(64);
        let affordable = (max_keys / MIN_KEYS_PER_SHARD).max(1);
        // The largest power of two no larger than `affordable`.
        let by_size = 1 << affordable.ilog2();
        let shards = wanted.min(by_size);
        Self {
            shards: (0..shards).map(|_| Mutex::default()).collect(),
            hasher: RandomState::default(),
            clock,
            shard_capacity: max_keys.div_ceil(shards),
            max_keys,
        }
    }

    /// Checks one key now, synchronously: what [`Store::check`] does, without a future.
    pub fn check_sync(
        &self,
        key: &str,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, StoreError> {
        let now = self.clock.now();
        let key = self.hashed(key);
        self.lock(key)
            .check(key, policy, cost, now, self.shard_capacity, &self.hasher)
            .map_err(|ShardFull| self.full())
    }

    /// Checks several keys now, all-or-nothing: what [`Store::check_all`] does.
    pub fn check_all_sync(&self, checks: &[Check<'_>]) -> Result<Vec<Decision>, StoreError> {
        let now = self.clock.now();
        let keys: Vec<HashedKey<'_>> = checks.iter().map(|c| self.hashed(c.key)).collect();
        let mut shard_ids: Vec<usize> = keys.iter().map(|&k| self.shard_of(k)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        // Locks are always taken in shard order, so concurrent batches cannot deadlock.
        let mut guards: Vec<MutexGuard<'_, Shard>> =
            shard_ids.iter().map(|&i| lock(&self.shards[i])).collect();
        let guard_index = |key: HashedKey<'_>| {
            shard_ids
                .binary_search(&self.shard_of(key))
                .unwrap_or_default()
        };

        // Decide every check on copies of the state; a key checked twice sees the
        // first check's result.
        let mut states: Vec<Option<State>> = Vec::with_capacity(checks.len());
        let mut decisions = Vec::with_capacity(checks.len());
        for (i, c) in checks.iter().enumerate() {
            let earlier = (0..i).rev().find(|&j| checks[j].key == c.key);
            let mut state = match earlier {
                Some(j) => states[j].clone(),
                None => guards[guard_index(keys[i])].get(keys[i], now),
            };
            decisions.push(check(c.policy, &mut state, now, c.cost));
            states.push(state);
        }

        if !decisions.iter().all(|d| d.allowed) {
            // Nothing is consumed: the checks that passed report their unchanged state.
            for (i, d) in decisions.iter_mut().enumerate() {
                if d.allowed {
                    let mut state = guards[guard_index(keys[i])].get(keys[i], now);
                    *d = check(checks[i].policy, &mut state, now, 0);
                }
            }
            return Ok(decisions);
        }

        // Commit the last state of each key, after making sure new keys fit.
        let is_last = |i: usize| !checks[i + 1..].iter().any(|c| c.key == checks[i].key);
        let mut new_keys = vec![0usize; guards.len()];
        for i in (0..checks.len()).filter(|&i| is_last(i)) {
            let g = guard_index(keys[i]);
            if states[i].is_some() && guards[g].get(keys[i], now).is_none() {
                new_keys[g] += 1;
            }
        }
        for (guard, &needed) in guards.iter_mut().zip(&new_keys) {
            if needed > 0 {
                guard
                    .make_room(now, self.shard_capacity.saturating_sub(needed - 1))
                    .map_err(|ShardFull| self.full())?;
            }
        }
        for (i, state) in states.into_iter().enumerate() {
            if is_last(i) {
                let expires_at = expiry(now, decisions[i].reset_after);
                guards[guard_index(keys[i])].put(keys[i], state, expires_at, &self.hasher);
            }
        }
        Ok(decisions)
    }

    /// Forgets a key's state.
    pub fn reset_sync(&self, key: &str) {
        let key = self.hashed(key);
        self.lock(key).remove(key);
    }

    /// Drops every entry whose state is full again, shard by shard (each shard is locked
    /// only while it is swept). Call it now and then to give memory back.
    pub fn sweep_expired(&self) {
        let now = self.clock.now();
        for shard in &self.shards {
            lock(shard).sweep(now);
        }
    }

    /// Keys held, including expired ones not yet swept.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hashed<'a>(&self, name: &'a str) -> HashedKey<'a> {
        HashedKey {
            hash: self.hasher.hash_one(name),
            name,
        }
    }

    /// The shard a key lives in: taken from hash bits that the tables themselves do not
    /// use (they index by the low bits and tag by the top seven).
    fn shard_of(&self, key: HashedKey<'_>) -> usize {
        (key.hash >> 40) as usize & (self.shards.len() - 1)
    }

    fn lock(&self, key: HashedKey<'_>) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_of(key)])
    }

    fn full(&self) -> StoreError {
        StoreError::Full {
            max_keys: self.max_keys,
        }
    }
}

/// Locks a shard. A panic while a shard was locked cannot leave it inconsistent (state
/// is replaced whole), so a poisoned lock is used as is.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Store for MemoryStore {
    fn check<'a>(
        &'a self,
        key: &'a str,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        Box::pin(ready(self.check_sync(key, policy, cost)))
    }

    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(ready(self.check_all_sync(checks)))
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()> {
        self.reset_sync(key);
        Box::pin(ready(Ok(())))
    }
}
