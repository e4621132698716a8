//! A request's settlement written at most once (`Store::settle_all`): one call of the
//! driver's `settle` per slot (per identity on a Redis Cluster, one on a single
//! server), each setting its id key only if absent and writing the refunds and charges
//! in the same step. A try whose answer was lost (a timeout, a dropped connection) may
//! have been written: sent again within `SETTLEMENTS_REMEMBERED`, it finds its id and
//! writes nothing. On a cluster each identity's part is remembered on its own, so a
//! settlement written in part is completed, never repeated.

use super::RedisStore;
use super::dispatch::Call;
use super::keys;
use super::params::ScriptPolicy;
use crate::{Check, Settled, StoreError};

impl RedisStore {
    /// Writes `refunds` then `charges` under settlement `id`, once.
    pub(super) async fn settle(
        &self,
        id: u128,
        refunds: &[Check<'_>],
        charges: &[Check<'_>],
    ) -> Result<Settled, StoreError> {
        let now_us = self.now_us();
        let counter_time = self.counter_time(now_us);
        let prepared = refunds
            .iter()
            .chain(charges)
            .map(|c| Ok((*c, self.script_policy(c.policy, counter_time)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        // One group on a single server; one per identity on a cluster (its keys share
        // the identity's slot).
        let cluster = matches!(self.config.target, super::RedisTarget::Cluster(_));
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, (check, _)) in prepared.iter().enumerate() {
            let same =
                |g: &Vec<usize>| !cluster || prepared[g[0]].0.key.identity == check.key.identity;
            match groups.iter_mut().find(|g| same(g)) {
                Some(group) => group.push(i),
                None => groups.push(vec![i]),
            }
        }
        let mut settled = Settled::Written;
        for group in groups {
            let part = self
                .settle_group(id, now_us, refunds.len(), &prepared, &group)
                .await?;
            if part == Settled::Repeated {
                settled = Settled::Repeated;
            }
        }
        Ok(settled)
    }

    /// One call of the driver's `settle` on the checks `group` of `prepared` (one slot),
    /// the refunds first.
    async fn settle_group(
        &self,
        id: u128,
        now_us: Option<u64>,
        refunds: usize,
        prepared: &[(Check<'_>, ScriptPolicy)],
        group: &[usize],
    ) -> Result<Settled, StoreError> {
        let checks: Vec<(Check<'_>, ScriptPolicy)> = group.iter().map(|&i| prepared[i]).collect();
        let group_refunds = group.iter().filter(|&&i| i < refunds).count();
        let mut keys: Vec<String> = checks
            .iter()
            .map(|(c, p)| keys::redis_key(&self.prefix, c.key, p.key_window()))
            .collect();
        let identity = checks[0].0.key.identity;
        keys.push(keys::settlement_key(&self.prefix, identity, id));
        let (reply, _) = self
            .call(&keys, now_us, &Call::Settle(group_refunds, &checks))
            .await?;
        match reply.first() {
            Some(1) => Ok(Settled::Written),
            Some(0) => Ok(Settled::Repeated),
            _ => Err(StoreError::Protocol(format!(
                "a settlement answered {reply:?}"
            ))),
        }
    }
}
