//! A rule that applies to requests: a limit, which requests it covers, whose key it
//! counts under, what a request costs, when it is counted, and what to do when the
//! store cannot decide.

use std::time::Duration;

use axum::http::Method;
use weir_core::{Algorithm, MAX_SLIDING_LOG_LIMIT, Policy, PolicyError};

use super::bans::OnLimited;
use super::cost::CostFrom;
use super::lists::Lists;
use super::route::RouteMatch;

/// A rule of the engine that applies to requests (it has a `match`).
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// The rule's name (its name in headers and problem bodies too).
    pub name: String,
    /// Its policy.
    pub policy: Policy,
    /// The requests it applies to.
    pub route: RouteMatch,
    /// The shedding priority of those requests (`priority` in its `match`), when the
    /// gateway sheds by priority and no shedding route of its own matches them.
    pub priority: Option<weir_core::Priority>,
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
    /// When not empty, a request's cost is reserved before it is forwarded and kept
    /// only when the answer has one of these statuses (it is given back otherwise).
    pub count_statuses: Vec<u16>,
    /// Answers with these statuses reset the caller's key (a successful login).
    pub reset_statuses: Vec<u16>,
    /// Where the answer states the request's actual cost, when `cost` is only the
    /// estimate reserved before it (the tokens a model will generate).
    pub cost_from: Option<CostFrom>,
    /// The most a request's stated cost counts (`cost_from.max`): a cost stated above
    /// it is charged as it. `None`: [`DEFAULT_DEBT_BUCKETS`] times the caller's burst.
    pub cost_max: Option<u64>,
    /// Growing waits for callers who reach the limit again and again.
    pub lockout: Option<Lockout>,
    /// Bans for keys it denies again and again (`on_limited`).
    pub on_limited: Option<OnLimited>,
    /// Its own allow and deny lists.
    pub lists: Option<Lists>,
    /// What to do when the store cannot decide.
    pub failure: Failure,
    /// A shorter wait for the store than the store's own `timeout`, for this rule's
    /// requests (the shortest of the rules that apply wins).
    pub store_timeout: Option<Duration>,
    /// While the shared store is down, each instance enforces this part of a caller's
    /// limit locally (its plan's or its own custom limit, divided by this, rounded
    /// up): the number of instances, times the number of regions for a global rule.
    pub fallback_parts: u64,
    /// Whether it limits requests in flight (`algorithm: concurrency`): `policy`'s
    /// limit is its number of slots, taken at the decision and released when the
    /// request ends.
    pub in_flight: bool,
}

impl Rule {
    /// What this instance enforces of `policy` (the caller's) while the shared store is
    /// down: its part of the limit and of the burst, at least one unit each.
    pub(crate) fn fallback_policy(&self, policy: &Policy) -> Policy {
        let part = |n: u64| n.div_ceil(self.fallback_parts.max(1)).max(1);
        policy
            .relimit(part(policy.limit()), policy.burst().map(part))
            .unwrap_or(*policy)
    }
}

impl Rule {
    /// What a request with this method, host and path costs under the rule.
    pub(crate) fn cost_of(&self, method: &Method, host: Option<&str>, path: &str) -> u64 {
        self.costs
            .iter()
            .find(|(route, _)| route.matches(method, host, path))
            .map_or(self.cost, |&(_, cost)| cost)
    }

    /// Whether the rule counts a request only by its outcome (reserve, then settle).
    pub(crate) fn counts_by_outcome(&self) -> bool {
        !self.count_statuses.is_empty()
    }

    /// Whether a request's reservation must wait for the answer's status.
    pub(super) fn settles(&self) -> bool {
        self.counts_by_outcome() || !self.reset_statuses.is_empty() || self.cost_from.is_some()
    }
}

/// How many full buckets a stated cost may owe by default (`cost_from` without `max`).
pub(super) const DEFAULT_DEBT_BUCKETS: u64 = 16;

/// How many full buckets a `max` may reach: a charge is made in steps of one bucket.
pub(crate) const MAX_DEBT_BUCKETS: u64 = 64;

/// What a rule does when the shared store cannot decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Failure {
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
pub(crate) struct Lockout {
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
    pub(crate) fn new(rule: &str, growth: u32, max: Duration) -> Result<Self, PolicyError> {
        let memory = max.max(Duration::from_secs(24 * 3600));
        Ok(Self {
            growth,
            max,
            in_force_rule: format!("{rule}/lockout"),
            count_rule: format!("{rule}/lockouts"),
            probe: Policy::new(Algorithm::Gcra, 1, max, None)?,
            counter: Policy::new(Algorithm::SlidingLog, MAX_SLIDING_LOG_LIMIT, memory, None)?,
        })
    }

    /// The wait of the `n`-th lockout (from 1) for a rule of `period`.
    pub(crate) fn wait(&self, period: Duration, n: u64) -> Duration {
        let factor =
            u32::try_from(n.saturating_sub(1)).map_or(u32::MAX, |e| self.growth.saturating_pow(e));
        period.saturating_mul(factor).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockout_waits_grow_to_the_cap() {
        let lockout = Lockout::new("login", 2, Duration::from_secs(3600)).unwrap();
        let period = Duration::from_secs(900);
        assert_eq!(lockout.wait(period, 1), period);
        assert_eq!(lockout.wait(period, 2), period * 2);
        assert_eq!(lockout.wait(period, 3), Duration::from_secs(3600));
        assert_eq!(lockout.wait(period, 200), Duration::from_secs(3600));
    }
}
