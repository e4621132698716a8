//! One shard of the memory store: the keys whose hash falls in it, in a pair of tables
//! per rule (`tables.rs`).
//!
//! Keys are stored without their rule's name, which the tables hold once: a key costs
//! what its identity does, and identities of up to 24 bytes stay inline. Rules are few
//! (a configuration's handful), so finding a rule's tables is a short scan.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use foldhash::fast::RandomState;
use weir_core::{Decision, Policy, State};

use super::budget::KeyBudget;
use super::entry::{HashedKey, same};
use super::tables::Tables;

/// Keys whose hash falls in this shard.
#[derive(Debug, Default)]
pub(super) struct Shard {
    rules: Vec<Tables>,
}

/// What a shard could not do.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ShardFull;

impl Shard {
    /// The tables of `rule`, if it has any key here.
    fn tables(&self, rule: &str) -> Option<&Tables> {
        self.rules.iter().find(|t| same(t.rule(), rule.as_bytes()))
    }

    /// The tables of `rule`, made if needed.
    fn tables_mut(&mut self, rule: &str) -> &mut Tables {
        match self
            .rules
            .iter()
            .position(|t| same(t.rule(), rule.as_bytes()))
        {
            Some(i) => &mut self.rules[i],
            None => {
                let i = self.rules.len();
                self.rules.push(Tables::new(rule));
                &mut self.rules[i]
            }
        }
    }

    /// [`Tables::check_shared`] on the key's rule: `None` when the check needs the
    /// write lock.
    pub(super) fn check_shared(
        &self,
        key: HashedKey<'_>,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Option<Decision> {
        self.tables(key.key.rule)?
            .check_shared(key, policy, cost, now)
    }

    /// The key's state at `now` (`None` when absent or expired), cloned.
    pub(super) fn get(&self, key: HashedKey<'_>, now: u64) -> Option<State> {
        self.tables(key.key.rule)?.get(key, now)
    }

    /// Whether the key has an entry, live or expired.
    pub(super) fn holds(&self, key: HashedKey<'_>) -> bool {
        self.tables(key.key.rule).is_some_and(|t| t.holds(key))
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
        self.tables_mut(key.key.rule)
            .check(key, policy, cost, now, budget, hasher)
    }

    /// Stores `state` for the key under `policy` (removing the key when `None`). Room
    /// for a new key must have been taken from `budget` already.
    pub(super) fn put(
        &mut self,
        key: HashedKey<'_>,
        state: Option<State>,
        expires_at: u64,
        policy: &Policy,
        budget: &KeyBudget,
        hasher: &RandomState,
    ) {
        self.tables_mut(key.key.rule)
            .put(key, state, expires_at, policy, budget, hasher);
    }

    /// Removes the key.
    pub(super) fn remove(&mut self, key: HashedKey<'_>, budget: &KeyBudget) {
        if let Some(i) = self
            .rules
            .iter()
            .position(|t| same(t.rule(), key.key.rule.as_bytes()))
        {
            self.rules[i].remove(key, budget);
        }
    }

    /// Drops every entry whose state is full again, and the tables of rules left with
    /// no key.
    pub(super) fn sweep(&mut self, now: u64, budget: &KeyBudget) {
        for tables in &mut self.rules {
            tables.sweep(now, budget);
        }
        self.rules.retain(|t| !t.is_empty());
    }
}

/// The hash of a key: of its identity alone. Each rule has its own tables, so keys of
/// different rules never meet in one; and all of an identity's keys share a shard, so
/// a request's layered limits on one caller take one lock.
pub(super) fn hash_identity(hasher: &RandomState, identity: &[u8]) -> u64 {
    let mut state = hasher.build_hasher();
    state.write(identity);
    state.finish()
}

/// When a state decided at `now` is full again.
pub(super) fn expiry(now: u64, reset_after: Duration) -> u64 {
    now.saturating_add(u64::try_from(reset_after.as_nanos()).unwrap_or(u64::MAX))
}
