//! The `store:` section: where limit state lives.

use std::path::Path;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};
use weir_store::{Credentials, MemoryStoreConfig, RedisClock, RedisStoreConfig, RedisTarget};

use super::ConfigError;
use super::error::Errors;
use super::file::{ClockName, RawStore, StoreKind as RawStoreKind};
use super::redis_access::{self, DATA_FIELDS, RawAccess, RawCredentials, SENTINEL_FIELDS};
use crate::engine::StoreKind;

/// The key prefix when none is configured.
pub(crate) const DEFAULT_KEY_PREFIX: &str = "weir";

/// The per-check timeout of the Redis store when none is configured.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

/// Where limit state is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "read once per load and kept whole: boxing the Redis settings would only move them"
)]
pub enum StoreConfig {
    /// In this process (the default).
    Memory(MemoryStoreConfig),
    /// In Redis or Redis Cluster, shared by every instance.
    Redis(RedisStoreConfig, Fallback),
}

impl StoreConfig {
    /// The store's kind as metrics name it: `memory` or `redis`.
    pub(crate) fn kind(&self) -> StoreKind {
        match self {
            StoreConfig::Memory(_) => StoreKind::Memory,
            StoreConfig::Redis(..) => StoreKind::Redis,
        }
    }
}

/// What a shared store's outages and an instance's crash cost: the local limiter
/// fail-open rules use while the store is unavailable, and how long a slot of a
/// request in flight outlives an instance that died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fallback {
    /// How many instances share the traffic: each enforces its share of every limit
    /// (the limit divided by this, rounded up) while the store is down.
    pub instances: u64,
    /// The lease of a slot of `algorithm: concurrency` on the shared store, renewed
    /// every third of it while its request lasts (`store.slot_lease`).
    pub slot_lease: Duration,
}

/// `store.slot_lease` by default: a slot of a crashed instance is free at most 10 s
/// after its last renewal.
pub(super) const DEFAULT_SLOT_LEASE: Duration = Duration::from_secs(10);

/// The shortest and longest `store.slot_lease`.
const SLOT_LEASE_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(200), Duration::from_secs(600));

/// Validates the `store:` section; what is allowed but unwise goes to `warnings`.
pub(super) fn store(
    mut raw: RawStore,
    file: &Path,
    warnings: &mut Vec<String>,
) -> Result<StoreConfig, ConfigError> {
    let access = RawAccess {
        credentials: RawCredentials {
            names: DATA_FIELDS,
            username: raw.username.take(),
            password_file: raw.password_file.take(),
            password_env: raw.password_env.take(),
        },
        tls: raw.tls.take(),
    };
    let sentinel_credentials = RawCredentials {
        names: SENTINEL_FIELDS,
        username: raw.sentinel_username.take(),
        password_file: raw.sentinel_password_file.take(),
        password_env: raw.sentinel_password_env.take(),
    };
    let fail = |at: Location, field: &str, message: String| {
        ConfigError::new(file, message)
            .at(at)
            .field(format!("store.{field}"))
    };
    let kind = raw.kind.as_ref().map_or(RawStoreKind::Memory, |k| k.value);
    let kind_name = match kind {
        RawStoreKind::Memory => "memory",
        RawStoreKind::Redis => "redis",
        RawStoreKind::RedisCluster => "redis_cluster",
        RawStoreKind::RedisSentinel => "redis_sentinel",
    };
    // Fields that belong to another type of store are errors, not silently ignored.
    let foreign = |at: Option<Location>, field: &str, owner: &str| match at {
        Some(at) => Err(fail(
            at,
            field,
            format!("`{field}` applies to type {owner}, not {kind_name}"),
        )),
        None => Ok(()),
    };
    if kind != RawStoreKind::RedisSentinel
        && let Some((field, at)) = sentinel_credentials.first_set()
    {
        foreign(Some(at), field, "redis_sentinel")?;
    }
    match kind {
        RawStoreKind::Memory => {
            foreign(raw.url.as_ref().map(|s| s.referenced), "url", "redis")?;
            foreign(
                raw.nodes.as_ref().map(|s| s.referenced),
                "nodes",
                "redis_cluster",
            )?;
            foreign(
                raw.sentinels.as_ref().map(|s| s.referenced),
                "sentinels",
                "redis_sentinel",
            )?;
            foreign(
                raw.master_name.as_ref().map(|s| s.referenced),
                "master_name",
                "redis_sentinel",
            )?;
            if let Some((field, at)) = access.first_set() {
                foreign(Some(at), field, "redis, redis_cluster and redis_sentinel")?;
            }
            for (field, at) in [
                ("key_prefix", raw.key_prefix.as_ref().map(|s| s.referenced)),
                ("timeout", raw.timeout.as_ref().map(|s| s.referenced)),
                ("clock", raw.clock.as_ref().map(|s| s.referenced)),
                (
                    "window_counters",
                    raw.window_counters.as_ref().map(|s| s.referenced),
                ),
                (
                    "fallback_instances",
                    raw.fallback_instances.as_ref().map(|s| s.referenced),
                ),
                ("slot_lease", raw.slot_lease.as_ref().map(|s| s.referenced)),
            ] {
                foreign(at, field, "redis, redis_cluster and redis_sentinel")?;
            }
            let mut config = MemoryStoreConfig::default();
            if let Some(max_keys) = raw.max_keys {
                if max_keys.value == 0 {
                    return Err(fail(
                        max_keys.referenced,
                        "max_keys",
                        "max_keys must be a whole number, at least 1".into(),
                    ));
                }
                config.max_keys = max_keys.value;
            }
            Ok(StoreConfig::Memory(config))
        }
        RawStoreKind::Redis | RawStoreKind::RedisCluster | RawStoreKind::RedisSentinel => {
            foreign(
                raw.max_keys.as_ref().map(|s| s.referenced),
                "max_keys",
                "memory",
            )?;
            let section = raw
                .kind
                .as_ref()
                .map_or(Location::UNKNOWN, |k| k.referenced);
            let (mut target, urls, url_field) = target(&mut raw, kind, section, file)?;
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            let errors = Errors { file };
            let access = redis_access::access(access, &urls, url_field, &errors, warnings)?;
            if let RedisTarget::Sentinel { credentials, .. } = &mut target {
                *credentials = redis_access::credentials(sentinel_credentials, &errors)?;
            }
            let key_prefix = match raw.key_prefix {
                Some(prefix) => {
                    let plain =
                        |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | ':');
                    if prefix.value.is_empty()
                        || prefix.value.len() > 64
                        || !prefix.value.chars().all(plain)
                    {
                        return Err(fail(
                            prefix.referenced,
                            "key_prefix",
                            "key_prefix must be 1 to 64 characters of A-Z, a-z, 0-9, `_`, `.`, `-` and `:` (no braces: they would take the hash tag)".into(),
                        ));
                    }
                    prefix.value
                }
                None => DEFAULT_KEY_PREFIX.to_owned(),
            };
            let timeout = match raw.timeout {
                Some(timeout) => {
                    if timeout.value.0.is_zero() || timeout.value.0 > Duration::from_secs(60) {
                        return Err(fail(
                            timeout.referenced,
                            "timeout",
                            "timeout must be between 1ms and 60s".into(),
                        ));
                    }
                    timeout.value.0
                }
                None => DEFAULT_TIMEOUT,
            };
            let clock = match raw.clock.map(|c| c.value) {
                None | Some(ClockName::Redis) => RedisClock::Server,
                Some(ClockName::Local) => RedisClock::Local,
            };
            let window_counters = match raw.window_counters {
                Some(on) if on.value && clock != RedisClock::Local => {
                    return Err(fail(
                        on.referenced,
                        "window_counters",
                        "window_counters needs `clock: local`: a window's counter is named by the window the instance's clock is in".into(),
                    ));
                }
                Some(on) => on.value,
                None => false,
            };
            let instances = match raw.fallback_instances {
                Some(n) if n.value == 0 || n.value > 10_000 => {
                    return Err(fail(
                        n.referenced,
                        "fallback_instances",
                        "fallback_instances must be a whole number from 1 to 10000".into(),
                    ));
                }
                Some(n) => n.value,
                None => 1,
            };
            let slot_lease = match raw.slot_lease {
                Some(lease)
                    if lease.value.0 < SLOT_LEASE_BOUNDS.0
                        || lease.value.0 > SLOT_LEASE_BOUNDS.1 =>
                {
                    return Err(fail(
                        lease.referenced,
                        "slot_lease",
                        "slot_lease must be between 200ms and 10m".into(),
                    ));
                }
                Some(lease) => lease.value.0,
                None => DEFAULT_SLOT_LEASE,
            };
            Ok(StoreConfig::Redis(
                RedisStoreConfig {
                    target,
                    key_prefix,
                    timeout,
                    clock,
                    window_counters,
                    access,
                },
                Fallback {
                    instances,
                    slot_lease,
                },
            ))
        }
    }
}

/// Where a Redis store is (`url`, `nodes`, or `sentinels` and `master_name`, by
/// `kind`; another type's field is an error), the URLs weir connects to first, and
/// the field naming them.
fn target(
    raw: &mut RawStore,
    kind: RawStoreKind,
    section: Location,
    file: &Path,
) -> Result<(RedisTarget, Vec<String>, &'static str), ConfigError> {
    let fail = |at: Location, field: &str, message: String| {
        ConfigError::new(file, message)
            .at(at)
            .field(format!("store.{field}"))
    };
    let owner = |field: &str| match field {
        "url" => "redis",
        "nodes" => "redis_cluster",
        _ => "redis_sentinel",
    };
    let fields = [
        ("url", raw.url.as_ref().map(|s| s.referenced)),
        ("nodes", raw.nodes.as_ref().map(|s| s.referenced)),
        ("sentinels", raw.sentinels.as_ref().map(|s| s.referenced)),
        (
            "master_name",
            raw.master_name.as_ref().map(|s| s.referenced),
        ),
    ];
    let kind_name = match kind {
        RawStoreKind::Redis => "redis",
        RawStoreKind::RedisCluster => "redis_cluster",
        _ => "redis_sentinel",
    };
    for (field, at) in fields {
        if let Some(at) = at
            && owner(field) != kind_name
        {
            return Err(fail(
                at,
                field,
                format!(
                    "`{field}` applies to type {}, not {kind_name}",
                    owner(field)
                ),
            ));
        }
    }
    // A list of URLs, at least one, each checked.
    let list = |list: Option<Spanned<Vec<String>>>, field: &str, one: &str, what: &str| {
        let list = list.ok_or_else(|| {
            fail(
                section,
                field,
                format!("type {kind_name} needs `{field}`: a list of {what}"),
            )
        })?;
        if list.value.is_empty() {
            return Err(fail(
                list.referenced,
                field,
                format!("`{field}` must list at least one {one}"),
            ));
        }
        for (i, url) in list.value.iter().enumerate() {
            check_url(
                &Spanned::new(url.clone(), list.referenced, list.defined),
                &format!("store.{field}[{i}]"),
                file,
            )?;
        }
        Ok(list.value)
    };
    match kind {
        RawStoreKind::Redis => {
            let url = raw.url.take().ok_or_else(|| {
                fail(
                    section,
                    "url",
                    "type redis needs `url`, e.g. redis://127.0.0.1:6379".into(),
                )
            })?;
            check_url(&url, "store.url", file)?;
            Ok((
                RedisTarget::Single(url.value.clone()),
                vec![url.value],
                "url",
            ))
        }
        RawStoreKind::RedisCluster => {
            let nodes = list(raw.nodes.take(), "nodes", "node", "seed URLs")?;
            Ok((RedisTarget::Cluster(nodes.clone()), nodes, "nodes"))
        }
        _ => {
            let sentinels = list(
                raw.sentinels.take(),
                "sentinels",
                "sentinel",
                "sentinel URLs, e.g. [redis://10.0.0.1:26379]",
            )?;
            let master = raw.master_name.take().ok_or_else(|| {
                fail(
                    section,
                    "master_name",
                    "type redis_sentinel needs `master_name`: the name the sentinels monitor the primary by".into(),
                )
            })?;
            if master.value.is_empty() || master.value.contains(char::is_whitespace) {
                return Err(fail(
                    master.referenced,
                    "master_name",
                    "master_name must be a name without spaces".into(),
                ));
            }
            // The sentinels' credentials are read beside the data nodes'.
            let target = RedisTarget::Sentinel {
                sentinels: sentinels.clone(),
                master: master.value,
                credentials: Credentials::default(),
            };
            Ok((target, sentinels, "sentinels"))
        }
    }
}

/// Refuses `url` (at `field`) unless it is a Redis URL that parses; the error shows it
/// with its password redacted.
fn check_url(url: &Spanned<String>, field: &str, file: &Path) -> Result<(), ConfigError> {
    let scheme = ["redis://", "rediss://", "redis+unix://", "unix://"]
        .iter()
        .any(|scheme| url.value.starts_with(scheme) && url.value.len() > scheme.len());
    let problem = if scheme {
        weir_store::check_redis_url(&url.value).err()
    } else {
        Some("the scheme is not redis://, rediss://, redis+unix:// or unix://".to_owned())
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(ConfigError::new(
            file,
            format!(
                "`{}` is not a Redis URL (redis://[user[:password]@]host:port[/db]): {why}",
                weir_store::redacted(&url.value).escape_debug()
            ),
        )
        .at(url.referenced)
        .field(field)),
    }
}
