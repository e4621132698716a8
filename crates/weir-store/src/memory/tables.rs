//! One rule's keys in one shard of the memory store: two hash tables of identities to
//! state, with expiry.
//!
//! Keys whose state is one word under a policy that packs (GCRA and the leaky bucket at
//! a whole number of nanoseconds per unit, `Policy::packs`) live in `words` (`words.rs`:
//! 32- or 48-byte entries), decided under the shard's *read* lock by one
//! compare-and-swap on the word ([`Tables::check_shared`]), so concurrent checks on one
//! key never wait for each other, and a denial writes nothing. Every other key lives in
//! `states` (64-byte entries), decided under the write lock. A key is in one table at
//! most; it moves when its policy changes.

use std::sync::atomic::Ordering;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use weir_core::{Decision, Policy, State, check, check_word};

use super::budget::KeyBudget;
use super::entry::{Entry, HashedKey};
use super::shard::{ShardFull, expiry, hash_identity};
use super::words::Words;

/// The keys of one rule whose hash falls in one shard, stored without the rule's name.
#[derive(Debug)]
pub(super) struct Tables {
    /// The rule.
    rule: Box<str>,
    /// Keys whose state is one word, kept there by a policy that packs.
    words: Words,
    /// Every other key.
    states: HashTable<Entry>,
}

impl Tables {
    /// No keys yet of `rule`.
    pub(super) fn new(rule: &str) -> Self {
        Self {
            rule: rule.into(),
            words: Words::default(),
            states: HashTable::new(),
        }
    }

    /// The rule whose keys these are.
    pub(super) fn rule(&self) -> &[u8] {
        self.rule.as_bytes()
    }

    /// Whether no key is held.
    pub(super) fn is_empty(&self) -> bool {
        self.words.len() == 0 && self.states.is_empty()
    }

    /// Decides one check of a key held as a word, by compare-and-swap: what
    /// [`Tables::check`] would decide, for callers holding only the read lock. `None`,
    /// having changed nothing, when that takes the write lock: the key is not held as a
    /// word, the policy does not pack, or the key is full again and must go.
    ///
    /// Each attempt decides on the word it read and is committed only if the word is
    /// still that one, so concurrent checks apply one after another, exactly as under a
    /// lock; a check that changes nothing (a denial, a peek) commits by its read.
    pub(super) fn check_shared(
        &self,
        key: HashedKey<'_>,
        policy: &Policy,
        cost: u64,
        now: u64,
    ) -> Option<Decision> {
        let word = self.words.find(key)?;
        let mut current = word.load(Ordering::Acquire);
        loop {
            let mut next = current;
            let decision = check_word(policy, &mut next, now, cost)?;
            if next == current {
                return Some(decision);
            }
            if next == 0 {
                return None;
            }
            match word.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(decision),
                Err(actual) => current = actual,
            }
        }
    }

    /// The key's state at `now` (`None` when absent or expired), cloned.
    pub(super) fn get(&self, key: HashedKey<'_>, now: u64) -> Option<State> {
        if let Some(word) = self.words.find(key) {
            return State::from_word(live(word.load(Ordering::Acquire), now));
        }
        self.states
            .find(key.hash, |e| key.is(&e.key))
            .filter(|e| e.expires_at > now)
            .and_then(|e| e.state.clone())
    }

    /// Whether the key has an entry, live or expired.
    pub(super) fn holds(&self, key: HashedKey<'_>) -> bool {
        self.words.find(key).is_some() || self.states.find(key.hash, |e| key.is(&e.key)).is_some()
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
        if let Ok(mut found) = self.states.find_entry(key.hash, |e| key.is(&e.key)) {
            let entry = found.get_mut();
            if entry.expires_at <= now {
                entry.state = None;
            }
            let decision = check(policy, &mut entry.state, now, cost);
            match entry.state.as_ref().map(|s| word_under(policy, s)) {
                None => {
                    found.remove();
                    budget.give_back(1);
                }
                Some(None) => entry.expires_at = kept_until(now, decision.reset_after, entry),
                Some(Some(word)) => {
                    found.remove();
                    self.words.insert(key, word, hasher);
                }
            }
            return Ok(decision);
        }
        if let Some(word) = self.words.find_mut(key) {
            let mut state = State::from_word(live(*word, now));
            let decision = check(policy, &mut state, now, cost);
            match state.map(|s| (word_under(policy, &s), s)) {
                Some((Some(next), _)) => *word = next,
                None => {
                    self.words.remove(key);
                    budget.give_back(1);
                }
                Some((None, state)) => {
                    self.words.remove(key);
                    let expires_at = expiry(now, decision.reset_after);
                    self.insert_state(key, state, expires_at, hasher);
                }
            }
            return Ok(decision);
        }
        let mut state = None;
        let decision = check(policy, &mut state, now, cost);
        if let Some(state) = state {
            if !budget.try_take(1) {
                return Err(ShardFull);
            }
            let expires_at = expiry(now, decision.reset_after).max(state.live_until());
            self.insert(key, state, expires_at, policy, hasher);
        }
        Ok(decision)
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
        let Some(state) = state else {
            self.remove(key, budget);
            return;
        };
        let expires_at = expires_at.max(state.live_until());
        let word = word_under(policy, &state);
        if let Ok(mut found) = self.states.find_entry(key.hash, |e| key.is(&e.key)) {
            match word {
                None => {
                    let entry = found.get_mut();
                    entry.state = Some(state);
                    entry.expires_at = expires_at;
                }
                Some(word) => {
                    found.remove();
                    self.words.insert(key, word, hasher);
                }
            }
        } else if let Some(held) = self.words.find_mut(key) {
            match word {
                Some(word) => *held = word,
                None => {
                    self.words.remove(key);
                    self.insert_state(key, state, expires_at, hasher);
                }
            }
        } else {
            self.insert(key, state, expires_at, policy, hasher);
        }
    }

    /// Removes the key.
    pub(super) fn remove(&mut self, key: HashedKey<'_>, budget: &KeyBudget) {
        if self.words.remove(key) {
            budget.give_back(1);
        } else if let Ok(found) = self.states.find_entry(key.hash, |e| key.is(&e.key)) {
            found.remove();
            budget.give_back(1);
        }
    }

    /// Drops every entry whose state is full again.
    pub(super) fn sweep(&mut self, now: u64, budget: &KeyBudget) {
        let before = self.states.len();
        self.states.retain(|e| e.expires_at > now);
        budget.give_back(self.words.sweep(now) + before - self.states.len());
    }

    /// Adds a key that is in neither table.
    fn insert(
        &mut self,
        key: HashedKey<'_>,
        state: State,
        expires_at: u64,
        policy: &Policy,
        hasher: &RandomState,
    ) {
        match word_under(policy, &state) {
            Some(word) => self.words.insert(key, word, hasher),
            None => self.insert_state(key, state, expires_at, hasher),
        }
    }

    /// Adds a key that is in neither table to `states`.
    fn insert_state(
        &mut self,
        key: HashedKey<'_>,
        state: State,
        expires_at: u64,
        hasher: &RandomState,
    ) {
        let entry = Entry {
            key: key.stored(),
            expires_at,
            state: Some(state),
        };
        self.states
            .insert_unique(key.hash, entry, |e| hash_identity(hasher, e.key.as_bytes()));
    }
}

/// When an entry decided at `now` may go: once its state is full again, and not before
/// the state says it must live (a region's share record, see `weir_core::State`).
fn kept_until(now: u64, reset_after: std::time::Duration, entry: &Entry) -> u64 {
    let live = entry.state.as_ref().map_or(0, State::live_until);
    expiry(now, reset_after).max(live)
}

/// The word `state` is kept as under `policy`: only a policy that packs keeps words,
/// so that a key whose policy does not pack is not moved back and forth.
fn word_under(policy: &Policy, state: &State) -> Option<u64> {
    state.word().filter(|_| policy.packs())
}

/// A word as of `now`: itself while live, 0 (no state) once expired.
fn live(word: u64, now: u64) -> u64 {
    if word > now { word } else { 0 }
}
