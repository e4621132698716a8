//! The engine: every decision weir makes, whichever front door asked.
//!
//! A front door reads a request's [`Facts`] and asks [`Engine::decide`]; the engine
//! finds the rules that apply (route, method, host, the caller's plan), works out each
//! identity once, prices the request, and checks every enforcing rule on the store in
//! one all-or-nothing step, rules counted by outcome included: their cost is
//! *reserved* before the request goes on, and the [`Settlement`] that comes with the
//! verdict keeps it or gives it back once the answer's status is known. A settlement
//! that is never settled (the client hung up, the caller forgot) keeps its reservation:
//! an attempt that reached the app counts. When the shared store cannot decide, each
//! rule's failure policy applies before anything goes on: fail closed (503) or fail
//! open to this instance's share of the limit, on a local store. The front doors only
//! translate the [`Verdict`] (a 429, a 503, or forward and settle).

mod admin;
mod denial_log;
mod facts;
pub mod identity;
mod key;
mod pending;
pub mod plan;
pub mod route;
mod rule;
mod settlement;
mod verdict;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::Method;
use weir_core::{Clock, Decision, Policy};
use weir_store::{Check, Key, MemoryStore, MemoryStoreConfig, Store, StoreError};

pub use self::admin::KeyState;
use self::denial_log::DenialLog;
pub use self::facts::Facts;
use self::identity::IdentitySource;
use self::key::Identities;
use self::pending::Pending;
pub use self::pending::SettlementId;
use self::plan::{CallerPlan, Plans};
pub use self::rule::{Failure, Lockout, Rule};
pub use self::settlement::Settlement;
use self::settlement::{Reserved, StoreUsed};
pub use self::verdict::{Allowed, Denied, Refusal, Refused, RuleDecision, Unavailable, Verdict};
use crate::config::{Config, RuleConfig, StoreConfig};
use crate::metrics::{EngineMetrics, Metrics, NONE, Outcome, RuleShape, StoreOp};
use crate::request::PathOptions;

/// The identity every engine has: the client's IP address.
pub const CLIENT_IP: &str = "client_ip";

/// The most keys the local fallback store holds while the shared store is down.
const FALLBACK_MAX_KEYS: usize = 1_000_000;

/// How often, at most, the engine logs that it decides on the local fallback.
const FALLBACK_LOG_EVERY: u64 = 10_000_000_000;

/// What the engine needs to decide requests: the rules with a `match`, and how callers
/// are identified and given plans.
#[derive(Debug, Clone)]
pub struct Routing {
    /// Named ways to identify callers.
    pub identities: HashMap<String, IdentitySource>,
    /// How callers get their plan, if plans are used.
    pub plans: Option<Plans>,
    /// The rules with a `match`, in file order.
    pub rules: Vec<Rule>,
    /// Also send `RateLimit-Limit/Remaining/Reset` and `X-RateLimit-*`.
    pub legacy_headers: bool,
    /// IPv6 clients are keyed by this prefix of their address.
    pub ipv6_prefix: u8,
    /// How request paths are read.
    pub paths: PathOptions,
    /// Whether a request for a host no rule names goes on unlimited (when rules name
    /// hosts); else it is refused.
    pub forward_unknown_hosts: bool,
}

/// Decides requests against the configured rules, on one store.
///
/// Cheap to share (`Arc<Engine>`); a reload builds a new one. Time (for the local
/// fallback and for settlements left pending) comes from the clock it is given.
pub struct Engine {
    /// Every rule, in file order, and by name (looked up on every decision API call:
    /// foldhash, several times quicker than SipHash on short names, and seeded).
    rules: Vec<RuleConfig>,
    named: HashMap<String, usize, foldhash::fast::RandomState>,
    routing: Routing,
    /// Per routed rule, whether its key reads a body field: worked out at load, not
    /// per request.
    reads_body: Vec<bool>,
    /// The hosts the routed rules name (empty: no rule names one).
    named_hosts: Vec<String>,
    store: Arc<dyn Store>,
    /// This instance's own limiter, for fail-open rules while a shared store is down;
    /// none when the store is in process (it never becomes unreachable).
    fallback: Option<MemoryStore>,
    clock: Arc<dyn Clock>,
    pending: Pending,
    /// When the engine last logged that it decides on the fallback.
    fallback_logged: AtomicU64,
    metrics: EngineMetrics,
    /// Per routed rule, its series in `metrics`.
    series: Vec<usize>,
    denials: DenialLog,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rules", &self.named.len())
            .field("routed", &self.routing.rules.len())
            .finish_non_exhaustive()
    }
}

/// The rules whose route matches a request, found from its request line alone (before
/// its body is read, which only some rules need).
#[derive(Debug, Default)]
pub struct Routed {
    rules: Vec<usize>,
    reads_body: bool,
}

impl Routed {
    /// Whether no rule applies: the request goes on unlimited.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The index of the first rule that applies (the request's route, in metrics).
    pub fn first(&self) -> Option<usize> {
        self.rules.first().copied()
    }

    /// Whether a rule that applies keys on a field of the body.
    pub fn reads_body(&self) -> bool {
        self.reads_body
    }
}

/// One rule applied to one request: whose key, under which policy, at what cost.
#[derive(Debug)]
struct Applied<'e> {
    index: usize,
    rule: &'e Rule,
    identity: String,
    /// Whether the identities were written exactly as keyed (else no reset).
    exact: bool,
    policy: Policy,
    cost: u64,
}

impl Applied<'_> {
    fn check(&self) -> Check<'_> {
        Check {
            key: Key {
                rule: &self.rule.name,
                identity: &self.identity,
            },
            policy: &self.policy,
            cost: self.cost,
        }
    }
}

impl Engine {
    /// An engine for the configuration's rules, keeping state in `store` and reading
    /// time from `clock`, counting into metrics of its own.
    pub fn new(config: &Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let metrics = Arc::new(Metrics::new(clock.clone()));
        Self::with_metrics(config, store, clock, metrics)
    }

    /// An engine like [`Engine::new`]'s, counting into the process's `metrics` (which
    /// outlive reloads).
    pub fn with_metrics(
        config: &Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let named: HashMap<String, usize, _> = config
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| (rule.name.clone(), i))
            .collect();
        let fallback = matches!(config.store, StoreConfig::Redis(..)).then(|| {
            let limits = MemoryStoreConfig {
                max_keys: FALLBACK_MAX_KEYS,
            };
            MemoryStore::new(limits, clock.clone())
        });
        let routing = config.routing.clone();
        let reads_body = routing
            .rules
            .iter()
            .map(|rule| {
                rule.key.iter().any(|name| {
                    routing
                        .identities
                        .get(name)
                        .is_some_and(IdentitySource::reads_body)
                })
            })
            .collect();
        let mut named_hosts: Vec<String> = routing
            .rules
            .iter()
            .filter_map(|r| r.route.host.clone())
            .collect();
        named_hosts.sort();
        named_hosts.dedup();
        let metrics = engine_metrics(config, metrics);
        let denials = DenialLog::new(clock.clone());
        let series = routing
            .rules
            .iter()
            .map(|rule| named.get(&rule.name).copied().unwrap_or(usize::MAX))
            .collect();
        Self {
            rules: config.rules.clone(),
            named,
            routing,
            reads_body,
            named_hosts,
            store,
            fallback,
            pending: Pending::default(),
            clock,
            fallback_logged: AtomicU64::new(0),
            metrics,
            series,
            denials,
        }
    }

    /// What the engine counts into.
    pub fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    /// The store the engine decides on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The rule with this name (for `POST /v1/check`).
    pub fn rule(&self, name: &str) -> Option<&RuleConfig> {
        self.named.get(name).map(|&i| &self.rules[i])
    }

    /// Every rule, in file order.
    pub fn rules(&self) -> impl Iterator<Item = &RuleConfig> {
        self.rules.iter()
    }

    /// Whether answers also carry the older `RateLimit-*` and `X-RateLimit-*` fields.
    pub fn legacy_headers(&self) -> bool {
        self.routing.legacy_headers
    }

    /// Checks `cost` units for `identity` under the named `rule`: the decision API's
    /// one-rule question, asked of the shared store.
    ///
    /// State is kept per (rule, identity); rule names cannot contain `:`, so no
    /// identity can reach another rule's state.
    pub async fn check(
        &self,
        rule: &RuleConfig,
        identity: &str,
        cost: u64,
    ) -> Result<Decision, StoreError> {
        // Kept as the gateway keeps keys (a long one by its hash), so that the admin API
        // finds the same key whichever door counted it.
        let stored = key::stored_form(identity);
        let identity = stored.as_ref();
        let key = Key {
            rule: &rule.name,
            identity,
        };
        let timer = self.metrics.store_timer(StoreOp::Check, false);
        let decided = self.store.check(key, &rule.policy, cost).await;
        timer.finish(decided.as_ref().err());
        // A cost-0 check only reads: not a decision.
        if let (Some(&series), true) = (self.named.get(&rule.name), cost > 0) {
            let outcome = match &decided {
                Ok(d) if d.allowed => Outcome::Allowed,
                Ok(_) => {
                    self.log_denial(&rule.name, identity, None, None, "denied");
                    Outcome::Denied
                }
                Err(_) => Outcome::Unavailable,
            };
            let now = self.clock.now();
            self.metrics
                .decided(series, None, outcome, identity, decided.as_ref().ok(), now);
        }
        decided
    }

    /// How request paths are read ([`crate::request::canonical_path`]'s options).
    pub fn path_options(&self) -> PathOptions {
        self.routing.paths
    }

    /// The rules whose route matches a request with this method, host and path (both
    /// canonical). When rules name hosts, a request naming none of them (an IP
    /// literal, another name) is refused with a 421, and one without a host with a
    /// 400, unless `requests.unknown_hosts` is `forward`: the app may serve it as one
    /// of the named hosts.
    pub fn route(
        &self,
        method: &Method,
        host: Option<&str>,
        path: &str,
    ) -> Result<Routed, Refused> {
        if !self.routing.forward_unknown_hosts && !self.named_hosts.is_empty() {
            let Some(host) = host else {
                return Err(self.refused(Refused::bad_request(
                    "this request names no host (Host), and the rules here depend on it",
                )));
            };
            if !self.named_hosts.iter().any(|named| named == host) {
                return Err(self.refused(Refused::misdirected(host)));
            }
        }
        let mut routed = Routed::default();
        for (i, rule) in self.routing.rules.iter().enumerate() {
            if rule.route.matches(method, host, path) {
                routed.rules.push(i);
                routed.reads_body |= self.reads_body[i];
            }
        }
        Ok(routed)
    }

    /// The verdict on a request: allowed (with the quotas to report, and a settlement
    /// for rules counted by outcome), denied, unavailable (the store cannot decide and
    /// the failure policy says 503), or refused (an identity cannot be read one way).
    /// `routed` is what [`Engine::route`] found for the same facts.
    pub async fn decide<'e>(self: &'e Arc<Self>, routed: Routed, facts: &Facts<'_>) -> Verdict<'e> {
        let (applied, plan) = match self.apply(&routed, facts) {
            Ok(applied) => applied,
            Err(refused) => return Verdict::Refused(self.refused(refused)),
        };
        if applied.is_empty() {
            return Verdict::Allowed(Allowed::unlimited());
        }
        let plan = plan.as_ref().map(|p| p.name.as_str());
        let (enforced, shadow): (Vec<Applied<'e>>, Vec<Applied<'e>>) =
            applied.into_iter().partition(|a| !a.rule.shadow);
        let timeout = enforced.iter().filter_map(|a| a.rule.store_timeout).min();

        let reserved = if enforced.is_empty() {
            Ok((true, Vec::new()))
        } else {
            let timer = self.metrics.store_timer(StoreOp::Check, false);
            let reserved = reserve(self.store.as_ref(), &enforced, timeout).await;
            timer.finish(reserved.as_ref().err());
            reserved
        };
        let (used, enforced, (allowed, decisions)) = match reserved {
            Ok(reserved) => (StoreUsed::Shared, enforced, reserved),
            Err(error) => {
                let fallback = match self.fail_over(&enforced, &error) {
                    Ok(fallback) => fallback,
                    Err(outcome) => {
                        self.count_failure(&enforced, plan, outcome);
                        return Verdict::Unavailable(Unavailable::from_error(&error));
                    }
                };
                let enforced = on_fallback(enforced);
                let timer = self.metrics.store_timer(StoreOp::Check, true);
                let reserved = reserve(fallback, &enforced, None).await;
                timer.finish(reserved.as_ref().err());
                match reserved {
                    Ok(reserved) => (StoreUsed::Fallback, enforced, reserved),
                    Err(error) => {
                        self.count_failure(&enforced, plan, Outcome::Unavailable);
                        return Verdict::Unavailable(Unavailable::from_error(&error));
                    }
                }
            }
        };
        self.count(used, &enforced, &decisions, plan, facts);
        let quotas: Vec<RuleDecision<'e>> = enforced
            .iter()
            .zip(&decisions)
            .map(|(a, decision)| RuleDecision {
                name: &a.rule.name,
                policy: a.policy,
                decision: *decision,
            })
            .collect();
        if !allowed {
            return Verdict::Denied(Denied::new(quotas));
        }

        let shadow = match used {
            StoreUsed::Shared => shadow,
            StoreUsed::Fallback => on_fallback(shadow),
        };
        let shadow_denied = self.shadow(used, &shadow, plan, facts).await;
        let reserved: Vec<Reserved> = enforced
            .into_iter()
            .zip(&decisions)
            .filter(|(a, _)| a.rule.settles())
            .map(|(a, decision)| Reserved {
                rule: a.index,
                identity: a.identity,
                policy: a.policy,
                cost: a.cost,
                last_unit: decision.remaining == 0,
                resettable: a.exact,
            })
            .collect();
        let settlement = (!reserved.is_empty()).then(|| Settlement::new(self, used, reserved));
        Verdict::Allowed(Allowed {
            quotas,
            shadow_denied,
            settlement,
        })
    }

    /// The rules of `routed` that apply to this caller (its plan), with their keys,
    /// policies and costs; each identity is worked out once (a JWT is verified once).
    fn apply<'e>(
        &'e self,
        routed: &Routed,
        facts: &Facts<'_>,
    ) -> Result<(Vec<Applied<'e>>, Option<CallerPlan>), Refused> {
        let identities = Identities::new(&self.routing, facts);
        let plan = self
            .routing
            .plans
            .as_ref()
            .map(|p| p.plan_of(*facts, |name| identities.get(name)));
        let applied = routed
            .rules
            .iter()
            .map(|&index| (index, &self.routing.rules[index]))
            .filter(|(_, rule)| {
                rule.plans.is_empty() || plan.as_ref().is_some_and(|p| rule.plans.contains(&p.name))
            })
            .map(|(index, rule)| {
                let key = identities.key(&rule.key);
                Applied {
                    index,
                    rule,
                    identity: key.key,
                    exact: key.exact,
                    policy: policy(rule, plan.as_ref()),
                    cost: rule.cost_of(facts.method, facts.host, facts.path),
                }
            })
            .collect();
        // An identity a rule keys on that cannot be read one way refuses the request:
        // never a weaker key.
        match identities.refused() {
            Some(refused) => Err(refused),
            None => Ok((applied, plan)),
        }
    }

    /// The local store to decide on after the shared one failed with `error`, if every
    /// rule fails open and the error is an outage; else why the request gets a 503
    /// (failed closed, or unavailable). A full store, a refused check or a protocol
    /// error is never an outage.
    fn fail_over(
        &self,
        enforced: &[Applied<'_>],
        error: &StoreError,
    ) -> Result<&MemoryStore, Outcome> {
        let fallback = self.fallback.as_ref().filter(|_| error.is_unavailable());
        let Some(fallback) = fallback else {
            tracing::warn!(%error, "the store could not decide");
            return Err(Outcome::Unavailable);
        };
        if let Some(closed) = enforced.iter().find(|a| a.rule.failure == Failure::Closed) {
            tracing::warn!(%error, rule = %closed.rule.name, "store unavailable: failing closed");
            return Err(Outcome::FailedClosed);
        }
        let now = self.clock.now();
        let last = self.fallback_logged.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= FALLBACK_LOG_EVERY
            && self
                .fallback_logged
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(%error, "store unavailable: deciding fail-open rules on this instance's local fallback limits");
        }
        Ok(fallback)
    }

    /// Counts the shadow rules on the store the request was decided on; returns the
    /// names of those that would have denied (and logs them, rate-limited).
    async fn shadow<'e>(
        &'e self,
        used: StoreUsed,
        shadow: &[Applied<'e>],
        plan: Option<&str>,
        facts: &Facts<'_>,
    ) -> Vec<&'e str> {
        if shadow.is_empty() {
            return Vec::new();
        }
        let checks: Vec<Check<'_>> = shadow.iter().map(Applied::check).collect();
        let timer = self
            .metrics
            .store_timer(StoreOp::Shadow, used == StoreUsed::Fallback);
        let decided = self.store_used(used).check_all(&checks).await;
        timer.finish(decided.as_ref().err());
        match decided {
            Ok(decisions) => {
                let now = self.clock.now();
                let mut denied = Vec::new();
                for (a, d) in shadow.iter().zip(decisions) {
                    let outcome = if d.allowed {
                        Outcome::ShadowAllowed
                    } else {
                        self.log_applied(a, plan, facts, "a shadow rule would have denied");
                        denied.push(a.rule.name.as_str());
                        Outcome::ShadowDenied
                    };
                    let series = self.series[a.index];
                    self.metrics
                        .decided(series, plan, outcome, &a.identity, Some(&d), now);
                }
                denied
            }
            Err(error) => {
                tracing::warn!(%error, "shadow rules could not be checked");
                Vec::new()
            }
        }
    }

    fn store_used(&self, used: StoreUsed) -> &dyn Store {
        match (used, &self.fallback) {
            (StoreUsed::Fallback, Some(fallback)) => fallback,
            _ => self.store.as_ref(),
        }
    }

    /// Counts a refusal, and returns it.
    fn refused(&self, refused: Refused) -> Refused {
        self.metrics.refused(refused.reason);
        refused
    }

    /// Counts each enforcing rule's decision, and logs denials (rate-limited).
    fn count(
        &self,
        used: StoreUsed,
        enforced: &[Applied<'_>],
        decisions: &[Decision],
        plan: Option<&str>,
        facts: &Facts<'_>,
    ) {
        let fallback = used == StoreUsed::Fallback;
        if self.fallback.is_some() {
            self.metrics.decided_on_fallback(fallback);
        }
        let now = self.clock.now();
        for (a, d) in enforced.iter().zip(decisions) {
            let outcome = match (fallback, d.allowed) {
                (false, true) => Outcome::Allowed,
                (false, false) => Outcome::Denied,
                (true, true) => Outcome::FallbackAllowed,
                (true, false) => Outcome::FallbackDenied,
            };
            if !d.allowed {
                self.log_applied(a, plan, facts, "denied");
            }
            let series = self.series[a.index];
            self.metrics
                .decided(series, plan, outcome, &a.identity, Some(d), now);
        }
    }

    /// Counts a request no store could decide.
    fn count_failure(&self, enforced: &[Applied<'_>], plan: Option<&str>, outcome: Outcome) {
        let now = self.clock.now();
        for a in enforced {
            let series = self.series[a.index];
            self.metrics
                .decided(series, plan, outcome, &a.identity, None, now);
        }
    }

    /// Logs a rule's denial of a request (see [`Engine::log_denial`]).
    fn log_applied(&self, a: &Applied<'_>, plan: Option<&str>, facts: &Facts<'_>, message: &str) {
        let client = Some(facts.client_ip);
        self.log_denial(&a.rule.name, &a.identity, plan, client, message);
    }

    /// Logs a denial at info, at most once per rule and identity a minute (and 20 a
    /// second in all). Identities come from callers: control characters are escaped,
    /// so that no identity can forge a log line.
    fn log_denial(
        &self,
        rule: &str,
        identity: &str,
        plan: Option<&str>,
        client: Option<IpAddr>,
        message: &str,
    ) {
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        if let Some(suppressed) = self.denials.admit(rule, identity) {
            tracing::info!(
                rule,
                plan = plan.unwrap_or(NONE),
                client = client.map(|ip| ip.to_string()),
                identity = %identity.escape_debug(),
                suppressed,
                "{message}"
            );
        }
    }

    /// Keeps a settlement for `POST /v1/settle`, under a new id. One left unsettled
    /// past `keep_for` is dropped, and so kept (counted).
    pub fn park(&self, settlement: Settlement, keep_for: Duration) -> SettlementId {
        self.pending.park(settlement, self.clock.now(), keep_for)
    }

    /// Takes back the settlement parked under `id`, if it is still there.
    pub fn unpark(&self, id: SettlementId) -> Option<Settlement> {
        self.pending.unpark(id, self.clock.now())
    }
}

/// The series an engine of `config` counts into: every named rule under every plan it
/// may see, and a gateway route per rule with a `match`.
fn engine_metrics(config: &Config, metrics: Arc<Metrics>) -> EngineMetrics {
    let routing = &config.routing;
    let known: Vec<&str> = routing
        .plans
        .as_ref()
        .map(|p| p.known.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let shapes: Vec<RuleShape<'_>> = config
        .rules
        .iter()
        .map(|rule| {
            let routed = routing.rules.iter().find(|r| r.name == rule.name);
            let mut plans: Vec<&str> = match routed {
                Some(r) if !r.plans.is_empty() => r.plans.iter().map(String::as_str).collect(),
                _ => known.clone(),
            };
            // `/v1/check` asks without a plan.
            plans.push(NONE);
            RuleShape {
                name: &rule.name,
                plans,
                shadow: routed.is_some_and(|r| r.shadow),
            }
        })
        .collect();
    let routes: Vec<&str> = routing.rules.iter().map(|r| r.name.as_str()).collect();
    EngineMetrics::new(metrics, config.store.kind(), &shapes, &routes)
}

/// The rules with each instance's share of their limits, for the local fallback.
fn on_fallback(applied: Vec<Applied<'_>>) -> Vec<Applied<'_>> {
    applied
        .into_iter()
        .map(|a| Applied {
            policy: a.rule.fallback_policy,
            ..a
        })
        .collect()
}

/// The rule's policy, with the caller's custom limit when its plan gives one.
fn policy(rule: &Rule, plan: Option<&CallerPlan>) -> Policy {
    let p = rule.policy;
    match plan.and_then(|plan| plan.limit.filter(|_| rule.plans.contains(&plan.name))) {
        // Validated when the configuration was loaded.
        Some(limit) => Policy::new(p.algorithm(), limit, p.period(), p.burst()).unwrap_or(p),
        None => p,
    }
}

/// Consumes every enforcing rule's cost, all or nothing, in one store step; rules
/// counted by outcome are reserved like the others. A lockout in force denies its rule
/// (and gives back what the step took). Returns whether the request is allowed, and
/// each rule's decision.
async fn reserve(
    store: &dyn Store,
    enforced: &[Applied<'_>],
    timeout: Option<Duration>,
) -> Result<(bool, Vec<Decision>), StoreError> {
    if enforced.is_empty() {
        return Ok((true, Vec::new()));
    }
    let mut checks: Vec<Check<'_>> = enforced.iter().map(Applied::check).collect();
    // The lockouts in force, read (cost 0) in the same step; `locked_rules` says whose.
    let mut locked_rules = Vec::new();
    for (i, a) in enforced.iter().enumerate() {
        if let Some(lockout) = &a.rule.lockout {
            locked_rules.push(i);
            checks.push(Check {
                key: Key {
                    rule: &lockout.in_force_rule,
                    identity: &a.identity,
                },
                policy: &lockout.probe,
                cost: 0,
            });
        }
    }
    let mut decisions = match timeout {
        Some(timeout) => store.decide_within(&checks, false, timeout).await?,
        None => store.check_all(&checks).await?,
    };
    let probes = decisions.split_off(enforced.len());
    let consumed = decisions.iter().all(|d| d.allowed);
    let mut locked = false;
    for (&i, probe) in locked_rules.iter().zip(probes) {
        if probe.remaining == 0 && !probe.reset_after.is_zero() {
            locked = true;
            let d = &mut decisions[i];
            *d = Decision {
                allowed: false,
                remaining: 0,
                retry_after: Some(probe.reset_after),
                reset_after: d.reset_after.max(probe.reset_after),
                ..*d
            };
        }
    }
    if consumed && locked {
        // Nothing may stay consumed for a request that is denied.
        if let Err(error) = store.refund_all(&checks[..enforced.len()]).await {
            tracing::warn!(%error, "a locked-out request's reservation could not be given back");
        }
    }
    Ok((consumed && !locked, decisions))
}
