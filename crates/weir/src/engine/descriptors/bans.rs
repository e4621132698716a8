//! Bans on Envoy descriptors (`x-weir: { on_limited }`): a named descriptor limit
//! that denies a descriptor's values `after` times within `within` bans them for
//! `ban`, as a rule's `on_limited` bans a key, on the same store keys
//! (`envoy/<name>/ban`, `envoy/<name>/denials`) and through the same cache, so that
//! `/admin/api/bans` lists and lifts them by the limit's name.
//!
//! The key banned is the descriptor's counter key (the domain and every entry, the
//! client's address among them: the configuration requires it) with the address as
//! the engine keys clients (an IPv4-mapped address as the IPv4 one, an IPv6 one as its
//! network of `client_ip.ipv6_prefix`, /64 by default), so a ban stops one client's
//! calls of that descriptor, whatever the other descriptors of its requests, and
//! neither another spelling of its address nor a neighbour in its network dodges it.
//! A banned descriptor is `OVER_LIMIT` until the ban's end (its `duration_until_reset`)
//! and charges nothing; with `all_or_nothing` it denies the request outright, the
//! others only looked at, as a zero limit does.

use std::borrow::Cow;
use std::net::IpAddr;
use std::time::Duration;

use weir_store::{Store, StoreError};

use super::should_rate_limit::identity;
use super::{
    CurrentLimit, DescriptorAnswer, DescriptorLimit, Descriptors, EnvoyAsk, PerDescriptor,
};
use crate::engine::{Engine, OnLimited, key};
use crate::request::ip_key;

/// A descriptor's limit, if one applies.
type Applied<'l> = Option<Cow<'l, DescriptorLimit>>;

/// The name and bans of a limit that bans (not in shadow mode: its denials are not
/// enforced, so neither are bans).
fn banning(limit: Option<&DescriptorLimit>) -> Option<(&str, &OnLimited)> {
    let limit = limit.filter(|l| !l.shadow_mode)?;
    Some((limit.name.as_deref()?, limit.on_limited.as_ref()?))
}

impl Engine {
    /// The key each descriptor's bans are kept under (empty for one whose limit has
    /// none): its counter's identity, the client's address keyed as the engine keys
    /// clients.
    pub(super) fn ban_keys(
        &self,
        limits: &Descriptors,
        ask: &EnvoyAsk<'_>,
        applied: &[Applied<'_>],
        shared: &[Vec<(usize, &str)>],
    ) -> PerDescriptor<String> {
        let prefix = self.routing.ipv6_prefix;
        ask.descriptors
            .iter()
            .zip(applied)
            .zip(shared)
            .map(|((asked, limit), shared)| {
                if banning(limit.as_deref()).is_none() {
                    return String::new();
                }
                let addresses: Vec<Option<String>> = asked
                    .entries
                    .iter()
                    .map(|(k, v)| {
                        let ip = v.parse::<IpAddr>().ok();
                        ip.filter(|_| *k == limits.caller_address)
                            .map(|ip| ip_key(ip, prefix))
                    })
                    .collect();
                let entries: Vec<(&str, &str)> = asked
                    .entries
                    .iter()
                    .zip(&addresses)
                    .map(|(&(k, v), keyed)| (k, keyed.as_deref().unwrap_or(v)))
                    .collect();
                key::stored(identity(ask.domain, &entries, shared))
            })
            .collect()
    }

    /// How long each descriptor is still banned (`None`: not banned, its limit has no
    /// bans, or the caller is `allowed` by a list), from the cache, else one probe per banning descriptor. A store that
    /// cannot answer follows the descriptor's failure policy: failing open, the local
    /// fallback's bans (those started while the store is out) are read; else the
    /// error (the call is `UNAVAILABLE`).
    pub(super) async fn descriptor_bans(
        &self,
        limits: &Descriptors,
        applied: &[Applied<'_>],
        keys: &[String],
        allowed: bool,
    ) -> Result<PerDescriptor<Option<Duration>>, StoreError> {
        let mut banned: PerDescriptor<Option<Duration>> = smallvec::smallvec![None; applied.len()];
        if allowed {
            return Ok(banned);
        }
        for (i, limit) in applied.iter().enumerate() {
            let Some((name, on)) = banning(limit.as_deref()) else {
                continue;
            };
            let left = match self
                .probe_ban(self.store.as_ref(), name, on, &keys[i])
                .await
            {
                Ok(left) => left,
                Err(error) => {
                    let open = limit
                        .as_deref()
                        .and_then(|l| l.fail_open)
                        .unwrap_or(limits.fail_open);
                    let fallback = self
                        .fallback_store()
                        .filter(|_| open && error.is_unavailable());
                    match fallback {
                        Some(fallback) => self.probe_ban(fallback, name, on, &keys[i]).await?,
                        None => return Err(error),
                    }
                }
            };
            if left.is_some() {
                self.metrics.ban_refused(name);
            }
            banned[i] = left;
        }
        Ok(banned)
    }

    /// Counts a denial toward a ban for each descriptor its own limits denied (not
    /// one already banned, not a look), on the store that decided.
    pub(super) async fn count_descriptor_denials(
        &self,
        store: &dyn Store,
        applied: &[Applied<'_>],
        over: impl Fn(usize) -> bool,
        keys: &[String],
    ) {
        for (i, limit) in applied.iter().enumerate() {
            if let Some((name, on)) = banning(limit.as_deref())
                && over(i)
            {
                self.count_denial(store, name, on, &keys[i]).await;
            }
        }
    }
}

/// The status of a descriptor banned for `left`: over the limit, nothing remaining,
/// until the ban's end.
pub(super) fn banned_status(limit: &DescriptorLimit, left: Duration) -> DescriptorAnswer {
    DescriptorAnswer {
        over_limit: true,
        limit: Some(CurrentLimit {
            name: limit.name.clone().unwrap_or_default(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
        }),
        remaining: 0,
        until_reset: Some(left),
    }
}
