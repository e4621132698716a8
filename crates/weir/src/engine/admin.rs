//! What the admin API asks of the engine: a key's state under a rule, and forgetting
//! it (unlocking a caller who was locked out).

use std::time::Duration;

use weir_store::{Check, Key, StoreError};

use super::{Engine, key};
use crate::metrics::StoreOp;

/// A key's state under a rule, read without counting anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyState {
    /// The key as the store holds it.
    pub key: String,
    /// The key's limit: the override in force, else the rule's (a caller's plan may
    /// give another).
    pub limit: u64,
    /// Units left now.
    pub remaining: u64,
    /// When the key is full again.
    pub reset_after: Duration,
    /// How long the lockout in force still lasts (none: not locked out).
    pub locked_for: Option<Duration>,
    /// Lockouts remembered (each makes the next one longer).
    pub lockouts: u64,
}

impl Engine {
    /// The state of `key` (as listed by the admin API, or a key as weir builds it:
    /// one longer than 128 bytes is looked up by its hash) under the rule named
    /// `rule`; `None` when there is no such rule.
    pub(crate) async fn inspect(
        &self,
        rule: &str,
        key: &str,
    ) -> Result<Option<KeyState>, StoreError> {
        let Some(named) = self.rule(rule) else {
            return Ok(None);
        };
        let key = key::stored(key.to_owned());
        let lockout = self
            .routing
            .rules
            .iter()
            .find(|r| r.name == rule)
            .and_then(|r| r.lockout.as_ref());
        let policy = self.overridden(rule, &key, &named.policy);
        let mut checks = vec![Check {
            key: Key {
                rule,
                identity: &key,
            },
            policy: &policy,
            cost: 0,
        }];
        if let Some(lockout) = lockout {
            for (rule, policy) in [
                (&lockout.in_force_rule, &lockout.probe),
                (&lockout.count_rule, &lockout.counter),
            ] {
                checks.push(Check {
                    key: Key {
                        rule,
                        identity: &key,
                    },
                    policy,
                    cost: 0,
                });
            }
        }
        let timer = self.metrics.store_timer(StoreOp::Admin, false);
        let decided = self.store.preview_all(&checks).await;
        timer.finish(decided.as_ref().err());
        let decisions = decided?;
        let state = decisions[0];
        let (locked_for, lockouts) = match (lockout, decisions.get(1), decisions.get(2)) {
            (Some(lockout), Some(in_force), Some(count)) => {
                let locked = in_force.remaining == 0 && !in_force.reset_after.is_zero();
                (
                    locked.then_some(in_force.reset_after),
                    lockout.counter.limit().saturating_sub(count.remaining),
                )
            }
            _ => (None, 0),
        };
        Ok(Some(KeyState {
            limit: policy.limit(),
            remaining: state.remaining,
            reset_after: state.reset_after,
            locked_for,
            lockouts,
            key,
        }))
    }

    /// Forgets `key`'s state under the rule named `rule`, its lockouts included: its
    /// next request starts with the full limit. `false` when there is no such rule.
    pub async fn reset_key(&self, rule: &str, key: &str) -> Result<bool, StoreError> {
        let Some(named) = self.rule(rule) else {
            return Ok(false);
        };
        let key = key::stored(key.to_owned());
        let policy = self.overridden(rule, &key, &named.policy);
        let mut rules = vec![(rule, &policy)];
        if let Some(lockout) = self
            .routing
            .rules
            .iter()
            .find(|r| r.name == rule)
            .and_then(|r| r.lockout.as_ref())
        {
            rules.push((&lockout.in_force_rule, &lockout.probe));
            rules.push((&lockout.count_rule, &lockout.counter));
        }
        let timer = self.metrics.store_timer(StoreOp::Admin, false);
        let mut result = Ok(());
        for (rule, policy) in rules {
            let reset = self
                .store
                .reset(
                    Key {
                        rule,
                        identity: &key,
                    },
                    policy,
                )
                .await;
            if reset.is_err() {
                result = reset;
                break;
            }
        }
        timer.finish(result.as_ref().err());
        result.map(|()| true)
    }
}
