//! Requests in flight on Redis (`algorithm: concurrency`): a slot is a lease with a
//! deadline, in a sorted set per key beside the key's state (`<state key>:slots`,
//! same hash slot), taken and renewed by `slots.lua` and released by `ZREM`.
//!
//! The store remembers the slots it holds and renews them (`renew`, a loop started
//! with the health loop) every third of their lease, so a slot lives while its
//! request does; a slot of an instance that died is dropped at the first take after
//! its deadline: at most `lease` after the instance's last renewal. A take waits at
//! most half the lease for its answer, so a request never starts on a slot that may
//! have expired (the model in crates/weir-lease-model checks both). Deadlines are on
//! Redis's clock (`TIME`), whatever the store's clock for checks, so that instances
//! whose clocks differ hold slots alike.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use super::{RedisStore, RedisTarget, classify, keys};
use crate::{Key, SlotTake, SlotsFree, StoreError};

/// The Lua of takes and renewals.
const SLOTS_LUA: &str = include_str!("lua/slots.lua");

/// How often the renewal loop looks for slots due (a third of their lease).
const RENEW_TICK: Duration = Duration::from_millis(50);

/// The slots this store holds, by Redis key: each id with its lease, and when the
/// key's slots were last renewed.
#[derive(Debug, Default)]
pub(super) struct Held {
    keys: parking_lot::Mutex<HashMap<String, HeldKey>>,
}

#[derive(Debug)]
struct HeldKey {
    ids: Vec<u64>,
    lease: Duration,
    renewed: Instant,
}

fn slots_key(prefix: &str, key: Key<'_>) -> String {
    let mut state = keys::redis_key(prefix, key, None);
    state.push_str(":slots");
    state
}

/// How long a take waits for its answer: half the lease, so that a request starts
/// with at least half its slot's lease ahead, time for its first renewal (due a third
/// of the lease after the take was sent) to land. A take answered later would start a
/// request whose slot may already have expired and been taken by another (found by
/// the model in crates/weir-lease-model, src/slots); it is refused as a timeout (the
/// rule's failure policy decides), and its slot given back ([`Unanswered`]).
fn take_wait(lease: Duration) -> Duration {
    lease / 2
}

fn millis(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A take sent whose answer has not come: if it ends otherwise (an error, a timeout,
/// the caller giving up and dropping the call), the script may have run all the same
/// and taken a slot no request holds, which would count against the key until its
/// lease ran out. Given back when dropped unanswered: `ZREM` in a task, on the same
/// connection, so after the take.
struct Unanswered {
    connection: Option<super::Connection>,
    names: Vec<String>,
    id: u64,
    timeout: Duration,
}

impl Unanswered {
    /// The take was answered: nothing to give back.
    fn answered(mut self) {
        self.connection = None;
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (names, id, timeout) = (std::mem::take(&mut self.names), self.id, self.timeout);
        runtime.spawn(async move {
            for name in names {
                let mut command = Cmd::new();
                command.arg("ZREM").arg(&name).arg(id);
                let failed = match super::send(connection.clone(), &command, timeout).await {
                    Ok(Ok(_)) => None,
                    Ok(Err(error)) => Some(classify(error)),
                    Err(error) => Some(error),
                };
                if let Some(error) = failed {
                    tracing::warn!(%error, "could not give back the slot of a take that was not answered; it expires with its lease");
                }
            }
        });
    }
}

impl RedisStore {
    /// [`SlotStore::take_slots`](crate::SlotStore::take_slots) on Redis: one script
    /// for keys of one identity (one hash slot), else one per key, in turn, the slots
    /// taken released again when a later key has none free.
    pub(super) async fn take_slots_on(
        &self,
        takes: &[SlotTake<'_>],
        id: u64,
        lease: Duration,
    ) -> Result<Vec<SlotsFree>, StoreError> {
        let one_slot = !matches!(self.config.target, RedisTarget::Cluster(_))
            || takes
                .iter()
                .all(|t| t.key.identity == takes[0].key.identity);
        if one_slot {
            return self.take_in_one(takes, id, lease).await;
        }
        let mut out = Vec::with_capacity(takes.len());
        for (i, take) in takes.iter().enumerate() {
            let found = self
                .take_in_one(std::slice::from_ref(take), id, lease)
                .await;
            let denied = found.as_ref().map_or(true, |f| !f[0].allowed);
            if denied {
                let taken: Vec<Key<'_>> = takes[..i].iter().map(|t| t.key).collect();
                if let Err(error) = self.release_slots_on(&taken, id).await {
                    tracing::warn!(%error, "could not release the slots of a request denied on another slot of the cluster; they expire with their lease");
                }
                let mut found = found?;
                let free = found.pop().map_or(0, |f| f.free);
                out.extend(takes[..i].iter().map(|t| SlotsFree {
                    allowed: false,
                    free: t.limit,
                }));
                out.push(SlotsFree {
                    allowed: false,
                    free,
                });
                out.extend(takes[i + 1..].iter().map(|t| SlotsFree {
                    allowed: false,
                    free: t.limit,
                }));
                return Ok(out);
            }
            out.extend(found?);
        }
        Ok(out)
    }

    async fn take_in_one(
        &self,
        takes: &[SlotTake<'_>],
        id: u64,
        lease: Duration,
    ) -> Result<Vec<SlotsFree>, StoreError> {
        let names: Vec<String> = takes
            .iter()
            .map(|t| slots_key(&self.prefix, t.key))
            .collect();
        for name in &names {
            self.refuse_lost(name)?;
        }
        let mut command = redis::cmd("EVAL");
        command.arg(SLOTS_LUA).arg(names.len());
        for name in &names {
            command.arg(name);
        }
        command.arg("take").arg(id).arg(millis(lease));
        for take in takes {
            command.arg(take.limit);
        }
        let sent = Instant::now();
        let within = take_wait(lease);
        let unanswered = Unanswered {
            connection: self.connection.load().as_deref().cloned(),
            names: names.clone(),
            id,
            timeout: self.timeout,
        };
        let Ok(reply) = tokio::time::timeout(within, self.query(&command)).await else {
            // Answered too late for a request to start on it (`unanswered` gives the
            // slot back if the take ran).
            return Err(StoreError::Timeout(within));
        };
        let reply = reply?.map_err(classify)?;
        let values: Vec<i64> = redis::from_redis_value(reply)
            .map_err(|e| StoreError::Protocol(format!("a slot take answered: {e}")))?;
        if values.len() != takes.len() + 1 {
            return Err(StoreError::Protocol(format!(
                "a slot take answered {} values",
                values.len()
            )));
        }
        unanswered.answered();
        let allowed = values[0] == 1;
        if allowed {
            let mut held = self.slots.keys.lock();
            for name in names {
                let entry = held.entry(name).or_insert_with(|| HeldKey {
                    ids: Vec::new(),
                    lease,
                    renewed: sent,
                });
                entry.ids.push(id);
                entry.lease = entry.lease.min(lease);
                // Renewals timed from when the take was sent: its slot's deadline is
                // a lease after the take ran, which came after.
                entry.renewed = entry.renewed.min(sent);
            }
        }
        Ok(values[1..]
            .iter()
            .map(|&free| SlotsFree {
                allowed,
                free: u64::try_from(free).unwrap_or(0),
            })
            .collect())
    }

    /// [`SlotStore::release_slots`](crate::SlotStore::release_slots) on Redis: no
    /// longer renewed, then `ZREM`ed.
    pub(super) async fn release_slots_on(
        &self,
        keys: &[Key<'_>],
        id: u64,
    ) -> Result<(), StoreError> {
        for &key in keys {
            let name = slots_key(&self.prefix, key);
            {
                let mut held = self.slots.keys.lock();
                if let Some(entry) = held.get_mut(&name) {
                    entry.ids.retain(|&h| h != id);
                    if entry.ids.is_empty() {
                        held.remove(&name);
                    }
                }
            }
            self.refuse_lost(&name)?;
            let mut command = Cmd::new();
            command.arg("ZREM").arg(&name).arg(id);
            self.query(&command).await?.map_err(classify)?;
        }
        Ok(())
    }

    /// Renews the slots due: those last renewed a third of their lease ago.
    async fn renew_due(&self) {
        let due: Vec<(String, Vec<u64>, Duration)> = {
            let mut held = self.slots.keys.lock();
            held.iter_mut()
                .filter(|(_, k)| k.renewed.elapsed() >= k.lease / 3)
                .map(|(name, k)| {
                    k.renewed = Instant::now();
                    (name.clone(), k.ids.clone(), k.lease)
                })
                .collect()
        };
        for (name, ids, lease) in due {
            let mut command = redis::cmd("EVAL");
            command
                .arg(SLOTS_LUA)
                .arg(1)
                .arg(&name)
                .arg("renew")
                .arg(millis(lease));
            for id in &ids {
                command.arg(id);
            }
            match self.query(&command).await {
                Ok(Ok(Value::Int(kept))) if usize::try_from(kept).ok() != Some(ids.len()) => {
                    tracing::warn!(key = %name, held = ids.len(), kept, "slots of requests in flight expired before they were renewed (Redis unreachable for longer than their lease?): those requests no longer count");
                }
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(error = %classify(error), "could not renew slots of requests in flight");
                }
                Err(error) => {
                    tracing::warn!(%error, "could not renew slots of requests in flight");
                }
            }
        }
    }
}

/// Renews the store's slots until the store is dropped.
pub(super) async fn renew(store: Weak<RedisStore>) {
    let mut every = tokio::time::interval(RENEW_TICK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(store) = store.upgrade() else { return };
        store.renew_due().await;
    }
}
