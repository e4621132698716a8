//! The configuration file's shape, as serde reads it, before validation.
//!
//! Every struct refuses unknown fields, so a misspelt field is an error rather than a
//! silently ignored line. Values that later checks need to point at are `Spanned`, so
//! that those checks can name the line too.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;
use weir_core::Algorithm;

use super::calendar::{RawStarts, RulePeriod};
use super::lease::RawLease;
use super::period::Period;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) store: RawStore,
    pub(super) upstream: Option<RawUpstream>,
    pub(super) client_ip: Option<RawClientIp>,
    #[serde(default)]
    pub(super) identities: BTreeMap<String, Spanned<RawIdentity>>,
    pub(super) plans: Option<Spanned<RawPlans>>,
    #[serde(default)]
    pub(super) response_headers: RawResponseHeaders,
    #[serde(default)]
    pub(super) requests: RawRequests,
    pub(super) admin: Option<Spanned<RawAdmin>>,
    /// Where overrides set at runtime are kept (memory store).
    pub(super) overrides: Option<Spanned<super::overrides::RawOverrides>>,
    pub(super) shedding: Option<Spanned<RawShedding>>,
    /// Envoy's rate limit service: with it, `rules` may be left out.
    pub(super) envoy: Option<Spanned<super::descriptors::RawEnvoy>>,
    /// This instance's region, for rules with `scope: global`.
    pub(super) region: Option<Spanned<super::region::RawRegion>>,
    /// The forward-auth door.
    pub(super) auth: Option<Spanned<super::auth::RawAuth>>,
    /// TLS on the main listener.
    pub(super) tls: Option<Spanned<super::tls::RawTls>>,
    /// What is kept of settlements the shared store cannot take.
    pub(super) settlements: Option<Spanned<super::settlements::RawSettlements>>,
    /// Callers who skip every rule, and callers refused (403).
    pub(super) lists: Option<Spanned<super::lists::RawLists>>,
    #[serde(default)]
    pub(super) rules: Vec<RawRule>,
}

/// Load shedding by route priority, in front of an overloaded upstream.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShedding {
    #[serde(default)]
    pub(super) routes: Vec<RawShedRoute>,
    pub(super) min_limit: Option<Spanned<u32>>,
    pub(super) max_limit: Option<Spanned<u32>>,
    pub(super) initial_limit: Option<Spanned<u32>>,
}

/// A route's priority: requests whose path starts with `path_prefix`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShedRoute {
    pub(super) path_prefix: Spanned<String>,
    pub(super) priority: PriorityName,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum PriorityName {
    Critical,
    Default,
    Sheddable,
}

impl From<PriorityName> for weir_core::Priority {
    fn from(name: PriorityName) -> Self {
        match name {
            PriorityName::Critical => weir_core::Priority::Critical,
            PriorityName::Default => weir_core::Priority::Default,
            PriorityName::Sheddable => weir_core::Priority::Sheddable,
        }
    }
}

/// The admin API: where its bearer token comes from (never the file itself).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    /// The environment variable holding the token.
    pub(super) token_env: Option<String>,
    /// The file holding the token (its first line).
    pub(super) token_file: Option<String>,
}

/// How requests are read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequests {
    /// What `%2F`, `%5C` and `\` in a path become.
    #[serde(default)]
    pub(super) escaped_slashes: EscapedSlashesName,
    /// What a request for a host no rule names gets, when rules name hosts.
    #[serde(default)]
    pub(super) unknown_hosts: UnknownHostsName,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum EscapedSlashesName {
    #[default]
    Reject,
    Keep,
    UnescapeAndMerge,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum UnknownHostsName {
    #[default]
    Refuse,
    Forward,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(super) url: Spanned<String>,
    pub(super) connect_timeout: Option<Spanned<Period>>,
    pub(super) timeout: Option<Spanned<Period>>,
    pub(super) body_timeout: Option<Spanned<Period>>,
    pub(super) websocket_idle_timeout: Option<Spanned<Period>>,
    pub(super) max_body_bytes: Option<Spanned<usize>>,
    pub(super) max_buffered_bytes: Option<Spanned<usize>>,
    /// The roots an `https://` upstream is verified against (PEM), instead of the
    /// system's.
    pub(super) ca_file: Option<Spanned<String>>,
    /// Speak HTTP/2 to the upstream (h2 by ALPN over TLS, else with prior knowledge).
    #[serde(default)]
    pub(super) http2: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClientIp {
    #[serde(default)]
    pub(super) trusted_proxies: Vec<Spanned<String>>,
    /// The forwarding header the trusted proxies write (no fallback to another).
    pub(super) header: Option<ForwardedHeaderName>,
    /// IPv6 clients are keyed by this prefix of their address.
    pub(super) ipv6_prefix: Option<Spanned<u32>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum ForwardedHeaderName {
    XForwardedFor,
    Forwarded,
    XRealIp,
}

/// One string or a list of them (`audience: api` or `audience: [api, admin]`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(super) fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdentity {
    pub(super) header: Option<String>,
    pub(super) jwt: Option<RawJwt>,
    pub(super) body_field: Option<String>,
    pub(super) query_param: Option<String>,
    pub(super) cookie: Option<String>,
    #[serde(default)]
    pub(super) client_ip: bool,
    #[serde(default)]
    pub(super) normalize: Option<NormalizeName>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum NormalizeName {
    None,
    Email,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    #[serde(default = "authorization")]
    pub(super) header: String,
    pub(super) claim: String,
    pub(super) hs256_secret: Option<String>,
    pub(super) rs256_public_key_file: Option<String>,
    pub(super) es256_public_key_file: Option<String>,
    pub(super) jwks_file: Option<String>,
    /// Accepted `aud` values (none: not checked).
    pub(super) audience: Option<OneOrMany>,
    /// Accepted `iss` values (none: not checked).
    pub(super) issuer: Option<OneOrMany>,
}

fn authorization() -> String {
    "authorization".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlans {
    /// A JWT claim, verified by the named identity's JWT settings.
    pub(super) jwt_claim: Option<String>,
    pub(super) identity: Option<String>,
    pub(super) header: Option<String>,
    pub(super) file: Option<String>,
    pub(super) default: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResponseHeaders {
    #[serde(default)]
    pub(super) legacy: bool,
}

/// A cost for the requests of a rule that match, e.g. exports costing 50.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCost {
    #[serde(rename = "match")]
    pub(super) route: RawMatch,
    pub(super) cost: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMatch {
    #[serde(default)]
    pub(super) methods: Vec<String>,
    pub(super) path: Option<String>,
    pub(super) path_prefix: Option<String>,
    pub(super) host: Option<String>,
    /// ASCII letters of the path compared without case (`/Login` is `/login`): the
    /// default, since matching more spellings than the app routes alike only counts
    /// more, while matching fewer lets a spelling escape.
    #[serde(default = "yes")]
    pub(super) case_insensitive: bool,
    /// A trailing slash makes no other path (`/login/` is `/login`); the default too.
    #[serde(default = "yes")]
    pub(super) trailing_slash: bool,
    /// The shedding priority of the requests a rule's match applies to (a rule's
    /// `match` only, with a `shedding` section).
    pub(super) priority: Option<PriorityName>,
    /// Conditions on request headers, by name.
    #[serde(default)]
    pub(super) headers: BTreeMap<String, RawCondition>,
    /// Conditions on query parameters, by name.
    #[serde(default)]
    pub(super) query: BTreeMap<String, RawCondition>,
    /// Conditions on cookies, by name.
    #[serde(default)]
    pub(super) cookies: BTreeMap<String, RawCondition>,
}

/// A condition on one value: a text it must equal, or one of the ways to compare.
#[derive(Debug)]
pub(super) enum RawCondition {
    /// Equal to this text (`x-tier: free`).
    Exact(String),
    /// `{ exact: .. }`, `{ prefix: .. }`, `{ regex: .. }` or `{ present: .. }`.
    Compare(RawCompare),
}

impl<'de> Deserialize<'de> for RawCondition {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Condition;
        impl<'de> serde::de::Visitor<'de> for Condition {
            type Value = RawCondition;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a text to equal, or one of `{ exact: .. }`, `{ prefix: .. }`, `{ regex: .. }`, `{ present: true|false }`")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RawCondition, E> {
                Ok(RawCondition::Exact(text.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawCondition, A::Error> {
                RawCompare::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawCondition::Compare)
            }
        }
        deserializer.deserialize_any(Condition)
    }
}

/// The ways to compare a value: exactly one is given.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCompare {
    pub(super) exact: Option<String>,
    pub(super) prefix: Option<String>,
    pub(super) regex: Option<String>,
    pub(super) present: Option<bool>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    #[serde(rename = "type", default)]
    pub(super) kind: Option<Spanned<StoreKind>>,
    pub(super) max_keys: Option<Spanned<usize>>,
    pub(super) url: Option<Spanned<String>>,
    pub(super) nodes: Option<Spanned<Vec<String>>>,
    pub(super) key_prefix: Option<Spanned<String>>,
    pub(super) timeout: Option<Spanned<Period>>,
    pub(super) clock: Option<Spanned<ClockName>>,
    pub(super) window_counters: Option<Spanned<bool>>,
    pub(super) fallback_instances: Option<Spanned<u64>>,
    pub(super) slot_lease: Option<Spanned<Period>>,
    pub(super) sentinels: Option<Spanned<Vec<String>>>,
    pub(super) master_name: Option<Spanned<String>>,
    pub(super) username: Option<Spanned<String>>,
    pub(super) password_file: Option<Spanned<String>>,
    pub(super) password_env: Option<Spanned<String>>,
    pub(super) sentinel_username: Option<Spanned<String>>,
    pub(super) sentinel_password_file: Option<Spanned<String>>,
    pub(super) sentinel_password_env: Option<Spanned<String>>,
    pub(super) tls: Option<Spanned<RawTls>>,
}

/// `store.tls`: certificates for `rediss://`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) ca_file: Option<Spanned<String>>,
    pub(super) cert_file: Option<Spanned<String>>,
    pub(super) key_file: Option<Spanned<String>>,
    pub(super) server_name: Option<Spanned<String>>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum StoreKind {
    #[default]
    Memory,
    Redis,
    RedisCluster,
    RedisSentinel,
}

/// Whose clock decides, as written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ClockName {
    Redis,
    Local,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) name: Spanned<String>,
    pub(super) algorithm: AlgorithmName,
    pub(super) limit: Spanned<u64>,
    /// Required by every algorithm but `concurrency`, which has none.
    pub(super) period: Option<Spanned<RulePeriod>>,
    #[serde(default)]
    pub(super) burst: Option<Spanned<u64>>,
    #[serde(rename = "match")]
    pub(super) route: Option<Spanned<RawMatch>>,
    pub(super) key: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) plans: Vec<String>,
    pub(super) cost: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) costs: Vec<Spanned<RawCost>>,
    #[serde(default)]
    pub(super) shadow: bool,
    #[serde(default)]
    pub(super) count_statuses: Vec<u16>,
    #[serde(default)]
    pub(super) reset_statuses: Vec<u16>,
    pub(super) lockout: Option<Spanned<RawLockout>>,
    pub(super) on_limited: Option<Spanned<super::bans::RawOnLimited>>,
    pub(super) lists: Option<Spanned<super::lists::RawLists>>,
    pub(super) cost_from: Option<Spanned<RawCostFrom>>,
    #[serde(default)]
    pub(super) failure: FailureName,
    pub(super) store_timeout: Option<Spanned<Period>>,
    pub(super) lease: Option<Spanned<RawLease>>,
    pub(super) scope: Option<Spanned<super::region::ScopeName>>,
    /// The IANA time zone of a calendar period's windows (default UTC).
    pub(super) time_zone: Option<Spanned<String>>,
    /// Where a calendar period's windows start.
    pub(super) starts: Option<Spanned<RawStarts>>,
}

/// What a rule does when the store cannot decide.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum FailureName {
    #[default]
    Open,
    Closed,
}

/// Where the answer states a request's actual cost: one of the three.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCostFrom {
    pub(super) response_header: Option<String>,
    pub(super) trailer: Option<String>,
    pub(super) json: Option<String>,
    pub(super) max: Option<u64>,
}

/// Growing waits for callers who reach a limit again and again.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLockout {
    pub(super) growth: u32,
    pub(super) max: Period,
}

/// Algorithm names as written in configuration.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AlgorithmName {
    FixedWindow,
    SlidingLog,
    SlidingWindow,
    TokenBucket,
    Gcra,
    LeakyBucket,
    /// Not a rate: at most `limit` requests of a key in flight at once.
    Concurrency,
}

impl AlgorithmName {
    /// The rate algorithm named, or `None` for `concurrency`.
    pub(super) fn rate(self) -> Option<Algorithm> {
        Some(match self {
            AlgorithmName::FixedWindow => Algorithm::FixedWindow,
            AlgorithmName::SlidingLog => Algorithm::SlidingLog,
            AlgorithmName::SlidingWindow => Algorithm::SlidingWindow,
            AlgorithmName::TokenBucket => Algorithm::TokenBucket,
            AlgorithmName::Gcra => Algorithm::Gcra,
            AlgorithmName::LeakyBucket => Algorithm::LeakyBucket,
            AlgorithmName::Concurrency => return None,
        })
    }
}
