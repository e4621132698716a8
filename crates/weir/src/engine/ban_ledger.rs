//! The bans in force, listed fleet-wide: on a shared store, the instance that starts a
//! ban records it in a ledger beside the limit state (a Redis sorted set per rule,
//! `bans:<rule>`, each key scored with its ban's end), and a listing on any instance
//! reads the ledgers of the rules with `on_limited`; lifting a ban removes it there
//! too. A listing reads at most [`MAX_LISTED_BANS`] bans per rule (the ledger answers
//! those that end last and how many there are, never a scan), and answers at most as
//! many in all, saying how many there were: the admin API's `truncated`.
//!
//! Nothing of this is on a request's path but the start of a ban (one more write, once
//! per ban): which keys are banned is still decided by the ban keys themselves
//! (`bans`), so a ledger that could not be written (logged) only leaves a ban out of
//! the listing. The ends are on the instances' clocks (to the millisecond), as every
//! decision on `clock: local` is. On a store in process, the bans are this instance's
//! and the listing is its cache of them.

use std::time::Duration;

use weir_store::StoreError;

use super::Engine;
use super::bans::BanView;

/// The most bans a listing answers (about 100 bytes each in JSON): past it, those
/// that end soonest are left out, and the listing says how many there were.
pub(super) const MAX_LISTED_BANS: usize = 1_000;

/// The bans in force, as a listing found them.
#[derive(Debug, Default)]
pub(crate) struct BanList {
    /// Those that end last, last first: at most [`MAX_LISTED_BANS`].
    pub bans: Vec<BanView>,
    /// How many are in force in all (more than `bans` holds when it was cut).
    pub total: u64,
}

/// The ledger of rule `rule`'s bans.
fn ledger(rule: &str) -> String {
    format!("bans:{rule}")
}

const NS_PER_MS: u64 = 1_000_000;

impl Engine {
    /// Records in the shared ledger that `identity` is banned under rule `rule` for
    /// `ban` from now (nothing on a store in process: the cache lists it).
    pub(super) async fn ledger_ban(&self, rule: &str, identity: &str, ban: Duration) {
        let Some(shared) = self.overrides.shared_store() else {
            return;
        };
        let now_ms = self.clock.now() / NS_PER_MS;
        let ban_ms = u64::try_from(ban.as_millis()).unwrap_or(u64::MAX);
        let ends_ms = now_ms.saturating_add(ban_ms);
        if let Err(error) = shared
            .ledger_add(&ledger(rule), identity, ends_ms, now_ms)
            .await
        {
            tracing::warn!(%error, "a ban could not be listed fleet-wide (it is enforced)");
        }
    }

    /// Removes `key`'s ban under rule `rule` from the shared ledger.
    pub(super) async fn unledger_ban(&self, rule: &str, key: &str) -> Result<(), StoreError> {
        match self.overrides.shared_store() {
            Some(shared) => shared.ledger_remove(&ledger(rule), key).await,
            None => Ok(()),
        }
    }

    /// The bans in force of the rule named `rule` (or of every rule): the fleet's on a
    /// shared store, else this instance's; those that end last first, at most
    /// [`MAX_LISTED_BANS`].
    pub(crate) async fn bans(&self, rule: Option<&str>) -> Result<BanList, StoreError> {
        let now = self.clock.now();
        let Some(shared) = self.overrides.shared_store() else {
            let bans = self.bans.list(rule, now);
            return Ok(cut(bans, None));
        };
        let now_ms = now / NS_PER_MS;
        let mut bans = Vec::new();
        let mut total = 0;
        // The rules with bans, and the Envoy descriptor limits with bans.
        let rules = self.routing.rules.iter().filter(|r| r.on_limited.is_some());
        let descriptors = self.envoy.iter().flat_map(|envoy| envoy.bans());
        let names = rules
            .map(|r| r.name.as_str())
            .chain(descriptors.map(|(name, _)| name.as_str()));
        for name in names.filter(|n| rule.is_none_or(|wanted| wanted == *n)) {
            let page = shared
                .ledger_read(&ledger(name), now_ms, MAX_LISTED_BANS)
                .await?;
            total += page.total;
            bans.extend(page.members.into_iter().map(|(key, ends_ms)| BanView {
                rule: name.to_owned(),
                key,
                left: Duration::from_millis(ends_ms.saturating_sub(now_ms)),
            }));
        }
        bans.sort_by(|a, b| b.left.cmp(&a.left).then_with(|| a.key.cmp(&b.key)));
        Ok(cut(bans, Some(total)))
    }
}

/// `bans` (sorted) cut to [`MAX_LISTED_BANS`], with their total (`None`: all of them).
fn cut(mut bans: Vec<BanView>, total: Option<u64>) -> BanList {
    let total = total.unwrap_or(bans.len() as u64);
    bans.truncate(MAX_LISTED_BANS);
    BanList { bans, total }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_cut_and_says_how_many_there_were() {
        let view = |i: usize| BanView {
            rule: "api".into(),
            key: i.to_string(),
            left: Duration::from_secs(1),
        };
        let all: Vec<BanView> = (0..MAX_LISTED_BANS + 5).map(view).collect();
        let list = cut(all, None);
        assert_eq!(list.bans.len(), MAX_LISTED_BANS);
        assert_eq!(list.total, MAX_LISTED_BANS as u64 + 5);
        let list = cut(vec![view(1)], Some(7));
        assert_eq!((list.bans.len(), list.total), (1, 7));
    }
}
