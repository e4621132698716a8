//! The global allow and deny lists (`lists:`, and the entries set at runtime) at the
//! Envoy door. Who calls is read from the request's entries: the client's address
//! from the entries keyed `envoy.caller.address` (Envoy's `remote_address` action),
//! the API key from those keyed `envoy.caller.api_key`, in any descriptor.
//!
//! A caller any of whose addresses or keys a deny list names is `OVER_LIMIT`, nothing
//! counted. A caller is allowed when an allow list names every address it sent (at
//! least one), or every API key: its descriptors are counted and reported as shadow
//! descriptors are (the statuses say what it would have cost), and the answer is
//! `OK`. So sending a second, listed value never moves a caller onto an allow list,
//! nor off a deny list. An address is read canonically (an IPv4-mapped IPv6 address
//! is the IPv4 one); a value that is no address matches no address block. A key is
//! matched as sent (the HTTP doors' normalisation of an identity is not applied).

use std::net::IpAddr;

use super::{DescriptorAnswer, Descriptors, EnvoyAsk};
use crate::engine::Engine;
use crate::engine::overrides::ListName;
use crate::metrics::ListKind;
use crate::request::canonical_ip;

/// What the lists say of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listed {
    /// Neither list names the caller: decided by the limits.
    Neither,
    /// Allowed: counted as shadow descriptors, answered `OK`.
    Allowed,
    /// Denied: `OVER_LIMIT`, nothing counted.
    Denied,
}

impl Engine {
    /// What the global lists say of the caller of `ask`.
    pub(super) fn envoy_listed(&self, limits: &Descriptors, ask: &EnvoyAsk<'_>) -> Listed {
        let configured = self.routing.lists.as_ref();
        let runtime = self.overrides.entries();
        if configured.is_none() && runtime.is_none() {
            return Listed::Neither;
        }
        let entries = || ask.descriptors.iter().flat_map(|d| d.entries.iter());
        let addresses: Vec<Option<IpAddr>> = entries()
            .filter(|(key, _)| *key == limits.caller_address)
            .map(|(_, value)| value.parse::<IpAddr>().ok().map(canonical_ip))
            .collect();
        let keys: Vec<&str> = match &limits.caller_api_key {
            Some(name) => entries()
                .filter(|(key, _)| key == name)
                .map(|(_, value)| *value)
                .collect(),
            None => Vec::new(),
        };
        let now = self.overrides.now_secs();
        let names = |list: ListName, address: Option<IpAddr>, key: Option<&str>| {
            let configured = configured.map(|lists| match list {
                ListName::Allow => &lists.allow,
                ListName::Deny => &lists.deny,
            });
            let by_config = configured.is_some_and(|l| {
                address.is_some_and(|ip| l.nets.iter().any(|net| net.contains(&ip)))
                    || key.is_some_and(|key| l.keys.contains(key))
            });
            by_config
                || runtime.as_ref().is_some_and(|e| match (address, key) {
                    (Some(ip), _) => e.matches(list, ip, None, now),
                    (None, Some(key)) => e.matches_key(list, key, now),
                    (None, None) => false,
                })
        };
        let address_on = |list, a: &Option<IpAddr>| a.is_some_and(|ip| names(list, Some(ip), None));
        let key_on = |list, key: &&str| names(list, None, Some(key));
        let denied = addresses.iter().any(|a| address_on(ListName::Deny, a))
            || keys.iter().any(|k| key_on(ListName::Deny, k));
        if denied {
            self.metrics.list_matched(ListKind::Deny, None);
            return Listed::Denied;
        }
        let every_address =
            !addresses.is_empty() && addresses.iter().all(|a| address_on(ListName::Allow, a));
        let every_key = !keys.is_empty() && keys.iter().all(|k| key_on(ListName::Allow, k));
        if every_address || every_key {
            self.metrics.list_matched(ListKind::Allow, None);
            return Listed::Allowed;
        }
        Listed::Neither
    }
}

/// The status of a descriptor of a denied caller: over, nothing remaining.
pub(super) fn denied_status() -> DescriptorAnswer {
    DescriptorAnswer {
        over_limit: true,
        ..DescriptorAnswer::no_limit()
    }
}
