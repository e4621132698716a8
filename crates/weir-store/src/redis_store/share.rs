//! Regional shares on Redis: a region's report and apply on its record of a key (the
//! key's state, decided by the driver's `regional` algorithm), and the renewal at the
//! key's home, each one atomic call of `share.lua` (the driver's modes 6, 7 and 8).
//!
//! Home's records live beside the state, `<state key>:home` (rule names cannot contain
//! `:`), in the same hash slot. Times are the store's as for checks; claim numbers are
//! times in microseconds, compared only with numbers from the same region's store.
//!
//! One rule beyond weir-core's: a Redis (a cluster node) that started less than a hold
//! ago grants no share (its `INFO` uptime, read in the script). Restarted without
//! persistence, it has lost the records of shares the regions may still enforce, and
//! granting them again would let two regions hold the same units; after a hold, every
//! such share has passed its deadline.

use std::time::Duration;

use redis::Cmd;
use weir_core::{Claim, Policy, Renewal, Report, ShareError};

use super::dispatch::Call;
use super::params::ScriptPolicy;
use super::{RedisStore, keys};
use crate::{Key, StoreError};

/// What one share call asks of the Lua.
pub(super) enum ShareCall {
    /// Step 1 on the region's record (mode 6).
    Report(Report),
    /// Step 3 on the region's record (mode 7).
    Apply {
        seq: u64,
        grant: u64,
        hold: Duration,
    },
    /// Step 2 on the home's records (mode 8).
    Renew(Renewal),
}

/// A duration in whole microseconds, rounded up.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

impl ShareCall {
    /// The general entry's arguments: the time, the mode, then the call's own.
    pub(super) fn args(&self, command: &mut Cmd, now_us: Option<u64>, p: &ScriptPolicy) {
        match now_us {
            Some(now) => command.arg(now),
            None => command.arg(""),
        };
        let floor = p.region_floor.unwrap_or(1);
        match self {
            ShareCall::Report(report) => {
                command
                    .arg(6)
                    .arg(p.limit)
                    .arg(p.capacity)
                    .arg(p.period_us)
                    .arg(floor)
                    .arg(report.offered)
                    .arg(micros(report.round))
                    .arg(u8::from(report.force))
                    .arg(micros(report.hold));
            }
            ShareCall::Apply { seq, grant, hold } => {
                command
                    .arg(7)
                    .arg(p.limit)
                    .arg(p.capacity)
                    .arg(p.period_us)
                    .arg(floor)
                    .arg(seq)
                    .arg(grant)
                    .arg(micros(*hold));
            }
            ShareCall::Renew(r) => {
                command
                    .arg(8)
                    .arg(p.limit)
                    .arg(floor)
                    .arg(r.region)
                    .arg(r.regions)
                    .arg(r.demand)
                    .arg(r.enforcing)
                    .arg(r.seq)
                    .arg(micros(r.hold));
            }
        }
    }
}

/// The Redis key of home's records of `key`.
fn home_key(state_key: &str) -> String {
    format!("{state_key}:home")
}

impl RedisStore {
    /// Runs one share call on `key` (its state, or its home records for a renewal).
    async fn share_call(
        &self,
        key: Key<'_>,
        policy: &Policy,
        call: &ShareCall,
    ) -> Result<Vec<i64>, StoreError> {
        if policy.region_floor().is_none() {
            return Err(ShareError::NotRegional.into());
        }
        let p = ScriptPolicy::new(policy)?;
        let state = keys::redis_key(&self.prefix, key, None);
        let key = match call {
            ShareCall::Renew(_) => home_key(&state),
            _ => state,
        };
        let (values, _) = self
            .call(&[key], self.now_us(), &Call::Share(&p, call))
            .await?;
        Ok(values)
    }

    /// [`ShareStore::report_share`](crate::ShareStore::report_share) on Redis.
    pub(super) async fn report_share_call(
        &self,
        key: Key<'_>,
        policy: &Policy,
        report: Report,
    ) -> Result<Option<Claim>, StoreError> {
        let values = self
            .share_call(key, policy, &ShareCall::Report(report))
            .await?;
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        match values[..] {
            [0] => Ok(None),
            [1, seq, demand, enforcing] => Ok(Some(Claim {
                seq: count(seq),
                demand: count(demand),
                enforcing: count(enforcing),
            })),
            _ => Err(protocol("a report", &values)),
        }
    }

    /// [`ShareStore::apply_share`](crate::ShareStore::apply_share) on Redis.
    pub(super) async fn apply_share_call(
        &self,
        key: Key<'_>,
        policy: &Policy,
        seq: u64,
        grant: u64,
        hold: Duration,
    ) -> Result<bool, StoreError> {
        let call = ShareCall::Apply { seq, grant, hold };
        let values = self.share_call(key, policy, &call).await?;
        match values[..] {
            [applied] => Ok(applied == 1),
            _ => Err(protocol("an apply", &values)),
        }
    }

    /// [`ShareStore::renew_share`](crate::ShareStore::renew_share) on Redis.
    pub(super) async fn renew_share_call(
        &self,
        key: Key<'_>,
        policy: &Policy,
        renewal: Renewal,
    ) -> Result<Option<u64>, StoreError> {
        if renewal.regions > weir_core::MAX_REGIONS || renewal.region >= renewal.regions {
            return Err(ShareError::NoSuchRegion {
                region: renewal.region,
                regions: renewal.regions,
            }
            .into());
        }
        let values = self
            .share_call(key, policy, &ShareCall::Renew(renewal))
            .await?;
        match values[..] {
            [0] => Ok(None),
            [1, granted] => Ok(Some(u64::try_from(granted).unwrap_or(0))),
            _ => Err(protocol("a renewal", &values)),
        }
    }
}

fn protocol(what: &str, values: &[i64]) -> StoreError {
    StoreError::Protocol(format!("{what} returned {} values", values.len()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn home_records_share_the_state_key_hash_tag() {
        assert_eq!(super::home_key("weir:{u}:api"), "weir:{u}:api:home");
    }
}
