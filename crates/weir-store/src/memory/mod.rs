//! The in-process memory store: sharded, exact under concurrency, bounded, expiring.
//!
//! Keys are spread over shards by hash, each shard a pair of hash tables per rule
//! (`shard.rs`, `tables.rs`) behind its own read-write lock, so concurrent checks on
//! different keys rarely contend, and checks on one key apply one after another (exact
//! counts under any concurrency): a state of one word (GCRA at a whole number of
//! nanoseconds per unit) by compare-and-swap under the read lock, as governor does, so
//! that a hot key's checks never wait for each other and a denial writes nothing; any
//! other state under the write lock. An entry lives until its state is full again
//! (`reset_after`); expired entries are ignored on sight, dropped when next touched,
//! swept when a shard fills up, and by [`MemoryStore::sweep_expired`].
//!
//! The number of keys is bounded by [`MemoryStoreConfig::max_keys`]. When a shard is
//! full of live entries, a check that needs a new key fails with
//! [`StoreError::Full`]; existing keys are never evicted, because evicting a live key
//! resets its limit, which is exactly what an attacker flooding new keys would want.

mod budget;
mod entry;
mod shard;
mod slots;
mod tables;
mod words;

use std::future::ready;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockWriteGuard};

use foldhash::fast::RandomState;
use weir_core::{
    Claim, Clock, Decision, Policy, Renewal, Report, State, apply_share, charge, check, refund,
    renew_share, report_share,
};

use self::budget::KeyBudget;
use self::entry::HashedKey;
use self::shard::{Shard, ShardFull, expiry, hash_identity};
use crate::{
    Check, Key, LeaseStore, ShareStore, SlotStore, SlotTake, SlotsFree, Store, StoreError,
    StoreFuture,
};

/// Configuration of a [`MemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStoreConfig {
    /// The most keys held at once.
    pub max_keys: usize,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        Self {
            max_keys: 1_000_000,
        }
    }
}

/// A shard behind its lock, alone on its cache line(s): the lock word and the tables'
/// headers share a line (one line moves between cores per check), and threads working
/// on neighbouring shards do not slow each other down (false sharing).
#[derive(Debug, Default)]
#[repr(align(64))]
struct LockedShard(RwLock<Shard>);

/// The embedded store: limit state in this process's memory.
pub struct MemoryStore {
    shards: Box<[LockedShard]>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
    budget: KeyBudget,
    /// When the store last swept itself for lack of room.
    last_sweep: AtomicU64,
    /// Requests in flight, for `algorithm: concurrency`.
    slots: slots::Slots,
}

/// How often a full store may sweep itself for expired entries: bounds the work a flood
/// of new keys can cause to one sweep per interval.
const SWEEP_INTERVAL: u64 = 100_000_000;

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("max_keys", &self.budget.max())
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// A store holding at most `config.max_keys` keys (at least one), reading time from
    /// `clock`.
    pub fn new(config: MemoryStoreConfig, clock: Arc<dyn Clock>) -> Self {
        let parallelism = std::thread::available_parallelism().map_or(1, usize::from);
        let shards = (parallelism * 16).next_power_of_two().max(64);
        Self {
            shards: (0..shards).map(|_| LockedShard::default()).collect(),
            hasher: RandomState::default(),
            clock,
            budget: KeyBudget::new(config.max_keys.max(1)),
            last_sweep: AtomicU64::new(0),
            slots: slots::Slots::default(),
        }
    }

    /// Checks one key now, synchronously: what [`Store::check`] does, without a future.
    pub fn check_sync(
        &self,
        key: Key<'_>,
        policy: &Policy,
        cost: u64,
    ) -> Result<Decision, StoreError> {
        let key = self.hashed(key);
        let shard = &self.shards[self.shard_of(key)].0;
        let now = self.clock.now();
        if policy.packs()
            && let Some(decision) = shard.read().check_shared(key, policy, cost, now)
        {
            return Ok(decision);
        }
        let attempt = |now| {
            shard
                .write()
                .check(key, policy, cost, now, &self.budget, &self.hasher)
        };
        self.with_room(attempt(now), || attempt(self.clock.now()))
    }

    /// Checks several keys now, all-or-nothing: what [`Store::check_all`] does.
    pub fn check_all_sync(&self, checks: &[Check<'_>]) -> Result<Vec<Decision>, StoreError> {
        // One check is all-or-nothing by itself: the single-key path, without the
        // batch's bookkeeping.
        if let [only] = checks {
            return self
                .check_sync(only.key, only.policy, only.cost)
                .map(|d| vec![d]);
        }
        let attempt = || self.try_check_all(checks, true);
        self.with_room(attempt(), attempt)
    }

    /// What [`MemoryStore::check_all_sync`] would decide now, changing nothing.
    pub fn preview_all_sync(&self, checks: &[Check<'_>]) -> Vec<Decision> {
        // Without a commit no key is added, so there is always room.
        self.try_check_all(checks, false).unwrap_or_default()
    }

    /// `first`, an attempt's outcome; where a shard had no room for a new key, sweeps
    /// expired entries (if due) and makes the attempt once more by `retry`. Still no
    /// room: [`StoreError::Full`].
    fn with_room<T>(
        &self,
        first: Result<T, ShardFull>,
        retry: impl FnOnce() -> Result<T, ShardFull>,
    ) -> Result<T, StoreError> {
        first.or_else(|ShardFull| {
            if self.sweep_if_due() {
                retry().map_err(|ShardFull| self.full())
            } else {
                Err(self.full())
            }
        })
    }

    /// Sweeps expired entries, unless the store swept for lack of room less than
    /// [`SWEEP_INTERVAL`] ago. Returns whether it swept.
    fn sweep_if_due(&self) -> bool {
        let now = self.clock.now();
        let last = self.last_sweep.load(Ordering::Acquire);
        let due = now.saturating_sub(last) >= SWEEP_INTERVAL
            && self
                .last_sweep
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if due {
            self.sweep_expired();
        }
        due
    }

    /// Decides `checks` together; writes the result only if `commit`.
    fn try_check_all(
        &self,
        checks: &[Check<'_>],
        commit: bool,
    ) -> Result<Vec<Decision>, ShardFull> {
        let now = self.clock.now();
        let keys: Vec<HashedKey<'_>> = checks.iter().map(|c| self.hashed(c.key)).collect();
        let mut locked = self.lock_all(&keys);

        // Decide every check on copies of the state; a key checked twice sees the
        // first check's result.
        let mut states: Vec<Option<State>> = Vec::with_capacity(checks.len());
        let mut decisions = Vec::with_capacity(checks.len());
        for (i, c) in checks.iter().enumerate() {
            let earlier = (0..i).rev().find(|&j| checks[j].key == c.key);
            let mut state = match earlier {
                Some(j) => states[j].clone(),
                None => locked.shard(i).get(keys[i], now),
            };
            decisions.push(check(c.policy, &mut state, now, c.cost));
            states.push(state);
        }

        if !commit {
            return Ok(decisions);
        }
        if !decisions.iter().all(|d| d.allowed) {
            // Nothing is consumed: the checks that passed report their unchanged state.
            for (i, d) in decisions.iter_mut().enumerate() {
                if d.allowed {
                    let mut state = locked.shard(i).get(keys[i], now);
                    *d = check(checks[i].policy, &mut state, now, 0);
                }
            }
            return Ok(decisions);
        }

        // Commit the last state of each key, after making sure new keys fit. A key
        // held but expired is not new: its entry is reused.
        let new_keys = (0..checks.len())
            .filter(|&i| is_last(checks, i) && states[i].is_some())
            .filter(|&i| !locked.shard(i).holds(keys[i]))
            .count();
        if !self.budget.try_take(new_keys) {
            return Err(ShardFull);
        }
        for (i, state) in states.into_iter().enumerate() {
            if is_last(checks, i) {
                let expires_at = expiry(now, decisions[i].reset_after);
                locked.shard(i).put(
                    keys[i],
                    state,
                    expires_at,
                    checks[i].policy,
                    &self.budget,
                    &self.hasher,
                );
            }
        }
        Ok(decisions)
    }

    /// Gives back each check's cost now, all under the locks of their shards: what
    /// [`Store::refund_all`] does. A refund only empties states, so it never needs a
    /// new key and cannot fail.
    pub fn refund_all_sync(&self, checks: &[Check<'_>]) {
        // Only a state found in the table is refunded (`None` stays `None`).
        let _ = self.try_update_all(checks, refund);
    }

    /// Takes each check's cost past its limit now, all under the locks of their
    /// shards: what [`Store::charge_all`] does. A charge may need a new key (one
    /// whose reservation has expired since), and fails as a check does when there is
    /// no room for it.
    pub fn charge_all_sync(&self, checks: &[Check<'_>]) -> Result<(), StoreError> {
        let attempt = || self.try_update_all(checks, charge);
        self.with_room(attempt(), attempt)
    }

    /// Runs `update` (`refund` or `charge`) on each check's state in order, under the
    /// locks of their shards, and keeps each key's last state until it is full again.
    fn try_update_all(
        &self,
        checks: &[Check<'_>],
        update: fn(&Policy, &mut Option<State>, u64, u64),
    ) -> Result<(), ShardFull> {
        let now = self.clock.now();
        let keys: Vec<HashedKey<'_>> = checks.iter().map(|c| self.hashed(c.key)).collect();
        let mut locked = self.lock_all(&keys);
        // A key updated twice sees the first update's result.
        let mut states: Vec<Option<State>> = Vec::with_capacity(checks.len());
        for (i, c) in checks.iter().enumerate() {
            let earlier = (0..i).rev().find(|&j| checks[j].key == c.key);
            let mut state = match earlier {
                Some(j) => states[j].clone(),
                None => locked.shard(i).get(keys[i], now),
            };
            update(c.policy, &mut state, now, c.cost);
            states.push(state);
        }
        let new_keys = (0..checks.len())
            .filter(|&i| is_last(checks, i) && states[i].is_some())
            .filter(|&i| !locked.shard(i).holds(keys[i]))
            .count();
        if !self.budget.try_take(new_keys) {
            return Err(ShardFull);
        }
        for (i, mut state) in states.into_iter().enumerate() {
            if is_last(checks, i) {
                // A peek gives the expiry (and changes nothing: the state is already
                // `None` if full).
                let reset_after = check(checks[i].policy, &mut state, now, 0).reset_after;
                locked.shard(i).put(
                    keys[i],
                    state,
                    expiry(now, reset_after),
                    checks[i].policy,
                    &self.budget,
                    &self.hasher,
                );
            }
        }
        Ok(())
    }

    /// Locks the shards of `keys`, in shard order so that concurrent batches cannot
    /// deadlock.
    fn lock_all(&self, keys: &[HashedKey<'_>]) -> Locked<'_> {
        let shard_of_key: Vec<usize> = keys.iter().map(|&k| self.shard_of(k)).collect();
        let mut ids = shard_of_key.clone();
        ids.sort_unstable();
        ids.dedup();
        Locked {
            guards: ids.iter().map(|&i| self.shards[i].0.write()).collect(),
            of_key: shard_of_key
                .iter()
                .map(|id| ids.binary_search(id).unwrap_or_default())
                .collect(),
        }
    }

    /// Runs `update` on the key's state now, under its shard's lock, and keeps what it
    /// leaves, until full again (a regional record: a peek under `policy` says when)
    /// and not before the state says it must live.
    fn update<T>(
        &self,
        key: Key<'_>,
        policy: &Policy,
        peek: bool,
        update: impl FnOnce(&mut Option<State>, u64) -> T,
    ) -> Result<T, StoreError> {
        let now = self.clock.now();
        let hashed = [self.hashed(key)];
        let mut locked = self.lock_all(&hashed);
        let shard = locked.shard(0);
        let mut state = shard.get(hashed[0], now);
        let out = update(&mut state, now);
        if state.is_some() && !shard.holds(hashed[0]) && !self.budget.try_take(1) {
            return Err(self.full());
        }
        let reset_after = match peek {
            true => check(policy, &mut state.clone(), now, 0).reset_after,
            false => std::time::Duration::ZERO,
        };
        let expires_at = expiry(now, reset_after);
        shard.put(
            hashed[0],
            state,
            expires_at,
            policy,
            &self.budget,
            &self.hasher,
        );
        Ok(out)
    }

    /// Forgets a key's state.
    pub fn reset_sync(&self, key: Key<'_>) {
        let key = self.hashed(key);
        self.shards[self.shard_of(key)]
            .0
            .write()
            .remove(key, &self.budget);
    }

    /// Drops every entry whose state is full again, shard by shard (each shard is locked
    /// only while it is swept). Call it now and then to give memory back.
    pub fn sweep_expired(&self) {
        let now = self.clock.now();
        for shard in &self.shards {
            shard.0.write().sweep(now, &self.budget);
        }
    }

    /// Keys held, including expired ones not yet swept.
    pub fn len(&self) -> usize {
        self.budget.used()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hashed<'a>(&self, key: Key<'a>) -> HashedKey<'a> {
        HashedKey {
            hash: hash_identity(&self.hasher, key.identity.as_bytes()),
            key,
        }
    }

    /// The shard a key lives in: taken from hash bits that the tables themselves do not
    /// use (they index by the low bits and tag by the top seven).
    fn shard_of(&self, key: HashedKey<'_>) -> usize {
        (key.hash >> 40) as usize & (self.shards.len() - 1)
    }

    fn full(&self) -> StoreError {
        StoreError::Full {
            max_keys: self.budget.max(),
        }
    }
}

/// The shards of a batch's keys, locked for the whole batch.
struct Locked<'s> {
    guards: Vec<RwLockWriteGuard<'s, Shard>>,
    /// Which guard holds each key, by the key's index in the batch.
    of_key: Vec<usize>,
}

impl Locked<'_> {
    /// The shard of the batch's `i`-th key.
    fn shard(&mut self, i: usize) -> &mut Shard {
        &mut self.guards[self.of_key[i]]
    }
}

/// Whether check `i` is the last of the batch on its key (the one whose state is kept).
fn is_last(checks: &[Check<'_>], i: usize) -> bool {
    !checks[i + 1..].iter().any(|c| c.key == checks[i].key)
}

impl Store for MemoryStore {
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        Box::pin(ready(self.check_sync(key, policy, cost)))
    }

    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(ready(self.check_all_sync(checks)))
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(ready(Ok(self.preview_all_sync(checks))))
    }

    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        self.refund_all_sync(checks);
        Box::pin(ready(Ok(())))
    }

    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(ready(self.charge_all_sync(checks)))
    }

    fn reset<'a>(&'a self, key: Key<'a>, _: &'a Policy) -> StoreFuture<'a, ()> {
        self.reset_sync(key);
        Box::pin(ready(Ok(())))
    }
}

/// Slots exact in this process; no lease (a crash loses every slot with the process).
impl SlotStore for MemoryStore {
    fn take_slots<'a>(
        &'a self,
        takes: &'a [SlotTake<'a>],
        id: u64,
        _lease: std::time::Duration,
    ) -> StoreFuture<'a, Vec<SlotsFree>> {
        Box::pin(ready(Ok(self.slots.take(takes, id))))
    }

    fn release_slots<'a>(&'a self, keys: &'a [Key<'a>], id: u64) -> StoreFuture<'a, ()> {
        self.slots.release(keys, id);
        Box::pin(ready(Ok(())))
    }
}

/// No leases: every instance has its own state, so nothing is gained (the defaults: a
/// take is a check, spent at once).
impl LeaseStore for MemoryStore {}

/// Shares kept through weir-core's functions, as Redis keeps them in Lua: what the
/// regional store's tests run on.
impl ShareStore for MemoryStore {
    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: Report,
    ) -> StoreFuture<'a, Option<Claim>> {
        let claim = self.update(key, policy, true, |state, now| {
            report_share(policy, state, now, &report)
        });
        Box::pin(ready(claim.and_then(|c| c.map_err(StoreError::from))))
    }

    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: std::time::Duration,
    ) -> StoreFuture<'a, bool> {
        let applied = self.update(key, policy, true, |state, now| {
            apply_share(policy, state, now, seq, grant, hold)
        });
        Box::pin(ready(applied.and_then(|a| a.map_err(StoreError::from))))
    }

    /// Home's records live under the rule's name followed by `:home`, which no rule
    /// of a configuration can be named.
    fn renew_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        renewal: Renewal,
    ) -> StoreFuture<'a, Option<u64>> {
        let rule = format!("{}:home", key.rule);
        let home = Key {
            rule: &rule,
            identity: key.identity,
        };
        let granted = self.update(home, policy, false, |state, now| {
            renew_share(policy, state, now, &renewal)
        });
        Box::pin(ready(granted.and_then(|g| g.map_err(StoreError::from))))
    }
}
