//! The configuration: read from YAML, validated once, into types that cannot be invalid:
//! the engine's [`EngineSpec`], the gateway's [`GatewayConfig`], the admin API's
//! [`AdminConfig`] and the store's [`StoreConfig`].
//!
//! Everything is checked at load: unknown fields, algorithms and periods, limits and
//! bursts out of range, duplicate or malformed rule names. An error names the file, the
//! line and column, and the field (`rules[1].limit`). `weir check-config` runs exactly
//! this, and `weir serve` refuses to start on an error.

mod admin;
mod auth;
mod bans;
mod builder;
mod calendar;
mod descriptors;
mod error;
mod file;
mod identities;
mod in_flight;
mod lease;
mod lists;
mod overrides;
mod period;
mod plans;
mod redis_access;
mod region;
mod rules;
mod settlements;
mod shedding;
mod store;
mod tls;
mod upstream;
mod upstream_tls;
mod yaml;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_saphyr::Location;
use weir_core::{Policy, PolicyError};

use crate::engine::{EngineSpec, NamedPolicy, RegionSpec};
use crate::request::ClientIpConfig;

pub(crate) use self::admin::AdminConfig;
pub(crate) use self::auth::{AUTH_PATH, AuthConfig, Convention, Reservations};
pub use self::builder::{ConfigBuilder, RuleBuilder};
pub use self::calendar::CalendarPeriod;
pub(crate) use self::descriptors::EnvoyConfig;
pub use self::error::ConfigError;
use self::error::Found;
use self::file::RawRule;
pub(crate) use self::period::Period;
pub(crate) use self::shedding::SheddingConfig;
pub use self::store::{Fallback, StoreConfig};
pub(crate) use self::tls::TlsConfig;
pub(crate) use self::upstream::GatewayConfig;
pub(crate) use self::upstream::Upstream;
pub(crate) use self::upstream::{BODY_TIMEOUT, MAX_BODY_BYTES, MAX_BUFFERED_BYTES};

/// `n` things, in English: `1 rule`, `2 rules`.
fn count(n: usize, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        _ => format!("{n} {thing}s"),
    }
}

/// The longest rule name: names appear in keys and in response headers.
pub(crate) const MAX_RULE_NAME: usize = 64;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where limit state is kept.
    pub store: StoreConfig,
    /// What the engine is built from: the rules, in file order with unique names, and
    /// how requests are routed to them.
    pub engine: EngineSpec,
    /// Whom to believe about a client's address (the `client_ip` section): what the
    /// gateway and the tower layer read it by.
    pub(crate) client_ip: ClientIpConfig,
    /// The gateway, when an `upstream` is configured.
    pub(crate) gateway: Option<GatewayConfig>,
    /// The admin API, when an `admin` section is configured.
    pub(crate) admin: Option<AdminConfig>,
    /// The file overrides are kept in on the memory store (`overrides.file`); none:
    /// in the process alone, or in the shared store.
    pub(crate) overrides_file: Option<std::path::PathBuf>,
    /// Envoy's rate limit service, when an `envoy` section is configured.
    pub(crate) envoy: Option<EnvoyConfig>,
    /// The forward-auth door, when an `auth` section is configured.
    pub(crate) auth: Option<AuthConfig>,
    /// TLS on the main listener, when a `tls` section is configured: its certificates,
    /// loaded and checked.
    pub(crate) tls: Option<TlsConfig>,
    /// The API keys files of the allow and deny lists, watched with the configuration.
    list_files: Vec<PathBuf>,
    /// `tls::files_sha256` of every watched file (the TLS files', then the lists'), as
    /// loaded.
    files_sha256: Option<String>,
    /// The SHA-256 of the configuration text, in hex (the `weir_config_loaded` metric).
    pub sha256: String,
    /// What is allowed but unwise (a password written in a Redis URL): `check-config`
    /// prints each, `weir serve` logs each at start.
    pub warnings: Vec<String>,
}

impl Config {
    /// Whether it configures the gateway (an `upstream` section).
    pub fn has_gateway(&self) -> bool {
        self.gateway.is_some()
    }

    /// Whether it configures the forward-auth door (an `auth` section).
    pub fn has_auth(&self) -> bool {
        self.auth.is_some()
    }

    /// Whether the main listener speaks TLS (a `tls` section).
    pub fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether it configures the admin API (an `admin` section).
    pub fn has_admin(&self) -> bool {
        self.admin.is_some()
    }

    /// What `weir check-config` says of it: how many rules, and with an `envoy`
    /// section, how many domains from how many files in which directory.
    pub fn summary(&self) -> String {
        let rules = count(self.engine.rules.len(), "rule");
        match &self.envoy {
            Some(envoy) => format!(
                "{rules}, {} from {} in {}",
                count(envoy.descriptors.domains(), "envoy domain"),
                count(envoy.files.len(), "file"),
                envoy.dir.display()
            ),
            None => rules,
        }
    }

    /// Reads and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(path, format!("cannot read the file: {e}")))?;
        Self::parse(&text, path)
    }

    /// Validates configuration text; `source` names it in errors.
    pub fn parse(text: &str, source: &Path) -> Result<Self, ConfigError> {
        // Every section may be left out (`rules:` when there is `envoy:`), so an empty
        // file would read as one with nothing in it: say so instead.
        let blank = text
            .lines()
            .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'));
        if blank {
            let mut error = ConfigError::new(
                source,
                "the file ends before any configuration: it needs at least `rules:`",
            );
            error.position = Some((1, 1));
            return Err(error);
        }
        let mut raw: file::RawConfig = yaml::read_yaml(text, source)?;
        let mut warnings = Vec::new();
        let store = store::store(std::mem::take(&mut raw.store), source, &mut warnings)?;
        let on_redis = matches!(store, StoreConfig::Redis(..));
        let errors = error::Errors { file: source };
        let instances = match &store {
            StoreConfig::Redis(_, fallback) => fallback.instances,
            StoreConfig::Memory(_) => 1,
        };
        // Each section is checked on past another's error, so that one run reports
        // every error it can; the rules need the region, the routing the rules.
        let mut found = Found::default();
        let envoy = found.keep(descriptors::envoy(
            raw.envoy.as_ref(),
            &errors,
            instances,
            on_redis,
        ));
        let region = found.keep(region::region(raw.region.as_ref(), &store, source));
        let admin = found.keep(admin::admin(raw.admin.as_ref(), &errors));
        let overrides_file = found.keep(overrides::overrides_file(
            raw.overrides.as_ref(),
            on_redis,
            &errors,
        ));
        let auth = found.keep(auth::auth(
            raw.auth.as_ref(),
            &raw.rules,
            &raw.identities,
            raw.plans.as_ref(),
            &errors,
        ));
        // Read once: the engine keys IPv6 clients by its prefix, the gateway reads
        // clients by the rest.
        let client_ip = found.keep(upstream::client_ip(raw.client_ip.as_ref(), &errors));
        let with_envoy = raw.envoy.is_some();
        // The rules are read with the region: not without it when it is wrong (a
        // global rule would be told it has none).
        let rules = region.as_ref().and_then(|region| {
            found.keep(rules(
                &raw.rules,
                source,
                on_redis,
                with_envoy,
                region.as_ref(),
            ))
        });
        let region = region.flatten();
        let routing = match (&rules, &client_ip) {
            (Some(rules), Some(client_ip)) => {
                let policies: Vec<Policy> = rules.iter().map(|r| r.policy).collect();
                // A policy a rule may take (a plan's custom limit): decided exactly on
                // Redis, and shareable by the regions for a global rule.
                let check_policy = |rule: &str, policy: &Policy| -> Result<(), String> {
                    if on_redis {
                        weir_store::check_redis_policy(policy).map_err(|e| e.to_string())?;
                    }
                    let global = rules.iter().any(|r| r.name == rule && r.global);
                    match (&region, global) {
                        (Some(region), true) => region::shareable(policy, region),
                        _ => Ok(()),
                    }
                };
                let fallback = match &store {
                    StoreConfig::Redis(_, fallback) => *fallback,
                    StoreConfig::Memory(_) => Fallback {
                        instances: 1,
                        slot_lease: store::DEFAULT_SLOT_LEASE,
                    },
                };
                // A global rule's fallback: this instance's part of its region's even
                // split.
                let regions = region.as_ref().map_or(1, RegionSpec::regions);
                found.keep(rules::routing(
                    &raw,
                    &policies,
                    &errors,
                    &check_policy,
                    fallback,
                    regions,
                    client_ip.ipv6_prefix,
                ))
            }
            _ => None,
        };
        let tls = found.keep(tls::tls(raw.tls.as_ref(), &errors));
        let max_owed = found.keep(settlements::max_owed(
            raw.settlements.as_ref(),
            on_redis,
            &errors,
        ));
        let gateway = client_ip
            .as_ref()
            .and_then(|client_ip| found.keep(upstream::gateway(&raw, &errors, client_ip.clone())));
        found.finish()?;
        let (
            Some(overrides_file),
            Some(max_owed),
            Some(tls),
            Some(envoy),
            Some(admin),
            Some(auth),
            Some(client_ip),
            Some(rules),
            Some(routing),
            Some(gateway),
        ) = (
            overrides_file,
            max_owed,
            tls,
            envoy,
            admin,
            auth,
            client_ip,
            rules,
            routing,
            gateway,
        )
        else {
            // Each section missing has its error in `found`.
            return Err(ConfigError::new(source, "the configuration is not valid"));
        };
        let envoy_leases = envoy
            .iter()
            .flat_map(|e| e.descriptors.leases())
            .map(|(rule, plan)| (rule.to_owned(), plan))
            .collect();
        if let Some((name, _)) = envoy
            .iter()
            .flat_map(|e| e.descriptors.bans())
            .find(|(name, _)| rules.iter().any(|r| &r.name == name))
        {
            return Err(ConfigError::new(source, format!("an Envoy descriptor limit with `on_limited` is named `{name}`, as a rule is: their bans would be listed and lifted under one name (rename one)")).field("envoy.config_dir"));
        }
        let list_files = lists::files(&raw, &errors);
        let mut config = Config {
            engine: EngineSpec {
                rules,
                routing,
                store: store.kind(),
                region,
                envoy_leases,
                envoy: envoy
                    .as_ref()
                    .map(|e| std::sync::Arc::new(e.descriptors.clone())),
                max_owed,
                slot_lease: match &store {
                    StoreConfig::Redis(_, fallback) => fallback.slot_lease,
                    StoreConfig::Memory(_) => store::DEFAULT_SLOT_LEASE,
                },
            },
            store,
            client_ip,
            gateway,
            admin,
            overrides_file,
            envoy,
            auth,
            tls,
            sha256: sha256_hex(text.as_bytes()),
            warnings,
            list_files,
            files_sha256: None,
        };
        if let StoreConfig::Redis(redis, fallback) = &config.store
            && config.engine.rules.iter().any(|rule| rule.in_flight)
            && redis.timeout >= fallback.slot_lease / 2
        {
            config.warnings.push(format!(
                "store.slot_lease: a `concurrency` slot's take waits at most half the lease ({:?}), less than `timeout` ({:?}): a take Redis answers later is refused as a store timeout; keep `timeout` below half of `slot_lease`",
                fallback.slot_lease / 2,
                redis.timeout
            ));
        }
        let files = config.watched_files();
        if !files.is_empty() {
            config.files_sha256 = Some(tls::files_sha256(&files).unwrap_or_default());
        }
        Ok(config)
    }
}

impl Config {
    /// What a reload compares to see a change: the file's SHA-256, with an `envoy`
    /// section its directory's, and with a `tls` section its certificate files'.
    pub fn fingerprint(&self) -> String {
        let mut fingerprint = self.sha256.clone();
        if let Some(envoy) = &self.envoy {
            fingerprint = format!("{fingerprint}+{}", envoy.sha256);
        }
        if let Some(files) = &self.files_sha256 {
            fingerprint = format!("{fingerprint}+{files}");
        }
        fingerprint
    }

    /// The files besides the configuration a reload watches: the `tls` section's
    /// certificates and keys.
    pub(crate) fn watched_files(&self) -> Vec<std::path::PathBuf> {
        let mut files = self
            .tls
            .as_ref()
            .map(|tls| tls.files.clone())
            .unwrap_or_default();
        files.extend(self.list_files.iter().cloned());
        files
    }
}

/// [`Config::fingerprint`] of the files as they are now: the configuration at `path`,
/// if given the envoy directory `envoy_dir`, and the `files` of
/// [`Config::watched_files`]; none if one cannot be read.
pub(crate) fn fingerprint_of(
    path: &Path,
    envoy_dir: Option<&Path>,
    files: &[std::path::PathBuf],
) -> Option<String> {
    let mut fingerprint = sha256_hex(&std::fs::read(path).ok()?);
    if let Some(dir) = envoy_dir {
        fingerprint = format!("{fingerprint}+{}", descriptors::dir_sha256(dir)?);
    }
    if !files.is_empty() {
        fingerprint = format!("{fingerprint}+{}", tls::files_sha256(files)?);
    }
    Some(fingerprint)
}

/// The SHA-256 of `bytes`, in lower-case hex: how a configuration file is named in
/// metrics, and how a reload sees that it changed.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn rules(
    raw: &[RawRule],
    file: &Path,
    on_redis: bool,
    envoy: bool,
    region: Option<&RegionSpec>,
) -> Result<Vec<NamedPolicy>, ConfigError> {
    let mut names = HashSet::new();
    let mut rules = Vec::with_capacity(raw.len());
    let mut found = Found::default();
    for (i, rule) in raw.iter().enumerate() {
        if let Some(rule) = found.keep(checked_rule(i, rule, &mut names, file, on_redis, region)) {
            rules.push(rule);
        }
    }
    // Every rule's errors at once; the checks after need every rule's policy.
    found.finish()?;
    if rules.is_empty() && !envoy {
        return Err(ConfigError::new(
            file,
            "no rules: add at least one under `rules:` (or an `envoy:` section)",
        )
        .field("rules"));
    }
    Ok(rules)
}

/// Rule `i` of the file, checked: its name (unique among `names`), its policy, its lease
/// and its scope.
fn checked_rule(
    i: usize,
    rule: &RawRule,
    names: &mut HashSet<String>,
    file: &Path,
    on_redis: bool,
    region: Option<&RegionSpec>,
) -> Result<NamedPolicy, ConfigError> {
    let fail = |location: Location, field: &str, message: String| {
        ConfigError::new(file, message)
            .at(location)
            .field(format!("rules[{i}].{field}"))
    };
    let name = rule.name.value.clone();
    if let Err(message) = check_rule_name(&name) {
        return Err(fail(rule.name.referenced, "name", message));
    }
    if !names.insert(name.clone()) {
        return Err(fail(
            rule.name.referenced,
            "name",
            format!("duplicate rule name `{name}`: every rule needs its own name"),
        ));
    }
    let Some(algorithm) = rule.algorithm.rate() else {
        return in_flight::rule(rule, name)
            .map_err(|(at, field, message)| fail(at, field, message));
    };
    let Some(period) = &rule.period else {
        return Err(fail(
            rule.name.referenced,
            "period",
            format!("`period` is required: {algorithm} counts requests per period"),
        ));
    };
    let burst = rule.burst.as_ref().map(|b| b.value);
    let nominal = period.value.nominal();
    let policy = Policy::new(algorithm, rule.limit.value, nominal, burst).map_err(|error| {
        let message = error.to_string();
        match error {
            PolicyError::PeriodOutOfRange(_) => fail(period.referenced, "period", message),
            PolicyError::BurstOutOfRange(_) | PolicyError::BurstNotApplicable(_) => {
                let at = rule
                    .burst
                    .as_ref()
                    .map_or(rule.limit.referenced, |b| b.referenced);
                fail(at, "burst", message)
            }
            _ => fail(rule.limit.referenced, "limit", message),
        }
    })?;
    let policy = calendar::on_calendar(rule, period, policy)
        .map_err(|(at, field, message)| fail(at, &field, message))?;
    if on_redis {
        weir_store::check_redis_policy(&policy)
            .map_err(|e| fail(rule.limit.referenced, "limit", e.to_string()))?;
    }
    let lease = lease::lease_plan(rule, &policy).map_err(|message| {
        let at = rule
            .lease
            .as_ref()
            .map_or(rule.name.referenced, |l| l.referenced);
        fail(at, "lease", message)
    })?;
    let global = region::scope(rule, &policy, lease.is_some(), region).map_err(|message| {
        let at = rule
            .scope
            .as_ref()
            .map_or(rule.name.referenced, |s| s.referenced);
        fail(at, "scope", message)
    })?;
    Ok(NamedPolicy {
        name,
        policy,
        lease,
        global,
        in_flight: false,
    })
}

/// Rule names go into store keys and into structured header fields, so they are kept to
/// a plain alphabet.
fn check_rule_name(name: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if name.is_empty() || name.len() > MAX_RULE_NAME || !name.chars().all(plain) {
        return Err(format!(
            "invalid rule name `{}`: use 1 to {MAX_RULE_NAME} characters of A-Z, a-z, 0-9, `_`, `.` and `-`",
            name.escape_debug()
        ));
    }
    Ok(())
}
