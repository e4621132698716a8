//! Overrides set at runtime: a limit for one key of one rule, set through the admin
//! API, that wins over the key's plan and the rule's limit until it expires or is
//! deleted.
//!
//! The order, highest first: **override > plans file custom limit > plan > rule**. An
//! override changes the limit of a rule that applies to the caller; it never makes a
//! rule apply (a rule for other plans stays out of the way).
//!
//! The [`Overrides`] book is the process's, made at start and kept by every engine a
//! reload builds, so an override outlives reloads. Where it is kept ([`Backing`]):
//! on a shared store, in a Redis hash beside the limit state (every instance polls its
//! version every [`POLL_EVERY`] and reads it again when it changes, so an override set
//! on one instance applies on all within about a second, and survives restarts); on
//! the memory store, in this process and, with `overrides.file`, in a JSON file
//! written atomically (a temporary file renamed over it) and read at start.
//!
//! Requests look overrides up in a snapshot swapped whole (one atomic load, and no
//! lookup at all while there is none), at the engine's clock's wall time, to the
//! second: an override whose `expires_at` has passed is ignored at once, wherever it
//! is still stored (and pruned at the next write or poll).
//!
//! The book keeps the list entries set at runtime too ([`ListEntry`], `entries.rs`):
//! the same backing, in a table (and a section of the file) of their own.

mod backing;
mod canonical;
mod change;
mod entries;
mod listing;
mod record;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use weir_core::{Clock, Policy};

pub(crate) use self::backing::{Backing, Kept, read_file};
pub(crate) use self::change::{MAX_REASON_CHARS, OverrideError, OverrideRequest, Replaced};
use self::entries::Entries;
pub(crate) use self::entries::{EntryKind, ListEntry, ListName};
pub(crate) use self::listing::{EntryChange, ListError, list_name, runtime_match};
pub(crate) use self::record::{Override, Stored};

/// How often an instance on a shared store asks whether the overrides changed: with
/// the store's round trip, an override set on one instance applies on every other
/// within a second.
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(250);

/// The most overrides in force at once (each is looked up by the requests of its rule
/// and listed whole): past it, a new one is refused.
pub(crate) const MAX_OVERRIDES: usize = 10_000;

/// Every override, by rule and key.
type Table = HashMap<String, HashMap<String, Override>>;

/// The process's overrides: a snapshot requests read, and where they are kept.
pub(crate) struct Overrides {
    table: ArcSwap<Table>,
    /// Whether the table holds none (the requests' path skips the lookup).
    empty: AtomicBool,
    backing: Backing,
    /// One change at a time (a file is written whole).
    writing: tokio::sync::Mutex<()>,
    /// The version of the shared table the snapshot was read at.
    version: parking_lot::Mutex<Option<u64>>,
    /// The list entries set at runtime, swapped whole.
    entries: ArcSwap<Entries>,
    /// Whether there are none (the requests' path skips them).
    no_entries: AtomicBool,
    /// The version of the shared list table the entries were read at.
    entries_version: parking_lot::Mutex<Option<u64>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overrides")
            .field("backing", &self.backing)
            .finish_non_exhaustive()
    }
}

impl Overrides {
    /// A book kept in `backing`, read at `clock`'s wall time, holding `initial` (what
    /// the backing held at start).
    pub(crate) fn new(backing: Backing, initial: Kept, clock: Arc<dyn Clock>) -> Self {
        let book = Self {
            table: ArcSwap::from_pointee(Table::new()),
            empty: AtomicBool::new(true),
            backing,
            writing: tokio::sync::Mutex::new(()),
            version: parking_lot::Mutex::new(None),
            entries: ArcSwap::from_pointee(Entries::default()),
            no_entries: AtomicBool::new(true),
            entries_version: parking_lot::Mutex::new(None),
            clock,
        };
        book.replace(initial.overrides);
        book.replace_entries(initial.lists);
        book
    }

    /// A book in this process alone, holding nothing: what an engine has when no
    /// other book is given (tests, the tower layer, simulations).
    pub(crate) fn in_process(clock: Arc<dyn Clock>) -> Self {
        Self::new(Backing::InProcess, Kept::default(), clock)
    }

    /// The wall time in seconds that expiries are compared with.
    pub(crate) fn now_secs(&self) -> u64 {
        self.clock.wall_secs()
    }

    /// The policy of `rule` for `key` under the override in force, if there is one
    /// that `base` (the rule's policy) can take: the rule's algorithm with the
    /// override's limit, its period (else the rule's) and its burst.
    pub(crate) fn policy(&self, rule: &str, key: &str, base: &Policy) -> Option<Policy> {
        if self.empty.load(Ordering::Acquire) {
            return None;
        }
        let table = self.table.load();
        let found = table.get(rule)?.get(key)?;
        if !found.in_force(self.now_secs()) {
            return None;
        }
        found.policy(base).ok()
    }

    /// The override in force for `rule` and `key`.
    pub(crate) fn get(&self, rule: &str, key: &str) -> Option<Override> {
        let table = self.table.load();
        let found = table.get(rule)?.get(key)?;
        found.in_force(self.now_secs()).then(|| found.clone())
    }

    /// Every override in force (of `rule` alone, if given), sorted by rule and key.
    pub(crate) fn list(&self, rule: Option<&str>) -> Vec<Stored> {
        let now = self.now_secs();
        let table = self.table.load();
        let mut all: Vec<Stored> = table
            .iter()
            .filter(|(name, _)| rule.is_none_or(|r| r == name.as_str()))
            .flat_map(|(name, keys)| {
                keys.iter()
                    .filter(|(_, o)| o.in_force(now))
                    .map(|(key, o)| Stored {
                        rule: name.clone(),
                        key: key.clone(),
                        entry: o.clone(),
                    })
            })
            .collect();
        all.sort_by(|a, b| (&a.rule, &a.key).cmp(&(&b.rule, &b.key)));
        all
    }

    /// How many overrides are in force, per rule (for the metrics).
    pub(crate) fn in_force_by_rule(&self) -> Vec<(String, u64)> {
        let now = self.now_secs();
        let table = self.table.load();
        table
            .iter()
            .map(|(rule, keys)| {
                let n = keys.values().filter(|o| o.in_force(now)).count();
                (rule.clone(), n as u64)
            })
            .collect()
    }

    /// How many overrides are in force in all.
    fn count_in_force(&self) -> usize {
        self.in_force_by_rule()
            .iter()
            .map(|(_, n)| *n as usize)
            .sum()
    }

    /// Replaces the snapshot with `records`.
    fn replace(&self, records: Vec<Stored>) {
        let mut table = Table::new();
        for stored in records {
            table
                .entry(stored.rule)
                .or_default()
                .insert(stored.key, stored.entry);
        }
        let empty = table.is_empty();
        self.table.store(Arc::new(table));
        self.empty.store(empty, Ordering::Release);
    }

    /// The snapshot with one key changed (`None` removes it).
    fn change(&self, rule: &str, key: &str, entry: Option<Override>) {
        let mut table = Table::clone(&self.table.load());
        match entry {
            Some(entry) => {
                table
                    .entry(rule.to_owned())
                    .or_default()
                    .insert(key.to_owned(), entry);
            }
            None => {
                if let Some(keys) = table.get_mut(rule) {
                    keys.remove(key);
                    if keys.is_empty() {
                        table.remove(rule);
                    }
                }
            }
        }
        let empty = table.is_empty();
        self.table.store(Arc::new(table));
        self.empty.store(empty, Ordering::Release);
    }

    /// Every override in the snapshot, expired ones too (what a file is written from).
    fn all(&self) -> Vec<Stored> {
        let table = self.table.load();
        table
            .iter()
            .flat_map(|(rule, keys)| {
                keys.iter().map(|(key, entry)| Stored {
                    rule: rule.clone(),
                    key: key.clone(),
                    entry: entry.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
