//! List entries set at runtime: an address block or an API key added to the global
//! allow or deny list through the admin API. They are kept by the overrides book (the
//! same backing, file and shared-store poll), in a table of their own, and add to the
//! configuration's global lists (the union), whatever a reload changes.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::request::canonical_ip;

/// Which list an entry is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ListName {
    /// Skips every rule.
    Allow,
    /// Refused (403).
    Deny,
}

impl ListName {
    /// Its name in the API and the file.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ListName::Allow => "allow",
            ListName::Deny => "deny",
        }
    }
}

/// What an entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EntryKind {
    /// An address block (an address alone is its own block), canonical.
    ClientIp,
    /// An API key, as the identity the configuration's lists read keys by reads it.
    ApiKey,
}

impl EntryKind {
    /// Its name in the API and the file.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EntryKind::ClientIp => "client_ip",
            EntryKind::ApiKey => "api_key",
        }
    }
}

/// One entry set at runtime, as it is kept (in the file, in Redis).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListEntry {
    /// The list it is on.
    pub list: ListName,
    /// What it names.
    pub kind: EntryKind,
    /// The block (`203.0.113.0/24`) or the key, canonical.
    pub entry: String,
    /// Why it was set.
    pub reason: String,
    /// When it ends, in seconds since the Unix epoch; `None`: when it is deleted.
    pub expires_at: Option<u64>,
    /// When it was set, in seconds since the Unix epoch.
    pub set_at: u64,
}

impl ListEntry {
    /// Whether it is in force at `now` (seconds since the Unix epoch).
    pub(crate) fn in_force(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|end| now < end)
    }

    /// Its field in the shared table: one per (list, kind, entry).
    pub(crate) fn field(list: ListName, kind: EntryKind, entry: &str) -> String {
        format!("{}:{}:{entry}", list.as_str(), kind.as_str())
    }

    /// Whether its entry is as the API writes it: a block parsed, canonical and
    /// truncated (an API key is taken as it is).
    pub(crate) fn is_canonical(&self) -> bool {
        self.kind != EntryKind::ClientIp
            || self.entry.parse::<IpNet>().is_ok_and(|net| {
                crate::request::canonical_net(net).trunc().to_string() == self.entry
            })
    }

    fn own_field(&self) -> String {
        Self::field(self.list, self.kind, &self.entry)
    }

    /// A record of the shared table, read back: `None` (and logged) when it does not
    /// parse (written by a newer weir, or by hand) or names a block that does not.
    pub(crate) fn from_record(field: &str, value: &str) -> Option<Self> {
        let parsed = serde_json::from_str::<Self>(value)
            .ok()
            .filter(|e| e.own_field() == field)
            .filter(Self::is_canonical);
        if parsed.is_none() {
            tracing::warn!(
                field = %field.escape_debug(),
                "a list entry in the shared store does not parse; it is ignored"
            );
        }
        parsed
    }

    /// Its JSON text.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The runtime entries, by field, as requests match them.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    /// Every entry by its field (what the list and the file are made from).
    pub by_field: HashMap<String, ListEntry>,
    allow: Side,
    deny: Side,
}

/// The blocks and keys of one list, each with its expiry.
#[derive(Debug, Default)]
struct Side {
    nets: Vec<(IpNet, Option<u64>)>,
    keys: HashMap<String, Option<u64>>,
}

impl Entries {
    /// The entries of `records`, indexed for matching.
    pub(super) fn new(records: impl IntoIterator<Item = ListEntry>) -> Self {
        let mut entries = Self::default();
        for entry in records {
            let side = match entry.list {
                ListName::Allow => &mut entries.allow,
                ListName::Deny => &mut entries.deny,
            };
            match entry.kind {
                EntryKind::ClientIp => {
                    if let Ok(net) = entry.entry.parse::<IpNet>() {
                        side.nets.push((net, entry.expires_at));
                    }
                }
                EntryKind::ApiKey => {
                    side.keys.insert(entry.entry.clone(), entry.expires_at);
                }
            }
            entries.by_field.insert(entry.own_field(), entry);
        }
        entries
    }

    /// Whether `list` names the client at `ip` (or with the API key `key`) at `now`.
    pub(crate) fn matches(&self, list: ListName, ip: IpAddr, key: Option<&str>, now: u64) -> bool {
        let side = self.side(list);
        let live = |end: &Option<u64>| end.is_none_or(|end| now < end);
        let ip = canonical_ip(ip);
        side.nets
            .iter()
            .any(|(net, end)| live(end) && net.contains(&ip))
            || key.is_some_and(|key| side.keys.get(key).is_some_and(live))
    }

    /// Whether `list` names the API key `key` (at `now`), whatever the address.
    pub(crate) fn matches_key(&self, list: ListName, key: &str, now: u64) -> bool {
        let live = |end: &Option<u64>| end.is_none_or(|end| now < end);
        self.side(list).keys.get(key).is_some_and(live)
    }

    /// Whether `list` holds any entry (expired ones included).
    pub(crate) fn names_any(&self, list: ListName) -> bool {
        let side = self.side(list);
        !side.nets.is_empty() || !side.keys.is_empty()
    }

    /// Whether `list` holds any API key (expired ones included).
    pub(super) fn names_keys(&self, list: ListName) -> bool {
        !self.side(list).keys.is_empty()
    }

    fn side(&self, list: ListName) -> &Side {
        match list {
            ListName::Allow => &self.allow,
            ListName::Deny => &self.deny,
        }
    }
}
