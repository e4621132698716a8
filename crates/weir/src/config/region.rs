//! The `region:` section: this instance's region, the other regions' stores, how often
//! the shares of global rules are rebalanced, and each region's floor; and a rule's
//! `scope`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;
use weir_store::{RedisClock, RedisStoreConfig, RedisTarget};

use super::ConfigError;
use super::period::Period;
use super::store::StoreConfig;
use crate::engine::RegionSpec;

/// The rebalance period when none is configured.
pub(super) const DEFAULT_REBALANCE: Duration = Duration::from_secs(2);
/// Each region's floor when none is configured: 2% of a global rule's limit.
pub(super) const DEFAULT_FLOOR: f64 = 0.02;
/// At least this: a Redis clock stepping by up to a quarter of the hold (three
/// rebalances) keeps the bound.
const MIN_REBALANCE: Duration = Duration::from_millis(500);
const MAX_REBALANCE: Duration = Duration::from_secs(60);

/// `region:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegion {
    name: Spanned<String>,
    #[serde(default)]
    peers: BTreeMap<String, Spanned<RawPeer>>,
    rebalance: Option<Spanned<Period>>,
    floor: Option<Spanned<f64>>,
}

/// A peer region's store: a Redis URL, or a Redis Cluster's seed nodes.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawPeer {
    Single(String),
    Cluster(Vec<String>),
}

/// A rule's `scope`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ScopeName {
    /// Each region enforces the whole limit on its own.
    #[default]
    Region,
    /// One limit across every region, each enforcing its share.
    Global,
}

/// Region names go into metric labels: a plain alphabet.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// Validates `region:` against the store (a region's instances share its store).
pub(super) fn region(
    raw: Option<&Spanned<RawRegion>>,
    store: &StoreConfig,
    file: &Path,
) -> Result<Option<RegionSpec>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let fail = |at, field: &str, message: String| {
        ConfigError::new(file, message)
            .at(at)
            .field(format!("region.{field}"))
    };
    let StoreConfig::Redis(local, _) = store else {
        let message = "a region's instances share its store: `region` needs store type redis or redis_cluster";
        return Err(ConfigError::new(file, message)
            .at(raw.referenced)
            .field("region"));
    };
    if local.clock == RedisClock::Local {
        let message = "`region` needs the store's clock to be Redis's (`clock: redis`, the default): shares are timed by each Redis server's own clock, never compared across regions, and an instance's clock would be";
        return Err(ConfigError::new(file, message)
            .at(raw.referenced)
            .field("region"));
    }
    let region = &raw.value;
    let name = region.name.value.clone();
    if !plain(&name) {
        return Err(fail(
            region.name.referenced,
            "name",
            "a region's name is 1 to 32 characters of A-Z, a-z, 0-9, `_` and `-`".into(),
        ));
    }
    let mut peers = Vec::new();
    for (peer, url) in &region.peers {
        if !plain(peer) || *peer == name {
            return Err(fail(
                url.referenced,
                &format!("peers.{peer}"),
                format!(
                    "peer `{}`: a name of 1 to 32 characters of A-Z, a-z, 0-9, `_` and `-`, not this region's own",
                    peer.escape_debug()
                ),
            ));
        }
        let urls = match &url.value {
            RawPeer::Single(url) => vec![url.clone()],
            RawPeer::Cluster(nodes) => nodes.clone(),
        };
        let bad = urls.is_empty()
            || urls.iter().any(|u| {
                !["redis://", "rediss://"]
                    .iter()
                    .any(|scheme| u.starts_with(scheme) && u.len() > scheme.len())
            });
        if bad {
            return Err(fail(
                url.referenced,
                &format!("peers.{peer}"),
                "a peer's store is a redis:// (or rediss://) URL, or a list of a cluster's nodes"
                    .into(),
            ));
        }
        let target = match &url.value {
            RawPeer::Single(url) => RedisTarget::Single(url.clone()),
            RawPeer::Cluster(nodes) => RedisTarget::Cluster(nodes.clone()),
        };
        let mut config = RedisStoreConfig {
            target,
            ..local.clone()
        };
        // The server name is the local store's certificate's: a peer's is checked
        // for its URL's host.
        if let Some(tls) = &mut config.access.tls {
            tls.server_name = None;
        }
        peers.push((peer.clone(), config));
    }
    if peers.len() + 1 > weir_core::MAX_REGIONS as usize {
        return Err(fail(
            raw.referenced,
            "peers",
            format!("at most {} regions", weir_core::MAX_REGIONS),
        ));
    }
    let rebalance = region
        .rebalance
        .as_ref()
        .map_or(DEFAULT_REBALANCE, |r| r.value.0);
    if !(MIN_REBALANCE..=MAX_REBALANCE).contains(&rebalance) {
        let at = region
            .rebalance
            .as_ref()
            .map_or(raw.referenced, |r| r.referenced);
        return Err(fail(
            at,
            "rebalance",
            "region.rebalance must be from 500ms to 60s".into(),
        ));
    }
    let regions = peers.len() as f64 + 1.0;
    let floor = region.floor.as_ref().map_or(DEFAULT_FLOOR, |f| f.value);
    if !(floor > 0.0 && floor * regions <= 1.0) {
        let at = region
            .floor
            .as_ref()
            .map_or(raw.referenced, |f| f.referenced);
        return Err(fail(
            at,
            "floor",
            format!(
                "region.floor is each region's fraction of a global limit, above 0 and at most 1/{regions} (every region has one)"
            ),
        ));
    }
    Ok(Some(RegionSpec {
        name,
        peers,
        rebalance,
        floor,
    }))
}

/// Whether `rule` (of `policy`) is global across regions, or why it cannot be: a
/// global rule needs a `region` section, a token bucket, no lease, and a limit of at
/// least one unit per region.
pub(super) fn scope(
    rule: &super::file::RawRule,
    policy: &weir_core::Policy,
    leased: bool,
    region: Option<&RegionSpec>,
) -> Result<bool, String> {
    let scope = rule.scope.as_ref().map_or(ScopeName::Region, |s| s.value);
    if scope == ScopeName::Region {
        return Ok(false);
    }
    let Some(region) = region else {
        return Err("scope: global needs a `region` section (this region and its peers)".into());
    };
    if leased {
        return Err(
            "a global rule is not leased: the region's share is already a lease of the limit"
                .into(),
        );
    }
    shareable(policy, region)?;
    Ok(true)
}

/// Whether `policy` (a global rule's, or a plan's custom limit of one) can be shared by
/// the regions of `region`: a floor of a unit at least per region, and a regional
/// policy Redis decides exactly.
pub(super) fn shareable(policy: &weir_core::Policy, region: &RegionSpec) -> Result<(), String> {
    let regions = region.regions();
    let floor = weir_store::region_floor(policy.limit(), regions, region.floor).ok_or_else(|| {
        format!(
            "a global limit needs at least one unit per region: {} is below the {regions} regions",
            policy.limit()
        )
    })?;
    let regional = policy.regional(floor, regions).map_err(|e| e.to_string())?;
    weir_store::check_redis_policy(&regional).map_err(|e| e.to_string())
}
