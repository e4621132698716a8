//! The HTTP gateway: weir as a reverse proxy in front of an API.
//!
//! For each request it finds the rules that apply (route, method, host, the caller's
//! plan), identifies the caller for each (API key, verified JWT claim, client IP, a
//! body field), checks every limit, and either answers 429 itself or forwards the
//! request to the upstream and adds the RateLimit fields to the upstream's answer.

pub mod client_ip;
pub mod identity;
pub mod jwt;
pub mod plan;
mod pool;
mod proxy;
pub mod route;
mod service;

use std::collections::HashMap;
use std::time::Duration;

use axum::http::Uri;
use ipnet::IpNet;
use weir_core::Policy;

use self::identity::IdentitySource;
use self::plan::Plans;
use self::route::RouteMatch;
pub use self::service::{Gateway, SHADOW_HEADER, handle};

/// The identity every gateway has: the client's IP address.
pub const CLIENT_IP: &str = "client_ip";

/// Where allowed requests go.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `http://host:port` of the upstream.
    pub base: Uri,
    /// The longest a connection to the upstream may take to open.
    pub connect_timeout: Duration,
    /// The longest the upstream may take to start answering.
    pub timeout: Duration,
    /// The largest request body read when a rule identifies callers by a body field.
    pub max_body_bytes: usize,
    /// The longest a client may take to send such a body (else `408`).
    pub body_timeout: Duration,
}

/// A rule of the gateway: a limit, what it applies to, and whose it is.
#[derive(Debug, Clone)]
pub struct GatewayRule {
    /// The rule's name (its name in headers and problem bodies too).
    pub name: String,
    /// Its policy.
    pub policy: Policy,
    /// The requests it applies to.
    pub route: RouteMatch,
    /// The identities that make up its key, e.g. `[user]` or `[api_key, client_ip]`.
    /// A caller lacking one of them is counted by IP address instead.
    pub key: Vec<String>,
    /// The plans it applies to (empty: every caller).
    pub plans: Vec<String>,
    /// What a request costs, unless one of `costs` matches it.
    pub cost: u64,
    /// Costs of particular requests (first match wins), e.g. exports costing 50.
    pub costs: Vec<(RouteMatch, u64)>,
    /// Evaluated and counted, reported in a header and the log, never denies.
    pub shadow: bool,
    /// When not empty, only responses with these statuses are counted (after the
    /// upstream answers); the limit still blocks requests once reached.
    pub count_statuses: Vec<u16>,
    /// Responses with these statuses reset the caller's key (a successful login).
    pub reset_statuses: Vec<u16>,
    /// Growing waits for callers who reach the limit again and again.
    pub lockout: Option<Lockout>,
    /// What to do when the store cannot decide.
    pub failure: Failure,
    /// A shorter wait for the store than the store's own `timeout`, for this rule's
    /// requests (the shortest of the rules that apply wins).
    pub store_timeout: Option<Duration>,
    /// The policy each instance enforces locally while the store is down (fail open).
    pub fallback_policy: Policy,
}

/// What a rule does when the shared store cannot decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Failure {
    /// Keep serving, limited by a local fallback limiter (this instance's share of the
    /// limit): a broken limiter must not take the API down.
    #[default]
    Open,
    /// Answer 503 with `Retry-After`: abuse-sensitive endpoints (login, SMS, payments)
    /// stay protected.
    Closed,
}

/// Each time a caller reaches a rule's limit, it is locked out for the rule's period
/// times `growth` to the power of its earlier lockouts, capped at `max`: 15 minutes,
/// then 30, then an hour... Lockouts are remembered for a day (or `max`, if longer).
///
/// Its state lives under two more keys per caller, `<rule>/lockout` (the lockout in
/// force) and `<rule>/lockouts` (the lockouts remembered): rule names cannot hold `/`,
/// so these never meet a configured rule's keys. Names and policies are made once, at
/// load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockout {
    /// The factor between successive waits.
    pub growth: u32,
    /// The longest wait.
    pub max: Duration,
    /// The rule name of the key holding the lockout in force.
    pub in_force_rule: String,
    /// The rule name of the key counting lockouts.
    pub count_rule: String,
    /// Reads the lockout in force (any one-unit GCRA policy reads that key alike).
    pub probe: Policy,
    /// Counts the lockouts remembered.
    pub counter: Policy,
}

impl Lockout {
    /// The lockouts of rule `rule`, growing by `growth` up to `max`.
    pub fn new(rule: &str, growth: u32, max: Duration) -> Result<Self, weir_core::PolicyError> {
        use weir_core::{Algorithm, MAX_SLIDING_LOG_LIMIT};
        let memory = Self::memory_for(max);
        Ok(Self {
            growth,
            max,
            in_force_rule: format!("{rule}/lockout"),
            count_rule: format!("{rule}/lockouts"),
            probe: Policy::new(Algorithm::Gcra, 1, max, None)?,
            counter: Policy::new(Algorithm::SlidingLog, MAX_SLIDING_LOG_LIMIT, memory, None)?,
        })
    }

    /// How long a lockout counts towards the next one's wait: a day, or `max` if longer.
    fn memory_for(max: Duration) -> Duration {
        max.max(Duration::from_secs(24 * 3600))
    }

    /// The wait of the `n`-th lockout (from 1) for a rule of `period`.
    pub fn wait(&self, period: Duration, n: u64) -> Duration {
        let factor =
            u32::try_from(n.saturating_sub(1)).map_or(u32::MAX, |e| self.growth.saturating_pow(e));
        period.saturating_mul(factor).min(self.max)
    }
}

impl GatewayRule {
    /// What this request costs under the rule.
    pub fn cost_of(&self, method: &axum::http::Method, host: Option<&str>, path: &str) -> u64 {
        self.costs
            .iter()
            .find(|(route, _)| route.matches(method, host, path))
            .map_or(self.cost, |&(_, cost)| cost)
    }
}

/// Everything the gateway needs besides the store.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where allowed requests go.
    pub upstream: Upstream,
    /// Proxies whose forwarding headers are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// Named ways to identify callers.
    pub identities: HashMap<String, IdentitySource>,
    /// How callers get their plan, if plans are used.
    pub plans: Option<Plans>,
    /// Also send `RateLimit-Limit/Remaining/Reset` and `X-RateLimit-*`.
    pub legacy_headers: bool,
    /// The rules with a `match`, in file order.
    pub rules: Vec<GatewayRule>,
}
