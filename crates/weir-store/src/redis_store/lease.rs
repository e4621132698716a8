//! Token leases on Redis: a take and a give-back, each one atomic call of `lease.lua`
//! (the driver's modes 4 and 5) on the key's state and its lease records.
//!
//! The records live in a hash beside the state, `<state key>:leases` (rule names cannot
//! contain `:`, so no rule's state is named so), in the same hash slot: both keys of a
//! call are on one node of a Redis Cluster, and one script reads and writes them
//! together. Times are the store's as for checks: the server's `TIME`, or the instances'
//! clock when configured so. The Lua decides as `weir_core::take` and
//! `weir_core::give_back` do (the lease conformance test replays the same sequences
//! through both).

use redis::Cmd;
use weir_core::{Closing, Grant, LeaseId, MAX_PERIOD, Policy, Take, leasable};

use super::args::decisions;
use super::dispatch::Call;
use super::params::ScriptPolicy;
use super::{RedisStore, keys};
use crate::{Check, Key, StoreError};

/// Values a take returns: a decision's five, then units, lease id, closed, the key's
/// take rate.
const TAKE_FIELDS: usize = 9;

/// What one lease call asks of the Lua.
pub(super) enum LeaseCall {
    /// `weir_core::take`, the hold in whole microseconds.
    Take {
        min: u64,
        max: u64,
        hold_us: u64,
        closing: Option<Closing>,
    },
    /// `weir_core::give_back`.
    GiveBack { lease: LeaseId, unspent: u64 },
}

impl LeaseCall {
    /// A take as the Lua counts it: the hold rounded up to whole microseconds (never
    /// shorter than asked), at most [`MAX_PERIOD`] as weir-core holds it.
    pub(super) fn take(take: &Take) -> Self {
        let micros = take.hold.min(MAX_PERIOD).as_nanos().div_ceil(1_000);
        LeaseCall::Take {
            min: take.min,
            max: take.max,
            hold_us: u64::try_from(micros).unwrap_or(u64::MAX),
            closing: take.closing,
        }
    }

    /// The general entry's arguments: the time, the mode, the policy's algorithm,
    /// capacity, L and P, then the call's own.
    pub(super) fn args(&self, command: &mut Cmd, now_us: Option<u64>, p: &ScriptPolicy) {
        match now_us {
            Some(now) => command.arg(now),
            None => command.arg(""),
        };
        let mode = match self {
            LeaseCall::Take { .. } => 4,
            LeaseCall::GiveBack { .. } => 5,
        };
        command
            .arg(mode)
            .arg(p.algorithm.name())
            .arg(p.capacity)
            .arg(p.ticks_per_us)
            .arg(p.ticks_per_unit);
        match self {
            LeaseCall::Take {
                min,
                max,
                hold_us,
                closing,
            } => {
                command.arg(min).arg(max).arg(hold_us);
                match closing {
                    Some(c) => command.arg(c.lease.0).arg(c.unspent),
                    None => command.arg("").arg(0),
                };
            }
            LeaseCall::GiveBack { lease, unspent } => {
                command.arg(lease.0).arg(unspent);
            }
        }
    }
}

/// The Redis key of `key`'s lease records.
pub(super) fn records_key(state_key: &str) -> String {
    format!("{state_key}:leases")
}

impl RedisStore {
    /// Runs one lease call on `key`: its state and records keys, one script.
    async fn lease_call(
        &self,
        key: Key<'_>,
        policy: &Policy,
        call: &LeaseCall,
    ) -> Result<(Vec<i64>, ScriptPolicy), StoreError> {
        leasable(policy)?;
        let p = ScriptPolicy::new(policy)?;
        let state = keys::redis_key(&self.prefix, key, None);
        let records = records_key(&state);
        let keys = [state, records];
        let (values, _) = self
            .call(&keys, self.now_us(), &Call::Lease(&p, call))
            .await?;
        Ok((values, p))
    }

    /// [`LeaseStore::take`](crate::LeaseStore::take) on Redis.
    pub(super) async fn take_lease(
        &self,
        key: Key<'_>,
        policy: &Policy,
        take: &Take,
    ) -> Result<Grant, StoreError> {
        let (values, p) = self.lease_call(key, policy, &LeaseCall::take(take)).await?;
        if values.len() != TAKE_FIELDS {
            return Err(StoreError::Protocol(format!(
                "a take returned {} values",
                values.len()
            )));
        }
        let check = Check {
            key,
            policy,
            cost: take.min,
        };
        let decision = decisions(&values[..5], &[(check, p)])?
            .pop()
            .ok_or_else(|| StoreError::Protocol("a take returned no decision".into()))?;
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(Grant {
            lease: (values[6] > 0).then(|| LeaseId(count(values[6]))),
            units: count(values[5]),
            decision,
            closed: values[7] == 1,
            taken_rate: count(values[8]),
        })
    }

    /// [`LeaseStore::give_back`](crate::LeaseStore::give_back) on Redis.
    pub(super) async fn give_back_lease(
        &self,
        key: Key<'_>,
        policy: &Policy,
        lease: LeaseId,
        unspent: u64,
    ) -> Result<bool, StoreError> {
        let call = LeaseCall::GiveBack { lease, unspent };
        let (values, _) = self.lease_call(key, policy, &call).await?;
        match values[..] {
            [found] => Ok(found == 1),
            _ => Err(StoreError::Protocol(format!(
                "a give-back returned {} values",
                values.len()
            ))),
        }
    }
}

/// The hold a take asks for, as Redis counts it.
#[cfg(test)]
fn hold_us(hold: std::time::Duration) -> u64 {
    match LeaseCall::take(&Take {
        hold,
        ..Take::check(0)
    }) {
        LeaseCall::Take { hold_us, .. } => hold_us,
        LeaseCall::GiveBack { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn holds_round_up_to_whole_microseconds_and_stop_at_the_longest_period() {
        assert_eq!(hold_us(Duration::from_nanos(1)), 1);
        assert_eq!(hold_us(Duration::from_millis(250)), 250_000);
        assert_eq!(hold_us(Duration::MAX), MAX_PERIOD.as_micros() as u64);
    }

    #[test]
    fn records_share_the_state_key_hash_tag() {
        assert_eq!(records_key("weir:{u}:api"), "weir:{u}:api:leases");
    }
}
