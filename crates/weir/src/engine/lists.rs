//! Allow and deny lists (`lists:`, global and per rule): clients by address block and
//! by API key. A client on a deny list is refused (403) before any rule counts it; one
//! on an allow list skips the rules (every rule for the global list, the rule for a
//! rule's), which are still counted as shadow rules, so that its answer reports what
//! it would have cost. A deny list wins over an allow list.
//!
//! Addresses are matched canonically: an IPv4-mapped IPv6 address (`::ffff:203.0.113.9`)
//! is the IPv4 address it stands for, and list entries were made canonical at load
//! (`::ffff:203.0.113.0/120` is `203.0.113.0/24`), so no spelling of an address slips
//! past a list. The address is the one the `client_ip` section reads (forwarding
//! headers believed only from trusted proxies). API keys are read as the engine reads
//! the identity the list names (its normalisation applied), and a key sent twice is
//! refused, never matched by either copy.
//!
//! Entries set at runtime through the admin API (kept by the overrides book) add to
//! the global lists: a runtime deny entry refuses as a configured one does, a runtime
//! allow entry lets the client skip every rule. Their API keys are read by the
//! identity the configuration's global list names (default `api_key`).

use std::collections::HashSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::Engine;
use super::applied::Applied;
use super::key::Identities;
use super::overrides::{ListName, runtime_match};
use crate::metrics::ListKind;
use crate::request::{Facts, Refused, canonical_ip};

/// An allow list and a deny list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lists {
    /// Clients who skip the rules.
    pub allow: List,
    /// Clients refused.
    pub deny: List,
}

/// Clients by address block, and by API key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct List {
    /// Address blocks, canonical (no IPv4-mapped IPv6 block).
    pub nets: Vec<IpNet>,
    /// API keys, as the identity `identity` reads them.
    pub keys: HashSet<String>,
    /// The identity the keys are read by (set when `keys` is not empty).
    pub identity: Option<String>,
}

impl List {
    /// Whether the client at `ip` (or with the API key `identities` read) is listed.
    fn matches(&self, ip: IpAddr, identities: &Identities<'_, '_>) -> bool {
        let ip = canonical_ip(ip);
        if self.nets.iter().any(|net| net.contains(&ip)) {
            return true;
        }
        match &self.identity {
            Some(name) if !self.keys.is_empty() => identities
                .get(name)
                .is_some_and(|key| self.keys.contains(&key)),
            _ => false,
        }
    }
}

impl List {
    /// Whether the list names no one.
    fn is_empty(&self) -> bool {
        self.nets.is_empty() && self.keys.is_empty()
    }
}

impl Engine {
    /// Whether a global deny list may refuse requests no rule routes (they are decided
    /// then, not passed on unread).
    pub(crate) fn denies_unrouted(&self) -> bool {
        self.routing
            .lists
            .as_ref()
            .is_some_and(|lists| !lists.deny.is_empty())
            || self
                .overrides
                .entries()
                .is_some_and(|entries| entries.names_any(ListName::Deny))
    }

    /// Whether the runtime `list` names the client.
    fn runtime_listed(&self, list: ListName, ip: IpAddr, identities: &Identities<'_, '_>) -> bool {
        let Some(entries) = self.overrides.entries() else {
            return false;
        };
        let name = self.list_key_identity(list);
        let now = self.overrides.now_secs();
        runtime_match(&entries, list, ip, || identities.get(name), now)
    }

    /// Applies the global lists and the rules' lists to `applied`: `Err` when a deny
    /// list names the client; a rule an allow list lets the client skip is marked
    /// `listed` (decided as a shadow rule).
    pub(super) fn listed(
        &self,
        identities: &Identities<'_, '_>,
        facts: &Facts<'_>,
        applied: &mut [Applied<'_>],
    ) -> Result<(), Refused> {
        let ip = facts.client_ip;
        let mut everything = false;
        if let Some(lists) = &self.routing.lists {
            if lists.deny.matches(ip, identities) {
                self.metrics.list_matched(ListKind::Deny, None);
                return Err(Refused::listed(None));
            }
            everything = lists.allow.matches(ip, identities);
        }
        if self.runtime_listed(ListName::Deny, ip, identities) {
            self.metrics.list_matched(ListKind::Deny, None);
            return Err(Refused::listed(None));
        }
        everything = everything || self.runtime_listed(ListName::Allow, ip, identities);
        for a in applied.iter() {
            if let Some(lists) = &a.rule.lists
                && lists.deny.matches(ip, identities)
            {
                self.metrics
                    .list_matched(ListKind::Deny, Some(&a.rule.name));
                return Err(Refused::listed(Some(&a.rule.name)));
            }
        }
        if everything {
            self.metrics.list_matched(ListKind::Allow, None);
        }
        for a in applied.iter_mut() {
            let own = a
                .rule
                .lists
                .as_ref()
                .is_some_and(|lists| lists.allow.matches(ip, identities));
            if own && !everything {
                self.metrics
                    .list_matched(ListKind::Allow, Some(&a.rule.name));
            }
            a.listed = everything || own;
        }
        Ok(())
    }
}
