//! A region's Redis Cluster, simulated: shards keeping each key's state and leases
//! with weir-core's own `check`, `take`, `give_back` and `refund` (the functions the
//! Lua scripts are tested against, and the share functions), a key on the shard its
//! identity's hash slot falls in, every call counted per shard and per second of the
//! virtual clock and per rule, a latency drawn per call from the region's model (told
//! to the [`Recorder`]), and a failure window in which one shard answers nothing: each
//! call fails with a timeout after the store's `timeout` until the gateways' health
//! loops have found the shard's slots lost (two timeouts: a failed check wakes the
//! loop, whose probe of that primary fails after one), then at once, without a call,
//! as the Redis store refuses a lost slot (`StoreError::SlotLost`), until the loops
//! find it back ([`FOUND_BACK`] after it is).
//!
//! Calls answer at once in real time: the latency is only added to the statistics of
//! the request that waited for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use weir_core::{
    Claim, Clock, Decision, Grant, LeaseId, Leases, ManualClock, Policy, Renewal, Report, State,
    Take,
};
use weir_store::{Check, Key, LeaseStore, ShareStore, Store, StoreError, StoreFuture};

use super::recorder::Recorder;
use super::scenario::Latency;

/// How long after a failed shard answers again the gateways' health loops still
/// refuse its slots: a lost part is probed every 100-250 ms, so up to 250 ms and the
/// probe itself.
const FOUND_BACK: Duration = Duration::from_millis(300);

/// A key's state on a shard, and its leases.
#[derive(Debug)]
struct Entry {
    policy: Policy,
    state: Option<State>,
    leases: Leases,
}

/// One shard.
#[derive(Debug, Default)]
struct Shard {
    keys: Mutex<HashMap<String, Entry, foldhash::fast::FixedState>>,
    /// Since when (virtual ns) the shard answers nothing; 0 while it answers.
    down_since: AtomicU64,
    /// Until when (virtual ns) its slots are still refused after it came back.
    refused_until: AtomicU64,
    /// Calls per second of the run.
    calls: Mutex<Vec<u32>>,
}

/// A region's simulated Redis Cluster.
#[derive(Debug)]
pub(super) struct Cluster {
    shards: Vec<Shard>,
    latency: Latency,
    timeout: Duration,
    clock: Arc<ManualClock>,
    start: u64,
    recorder: Arc<Recorder>,
    /// Calls per rule.
    by_rule: Mutex<HashMap<String, u64, foldhash::fast::FixedState>>,
}

impl Cluster {
    /// `shards` shards answering with `latency`, failing after `timeout` when down;
    /// seconds are counted from `start` on `clock`.
    pub(super) fn new(
        shards: usize,
        latency: Latency,
        timeout: Duration,
        clock: Arc<ManualClock>,
        recorder: Arc<Recorder>,
    ) -> Self {
        Self {
            shards: (0..shards).map(|_| Shard::default()).collect(),
            latency,
            timeout,
            start: clock.now(),
            clock,
            recorder,
            by_rule: Mutex::default(),
        }
    }

    /// The shard an identity's keys live on: its hash slot (CRC16 mod 16384, as Redis
    /// Cluster hashes a key's `{hash tag}`), slots split evenly between the shards.
    pub(super) fn shard_of(&self, identity: &str) -> usize {
        let slot = usize::from(weir_store::hash_slot(identity.as_bytes()));
        slot * self.shards.len() / 16384
    }

    /// Stops (or restarts) shard `shard` answering.
    pub(super) fn set_down(&self, shard: usize, down: bool) {
        let shard = &self.shards[shard];
        let now = self.clock.now().max(1);
        if !down && shard.down_since.load(Ordering::Relaxed) != 0 {
            shard
                .refused_until
                .store(now + duration_ns(FOUND_BACK), Ordering::Relaxed);
        }
        let since = if down { now } else { 0 };
        shard.down_since.store(since, Ordering::Relaxed);
    }

    /// Per shard, calls per second of the run.
    pub(super) fn calls(&self) -> Vec<Vec<u32>> {
        self.shards.iter().map(|s| s.calls.lock().clone()).collect()
    }

    /// Calls per rule (by name).
    pub(super) fn calls_by_rule(&self) -> HashMap<String, u64> {
        self.by_rule
            .lock()
            .iter()
            .map(|(rule, &n)| (rule.clone(), n))
            .collect()
    }

    /// Drops the keys that hold nothing (full again, no lease record, no share record
    /// that must live on): what Redis's expiry does.
    pub(super) fn sweep(&self) {
        let now = self.clock.now();
        for shard in &self.shards {
            shard.keys.lock().retain(|_, e| {
                let live_until = e.state.as_ref().map_or(0, State::live_until);
                let mut state = e.state.clone();
                weir_core::check(&e.policy, &mut state, now, 0);
                state.is_some() || !e.leases.is_empty() || live_until > now
            });
        }
    }

    /// Runs `update` on the state stored as `name` (on the shard of `key`'s identity,
    /// counted as a call for `key`'s rule) under `policy`, now.
    fn update<T>(
        &self,
        key: Key<'_>,
        name: String,
        policy: &Policy,
        update: impl FnOnce(&mut Option<State>, u64) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let shard = self.call(std::iter::once(key))?;
        let now = self.clock.now();
        let mut keys = shard.keys.lock();
        let entry = keys.entry(name).or_insert_with(|| Entry {
            policy: *policy,
            state: None,
            leases: Leases::default(),
        });
        entry.policy = *policy;
        update(&mut entry.state, now)
    }

    /// A call for the rules of `keys` (one call, counted for each rule it carries) on
    /// the shard of the first key's identity: counted, its latency added to the
    /// request waiting; the shard, or the timeout when it is down.
    fn call<'k>(&self, mut keys: impl Iterator<Item = Key<'k>>) -> Result<&Shard, StoreError> {
        let Some(first) = keys.next() else {
            return Err(StoreError::Protocol("a call with no key".into()));
        };
        let shard = &self.shards[self.shard_of(first.identity)];
        let down_since = shard.down_since.load(Ordering::Relaxed);
        let now = self.clock.now();
        let found_lost =
            down_since != 0 && now.saturating_sub(down_since) >= 2 * duration_ns(self.timeout);
        if found_lost || now < shard.refused_until.load(Ordering::Relaxed) {
            return Err(StoreError::SlotLost(weir_store::hash_slot(
                first.identity.as_bytes(),
            )));
        }
        {
            let mut by_rule = self.by_rule.lock();
            let mut rules: Vec<&str> = std::iter::once(first.rule)
                .chain(keys.map(|k| k.rule))
                .collect();
            rules.sort_unstable();
            rules.dedup();
            for rule in rules {
                match by_rule.get_mut(rule) {
                    Some(calls) => *calls += 1,
                    None => {
                        by_rule.insert(rule.to_owned(), 1);
                    }
                }
            }
        }
        let second = (now.saturating_sub(self.start) / 1_000_000_000) as usize;
        {
            let mut calls = shard.calls.lock();
            if calls.len() <= second {
                calls.resize(second + 1, 0);
            }
            calls[second] += 1;
        }
        let latency = self.recorder.call(&self.latency);
        if down_since != 0 {
            if latency.is_some() {
                self.recorder.add(duration_ns(self.timeout));
            }
            return Err(StoreError::Timeout(self.timeout));
        }
        if let Some(latency) = latency {
            self.recorder.add(latency);
        }
        Ok(shard)
    }

    /// Checks (`commit`) or reads `checks` all or nothing on the shard of the first
    /// check's identity (the scenario's rules key each request on one identity).
    fn run(&self, checks: &[Check<'_>], commit: bool) -> Result<Vec<Decision>, StoreError> {
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let shard = self.call(checks.iter().map(|c| c.key))?;
        let now = self.clock.now();
        let mut keys = shard.keys.lock();
        let mut scratch: Vec<(String, Option<State>)> = Vec::with_capacity(checks.len());
        let mut decisions = Vec::with_capacity(checks.len());
        for check in checks {
            let name = key_name(check.key);
            let mut state = match scratch.iter().rev().find(|(k, _)| *k == name) {
                Some((_, state)) => state.clone(),
                None => keys.get(&name).and_then(|e| e.state.clone()),
            };
            let cost = if commit { check.cost } else { 0 };
            decisions.push(weir_core::check(check.policy, &mut state, now, cost));
            scratch.push((name, state));
        }
        if !decisions.iter().all(|d| d.allowed) {
            // Nothing consumed: the checks that passed report the state as it was.
            for (check, decision) in checks.iter().zip(decisions.iter_mut()) {
                if decision.allowed {
                    let mut state = keys.get(&key_name(check.key)).and_then(|e| e.state.clone());
                    *decision = weir_core::check(check.policy, &mut state, now, 0);
                }
            }
            return Ok(decisions);
        }
        if commit {
            for ((name, state), check) in scratch.into_iter().zip(checks) {
                match keys.get_mut(&name) {
                    Some(entry) => {
                        entry.policy = *check.policy;
                        entry.state = state;
                    }
                    None if state.is_some() => {
                        let entry = Entry {
                            policy: *check.policy,
                            state,
                            leases: Leases::default(),
                        };
                        keys.insert(name, entry);
                    }
                    None => {}
                }
            }
        }
        Ok(decisions)
    }
}

/// The key of a rule's state for an identity (a rule name holds no `:`).
fn key_name(key: Key<'_>) -> String {
    format!("{}:{}", key.rule, key.identity)
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Every call does its work when polled, as a Redis call does: a call the breaker
/// refuses (it drops the future unpolled) never reaches the shard.
impl Store for Cluster {
    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(async move { self.run(checks, true) })
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(async move { self.run(checks, false) })
    }

    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            checks.first().map_or(Ok(()), |_| {
                let shard = self.call(checks.iter().map(|c| c.key))?;
                let now = self.clock.now();
                let mut keys = shard.keys.lock();
                for check in checks {
                    if let Some(entry) = keys.get_mut(&key_name(check.key)) {
                        weir_core::refund(check.policy, &mut entry.state, now, check.cost);
                    }
                }
                Ok(())
            })
        })
    }

    fn reset<'a>(&'a self, key: Key<'a>, _policy: &'a Policy) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.call(std::iter::once(key)).map(|shard| {
                shard.keys.lock().remove(&key_name(key));
            })
        })
    }
}

/// No slots: the simulation does not hold requests in flight (a `concurrency` rule's
/// take fails, `StoreError::NoSlots`).
impl weir_store::SlotStore for Cluster {}

impl LeaseStore for Cluster {
    fn take<'a>(&'a self, key: Key<'a>, policy: &'a Policy, take: Take) -> StoreFuture<'a, Grant> {
        Box::pin(async move {
            (|| {
                let shard = self.call(std::iter::once(key))?;
                let now = self.clock.now();
                let mut keys = shard.keys.lock();
                let entry = keys.entry(key_name(key)).or_insert_with(|| Entry {
                    policy: *policy,
                    state: None,
                    leases: Leases::default(),
                });
                entry.policy = *policy;
                let grant =
                    weir_core::take(policy, &mut entry.state, &mut entry.leases, now, &take)?;
                Ok(grant)
            })()
        })
    }

    fn give_back<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        lease: LeaseId,
        unspent: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            (|| {
                let shard = self.call(std::iter::once(key))?;
                let now = self.clock.now();
                let mut keys = shard.keys.lock();
                match keys.get_mut(&key_name(key)) {
                    Some(entry) => Ok(weir_core::give_back(
                        policy,
                        &mut entry.state,
                        &mut entry.leases,
                        now,
                        lease,
                        unspent,
                    )?),
                    None => Ok(false),
                }
            })()
        })
    }
}

impl ShareStore for Cluster {
    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: Report,
    ) -> StoreFuture<'a, Option<Claim>> {
        Box::pin(async move {
            self.update(key, key_name(key), policy, |state, now| {
                Ok(weir_core::report_share(policy, state, now, &report)?)
            })
        })
    }

    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.update(key, key_name(key), policy, |state, now| {
                Ok(weir_core::apply_share(
                    policy, state, now, seq, grant, hold,
                )?)
            })
        })
    }

    /// Home's records live beside the key, under the rule's name and `:home`.
    fn renew_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        renewal: Renewal,
    ) -> StoreFuture<'a, Option<u64>> {
        let name = format!("{}:home:{}", key.rule, key.identity);
        Box::pin(async move {
            self.update(key, name, policy, |state, now| {
                Ok(weir_core::renew_share(policy, state, now, &renewal)?)
            })
        })
    }
}
