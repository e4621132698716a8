//! Adding and removing list entries at runtime: each entry read canonically as the
//! configuration's lists read theirs (an address block truncated, IPv4-mapped blocks
//! as their IPv4 block; a key normalised as the identity normalises it), so that two
//! spellings never make two entries; kept by the book as overrides are.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ipnet::IpNet;
use weir_store::RedisStore;

use super::backing::{KeepError, Kept, LISTS_TABLE, write_file};
use super::change::hidden;
use super::entries::Entries;
use super::{Backing, EntryKind, ListEntry, ListName, MAX_REASON_CHARS, Overrides};
use crate::engine::{CLIENT_IP, Engine, List, Normalize};
use crate::request::{canonical_net, normalize_email};

/// The longest entry read (an address block, or an API key), in bytes.
pub(crate) const MAX_ENTRY_BYTES: usize = 512;

/// The most list entries set at runtime in force at once (every request is matched
/// against each block): past it, a new one is refused.
pub(crate) const MAX_LIST_ENTRIES_AT_RUNTIME: usize = 10_000;

/// The identity API keys are read by when the configuration's list does not name one.
const DEFAULT_KEY_IDENTITY: &str = "api_key";

/// Why a list entry was not added or removed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    /// A field is wrong; nothing was stored.
    #[error("`{field}`: {message}")]
    Invalid {
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The entry to remove is the configuration's, not a runtime one.
    #[error(
        "the entry is in the configuration's `lists.{0}`: remove it there (only entries set at runtime are removed here)"
    )]
    Configured(&'static str),
    /// No runtime entry to remove.
    #[error("no runtime entry is set for this")]
    NotSet,
    /// Where entries are kept did not take the change; nothing changed.
    #[error(transparent)]
    Unavailable(#[from] KeepError),
}

fn invalid(field: &'static str, message: impl Into<String>) -> ListError {
    ListError::Invalid {
        field,
        message: message.into(),
    }
}

/// What a change did: the entry after (`None`: removed) and the one before.
#[derive(Debug, Clone)]
pub(crate) struct EntryChange {
    /// The entry in force before, if any.
    pub before: Option<ListEntry>,
    /// The entry in force after (`None`: removed).
    pub after: Option<ListEntry>,
}

/// `list` as the API names it.
pub(crate) fn list_name(text: &str) -> Result<ListName, ListError> {
    match text {
        "allow" => Ok(ListName::Allow),
        "deny" => Ok(ListName::Deny),
        _ => Err(invalid(
            "list",
            format!("`{}` is not a list: use allow or deny", text.escape_debug()),
        )),
    }
}

fn entry_kind(text: &str) -> Result<EntryKind, ListError> {
    match text {
        "client_ip" => Ok(EntryKind::ClientIp),
        "api_key" => Ok(EntryKind::ApiKey),
        _ => Err(invalid(
            "kind",
            format!(
                "`{}` is not a kind of entry: use client_ip or api_key",
                text.escape_debug()
            ),
        )),
    }
}

impl Engine {
    /// Adds `entry` (read canonically) to the runtime `list` as a `kind`, ending at
    /// `expires_at`; replaces a runtime entry of the same canonical form.
    pub(crate) async fn set_list_entry(
        &self,
        list: &str,
        kind: &str,
        entry: &str,
        reason: &str,
        expires_at: Option<u64>,
    ) -> Result<EntryChange, ListError> {
        let (list, kind, entry) = self.canonical_entry(list, kind, entry)?;
        let book = &self.overrides;
        let now = book.now_secs();
        if expires_at.is_some_and(|end| end <= now) {
            return Err(invalid("expires_at", "must be in the future"));
        }
        let reason = reason.trim();
        if reason.chars().count() > MAX_REASON_CHARS || reason.chars().any(hidden) {
            return Err(invalid(
                "reason",
                format!(
                    "at most {MAX_REASON_CHARS} characters, no control, invisible or direction-changing characters"
                ),
            ));
        }
        if book.get_entry(list, kind, &entry).is_none()
            && book.entry_list(None).len() >= MAX_LIST_ENTRIES_AT_RUNTIME
        {
            return Err(invalid(
                "entry",
                format!(
                    "{MAX_LIST_ENTRIES_AT_RUNTIME} list entries are set at runtime already: remove some first"
                ),
            ));
        }
        let after = ListEntry {
            list,
            kind,
            entry,
            reason: reason.to_owned(),
            expires_at,
            set_at: now,
        };
        let before = book.put_entry(after.clone()).await?;
        Ok(EntryChange {
            before,
            after: Some(after),
        })
    }

    /// Removes the runtime entry `entry` (read canonically) of `list`; an entry of the
    /// configuration's global list is refused (it is removed there).
    pub(crate) async fn delete_list_entry(
        &self,
        list: &str,
        kind: &str,
        entry: &str,
    ) -> Result<EntryChange, ListError> {
        let (list, kind, entry) = self.canonical_entry(list, kind, entry)?;
        if self.overrides.get_entry(list, kind, &entry).is_none() {
            return Err(if self.configured(list, kind, &entry) {
                ListError::Configured(list.as_str())
            } else {
                ListError::NotSet
            });
        }
        let before = self.overrides.remove_entry(list, kind, &entry).await?;
        Ok(EntryChange {
            before,
            after: None,
        })
    }

    /// The identity the API keys of `list` are read by: the configuration's global
    /// list's, else `api_key`.
    pub(crate) fn list_key_identity(&self, list: ListName) -> &str {
        self.routing
            .lists
            .as_ref()
            .and_then(|lists| config_list(lists, list).identity.as_deref())
            .unwrap_or(DEFAULT_KEY_IDENTITY)
    }

    /// The list, the kind and the entry, parsed and canonical.
    fn canonical_entry(
        &self,
        list: &str,
        kind: &str,
        entry: &str,
    ) -> Result<(ListName, EntryKind, String), ListError> {
        let list = list_name(list)?;
        let kind = entry_kind(kind)?;
        if entry.is_empty() || entry.len() > MAX_ENTRY_BYTES {
            return Err(invalid(
                "entry",
                format!("from 1 to {MAX_ENTRY_BYTES} bytes"),
            ));
        }
        if entry.chars().any(hidden) {
            return Err(invalid(
                "entry",
                "no control, invisible or direction-changing characters",
            ));
        }
        let entry = match kind {
            EntryKind::ClientIp => entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map(|net| canonical_net(net).trunc().to_string())
                .map_err(|_| {
                    invalid(
                        "entry",
                        format!(
                            "`{}` is not an IP address or CIDR block (percent-encode the `/`)",
                            entry.escape_debug()
                        ),
                    )
                })?,
            EntryKind::ApiKey => {
                let name = self.list_key_identity(list);
                let source = self
                    .routing
                    .identities
                    .get(name)
                    .filter(|_| name != CLIENT_IP)
                    .ok_or_else(|| {
                        invalid(
                            "kind",
                            format!(
                                "no identity is named `{name}` to read API keys by (see `identities:`; the lists' `identity`, default `{DEFAULT_KEY_IDENTITY}`)"
                            ),
                        )
                    })?;
                match source.normalize {
                    Normalize::None => entry.trim().to_owned(),
                    Normalize::Email => normalize_email(entry)
                        .map_err(|_| invalid("entry", "nothing but invisible characters"))?,
                }
            }
        };
        if entry.is_empty() {
            return Err(invalid("entry", "empty"));
        }
        Ok((list, kind, entry))
    }

    /// Whether the configuration's global `list` holds `entry` (canonical).
    fn configured(&self, list: ListName, kind: EntryKind, entry: &str) -> bool {
        let Some(lists) = &self.routing.lists else {
            return false;
        };
        let list = config_list(lists, list);
        match kind {
            EntryKind::ClientIp => entry
                .parse::<IpNet>()
                .is_ok_and(|net| list.nets.contains(&net)),
            EntryKind::ApiKey => list.keys.contains(entry),
        }
    }
}

fn config_list(lists: &crate::engine::Lists, list: ListName) -> &List {
    match list {
        ListName::Allow => &lists.allow,
        ListName::Deny => &lists.deny,
    }
}

impl Overrides {
    /// The runtime list entries requests match, when there are any.
    pub(crate) fn entries(&self) -> Option<Arc<Entries>> {
        if self.no_entries.load(Ordering::Acquire) {
            return None;
        }
        Some(self.entries.load_full())
    }

    /// Every runtime list entry in force (of `list` alone, if given), sorted.
    pub(crate) fn entry_list(&self, list: Option<ListName>) -> Vec<ListEntry> {
        let now = self.now_secs();
        let entries = self.entries.load();
        let mut all: Vec<ListEntry> = entries
            .by_field
            .values()
            .filter(|e| e.in_force(now) && list.is_none_or(|l| l == e.list))
            .cloned()
            .collect();
        all.sort_by(|a, b| (a.list, a.kind, &a.entry).cmp(&(b.list, b.kind, &b.entry)));
        all
    }

    /// The runtime entry in force for `entry` (canonical), if any.
    fn get_entry(&self, list: ListName, kind: EntryKind, entry: &str) -> Option<ListEntry> {
        let entries = self.entries.load();
        let found = entries.by_field.get(&ListEntry::field(list, kind, entry))?;
        found.in_force(self.now_secs()).then(|| found.clone())
    }

    /// Replaces the runtime entries with `records`.
    pub(super) fn replace_entries(&self, records: Vec<ListEntry>) {
        let entries = Entries::new(records);
        let none = entries.by_field.is_empty();
        self.entries.store(Arc::new(entries));
        self.no_entries.store(none, Ordering::Release);
    }

    /// Every runtime entry not yet expired (what the file keeps).
    pub(super) fn unexpired_entries(&self) -> Vec<ListEntry> {
        self.entry_list(None)
    }

    /// Reads the shared list table again when its version changed, pruning what
    /// expired there (the caller holds `writing`).
    pub(super) async fn poll_entries(&self, redis: &RedisStore) {
        let version = match redis.table_version(LISTS_TABLE).await {
            Ok(version) => version,
            Err(error) => {
                tracing::debug!(%error, "lists: the shared store did not answer a poll");
                return;
            }
        };
        if *self.entries_version.lock() == Some(version) {
            return;
        }
        let snapshot = match redis.table_read(LISTS_TABLE).await {
            Ok(snapshot) => snapshot,
            Err(error) => {
                tracing::warn!(%error, "lists: could not read the shared table");
                return;
            }
        };
        let now = self.now_secs();
        let mut records = Vec::with_capacity(snapshot.records.len());
        for (field, value) in &snapshot.records {
            let Some(entry) = ListEntry::from_record(field, value) else {
                continue;
            };
            if entry.in_force(now) {
                records.push(entry);
            } else {
                // Removed only if nobody set it again meanwhile.
                let _ = redis.table_remove(LISTS_TABLE, field, Some(value)).await;
            }
        }
        self.replace_entries(records);
        *self.entries_version.lock() = Some(snapshot.version);
    }

    /// Keeps `entry`; returns the runtime entry it replaced (in force).
    async fn put_entry(&self, entry: ListEntry) -> Result<Option<ListEntry>, KeepError> {
        self.change_entry(entry.list, entry.kind, &entry.entry.clone(), Some(entry))
            .await
    }

    /// Removes a runtime entry; returns it, if one was in force.
    async fn remove_entry(
        &self,
        list: ListName,
        kind: EntryKind,
        entry: &str,
    ) -> Result<Option<ListEntry>, KeepError> {
        self.change_entry(list, kind, entry, None).await
    }

    /// Sets (`Some`) or removes (`None`) the runtime entry of `list`, `kind`, `entry`
    /// where entries are kept, then in the snapshot.
    async fn change_entry(
        &self,
        list: ListName,
        kind: EntryKind,
        entry: &str,
        to: Option<ListEntry>,
    ) -> Result<Option<ListEntry>, KeepError> {
        let _one = self.writing.lock().await;
        let field = ListEntry::field(list, kind, entry);
        let before = match &self.backing {
            Backing::Shared(redis) => {
                let old = match &to {
                    Some(new) => redis.table_put(LISTS_TABLE, &field, &new.to_json()).await?,
                    None => redis.table_remove(LISTS_TABLE, &field, None).await?,
                };
                old.and_then(|value| ListEntry::from_record(&field, &value))
            }
            Backing::InProcess | Backing::File(_) => self.get_entry(list, kind, entry),
        };
        let mut all = self.unexpired_entries();
        all.retain(|e| (e.list, e.kind, e.entry.as_str()) != (list, kind, entry));
        all.extend(to);
        if let Backing::File(path) = &self.backing {
            let kept = Kept {
                overrides: self.unexpired(),
                lists: all.clone(),
            };
            write_file(path, &kept)?;
        }
        self.replace_entries(all);
        let now = self.now_secs();
        Ok(before.filter(|e| e.in_force(now)))
    }
}

/// Whether the runtime `list` of `entries` names the client at `ip`, or with the key
/// `key` reads (called only when there are entries, so that no key is read otherwise).
pub(crate) fn runtime_match(
    entries: &Entries,
    list: ListName,
    ip: IpAddr,
    key: impl FnOnce() -> Option<String>,
    now: u64,
) -> bool {
    if !entries.names_any(list) {
        return false;
    }
    if entries.matches(list, ip, None, now) {
        return true;
    }
    entries.names_keys(list) && key().is_some_and(|key| entries.matches(list, ip, Some(&key), now))
}
