//! One request through the gateway: identify, check every limit that applies, answer
//! 429 or forward, then count the outcome.

use std::cell::RefCell;
use std::fmt::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use weir_core::{Algorithm, Decision, MAX_SLIDING_LOG_LIMIT, Policy};
use weir_store::{Check, Key, MemoryStore, MemoryStoreConfig, Store, StoreError, SystemClock};

use super::client_ip::client_ip;
use super::identity::RequestFacts;
use super::plan::CallerPlan;
use super::pool::UpstreamPool;
use super::proxy::forward;
use super::{CLIENT_IP, Failure, GatewayConfig, GatewayRule};
use crate::api::Problem;
use crate::api::headers::{self, Quota, ceil_secs};

/// The header that reports shadow rules that would have denied the request.
pub const SHADOW_HEADER: HeaderName = HeaderName::from_static("weir-shadow-limited");

/// The gateway with its store and upstream client.
pub struct Gateway {
    config: GatewayConfig,
    store: Arc<dyn Store>,
    /// This instance's own limiter, for fail-open rules while the store is down.
    fallback: Arc<MemoryStore>,
    /// Tells this gateway's upstream clients apart from a reloaded one's.
    id: u64,
}

/// Gateways made so far, for their ids.
static GATEWAYS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Each server thread's connections to upstreams, by gateway id: a connection
    /// stays on the thread (and runtime) that opened it.
    static POOLS: RefCell<Vec<(u64, Arc<UpstreamPool>)>> = const { RefCell::new(Vec::new()) };
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("rules", &self.config.rules.len())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway for `config`, keeping limit state in `store`.
    pub fn new(config: GatewayConfig, store: Arc<dyn Store>) -> Self {
        let local = MemoryStore::new(MemoryStoreConfig::default(), Arc::new(SystemClock::new()));
        Self {
            config,
            store,
            fallback: Arc::new(local),
            id: GATEWAYS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// This thread's connections to the upstream.
    fn pool(&self) -> Arc<UpstreamPool> {
        POOLS.with(|pools| {
            let mut pools = pools.borrow_mut();
            if let Some((_, found)) = pools.iter().find(|(id, _)| *id == self.id) {
                return Arc::clone(found);
            }
            // Pools of gateways replaced by reloads go, oldest first.
            if pools.len() >= 4 {
                pools.remove(0);
            }
            let upstream = &self.config.upstream;
            let made = UpstreamPool::new(&upstream.base, upstream.connect_timeout);
            pools.push((self.id, Arc::clone(&made)));
            made
        })
    }
}

/// A rule that applies to a request, with whose key and what policy.
struct Applied<'a> {
    rule: &'a GatewayRule,
    identity: String,
    policy: Policy,
    cost: u64,
}

impl Applied<'_> {
    fn check(&self, cost: u64) -> Check<'_> {
        Check {
            key: Key {
                rule: &self.rule.name,
                identity: &self.identity,
            },
            policy: &self.policy,
            cost,
        }
    }
}

/// The gateway's handler: every request on its listener, from `peer`.
pub async fn handle(gateway: Arc<Gateway>, peer: SocketAddr, request: Request) -> Response {
    let config = &gateway.config;
    let (parts, body) = request.into_parts();
    let ip = client_ip(peer.ip(), &parts.headers, &config.trusted_proxies);
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let matched: Vec<&GatewayRule> = config
        .rules
        .iter()
        .filter(|r| r.route.matches(&parts.method, host, parts.uri.path()))
        .collect();
    if matched.is_empty() {
        return forward(&gateway.pool(), &config.upstream, parts, body, peer.ip()).await;
    }

    // Read the body only when a rule identifies callers by it; then forward the copy.
    let reads_body = matched
        .iter()
        .flat_map(|r| &r.key)
        .any(|name| config.identities.get(name).is_some_and(|i| i.reads_body()));
    let (body, bytes) = if reads_body {
        let limit = config.upstream.max_body_bytes;
        match tokio::time::timeout(
            config.upstream.body_timeout,
            axum::body::to_bytes(body, limit),
        )
        .await
        {
            Ok(Ok(bytes)) => (Body::from(bytes.clone()), Some(bytes)),
            Ok(Err(_)) => return Problem::body_too_large(limit).into_response(),
            Err(_) => return Problem::body_timeout(config.upstream.body_timeout).into_response(),
        }
    } else {
        (body, None)
    };
    let facts = RequestFacts {
        headers: &parts.headers,
        client_ip: ip,
        body: bytes.as_deref(),
    };
    let applied: Vec<Applied<'_>> = {
        // Each identity is worked out once per request, however many rules use it (a JWT
        // is verified once).
        let known: RefCell<Vec<(&str, Option<String>)>> = RefCell::new(Vec::new());
        let identity_of = |name: &str| -> Option<String> {
            if name == CLIENT_IP {
                return Some(ip.to_string());
            }
            if let Some((_, value)) = known.borrow().iter().find(|(n, _)| *n == name) {
                return value.clone();
            }
            let (name, source) = config.identities.get_key_value(name)?;
            let value = source.identify(facts);
            known.borrow_mut().push((name, value.clone()));
            value
        };
        let plan = config.plans.as_ref().map(|p| p.plan_of(facts, identity_of));
        matched
            .into_iter()
            .filter(|r| {
                r.plans.is_empty() || plan.as_ref().is_some_and(|p| r.plans.contains(&p.name))
            })
            .map(|rule| Applied {
                rule,
                identity: identity(rule, ip, identity_of),
                policy: policy(rule, plan.as_ref()),
                cost: rule.cost_of(&parts.method, host, parts.uri.path()),
            })
            .collect()
    };

    // Decide on the shared store; if it cannot, apply each rule's failure policy:
    // fail-closed rules answer 503, fail-open ones are decided by the local fallback.
    let mut store: &dyn Store = gateway.store.as_ref();
    let fallback_applied: Vec<Applied<'_>>;
    let mut in_use = &applied;
    let quotas = match limits(store, in_use, store_timeout(&applied)).await {
        Ok(quotas) => quotas,
        Err(error) => {
            if let Some(closed) = applied
                .iter()
                .find(|a| !a.rule.shadow && a.rule.failure == Failure::Closed)
            {
                tracing::warn!(%error, rule = %closed.rule.name, "store unavailable: failing closed");
                return Problem::store_unavailable("the rate limiter cannot decide right now")
                    .into_response();
            }
            tracing::debug!(%error, "store unavailable: failing open to the local fallback");
            fallback_applied = applied
                .iter()
                .map(|a| Applied {
                    policy: a.rule.fallback_policy,
                    identity: a.identity.clone(),
                    ..*a
                })
                .collect();
            in_use = &fallback_applied;
            store = gateway.fallback.as_ref();
            match limits(store, in_use, None).await {
                Ok(quotas) => quotas,
                Err(error) => return store_failed(&error),
            }
        }
    };
    let quotas = match quotas {
        Ok(quotas) => quotas,
        Err(denied) => return too_many(&denied, config.legacy_headers),
    };
    let shadow: Vec<&Applied<'_>> = in_use.iter().filter(|a| a.rule.shadow).collect();
    let shadow_denied = shadow_check(store, &shadow).await;

    let mut response = forward(&gateway.pool(), &config.upstream, parts, body, peer.ip()).await;
    add_quota_headers(response.headers_mut(), &quotas, config.legacy_headers);
    if !shadow_denied.is_empty() {
        tracing::info!(rules = ?shadow_denied, client = %ip, "shadow rules would have denied");
        if let Ok(value) = HeaderValue::try_from(shadow_denied.join(", ")) {
            response.headers_mut().insert(SHADOW_HEADER, value);
        }
    }
    count_outcome(store, in_use, response.status()).await;
    response
}

/// The decisions of every enforcing rule: `Ok(quotas)` when all pass, `Err(quotas)`
/// when one denies (nothing consumed). Rules counted by outcome (and their lockouts)
/// are previewed; the others are checked together, all or nothing.
async fn limits<'a>(
    store: &dyn Store,
    applied: &'a [Applied<'a>],
    timeout: Option<Duration>,
) -> Result<Result<Quotas<'a>, Quotas<'a>>, StoreError> {
    let enforced = |a: &&Applied<'_>| !a.rule.shadow;
    let by_outcome: Vec<&Applied<'_>> = applied
        .iter()
        .filter(enforced)
        .filter(|a| !a.rule.count_statuses.is_empty())
        .collect();
    let up_front: Vec<&Applied<'_>> = applied
        .iter()
        .filter(enforced)
        .filter(|a| a.rule.count_statuses.is_empty())
        .collect();

    // Limits counted by outcome block once reached, but count nothing yet; so do the
    // lockouts in force.
    let lockouts: Vec<LockoutKeys<'_>> = by_outcome
        .iter()
        .filter_map(|a| LockoutKeys::of(a))
        .collect();
    let mut previews: Vec<Check<'_>> = by_outcome.iter().map(|a| a.check(a.cost)).collect();
    previews.extend(lockouts.iter().map(LockoutKeys::in_force));
    let mut outcome_decisions = if previews.is_empty() {
        Vec::new()
    } else {
        decide(store, &previews, true, timeout).await?
    };
    let lockout_decisions = outcome_decisions.split_off(by_outcome.len());
    for (keys, locked) in lockouts.iter().zip(lockout_decisions) {
        if let (false, Some(wait)) = (locked.allowed, locked.retry_after) {
            let i = by_outcome
                .iter()
                .position(|a| std::ptr::eq(*a, keys.applied))
                .unwrap_or_default();
            let d = &mut outcome_decisions[i];
            *d = Decision {
                allowed: false,
                remaining: 0,
                retry_after: Some(wait),
                reset_after: d.reset_after.max(wait),
                ..*d
            };
        }
    }
    let mut quotas: Quotas<'a> = by_outcome.iter().copied().zip(outcome_decisions).collect();
    if quotas.iter().any(|(_, d)| !d.allowed) {
        return Ok(Err(quotas));
    }
    let checks: Vec<Check<'_>> = up_front.iter().map(|a| a.check(a.cost)).collect();
    let decisions = if checks.is_empty() {
        Vec::new()
    } else {
        decide(store, &checks, false, timeout).await?
    };
    quotas.extend(up_front.iter().copied().zip(decisions));
    if quotas.iter().any(|(_, d)| !d.allowed) {
        return Ok(Err(quotas));
    }
    Ok(Ok(quotas))
}

/// The shortest store timeout of the rules that apply, if any sets one.
fn store_timeout(applied: &[Applied<'_>]) -> Option<Duration> {
    applied.iter().filter_map(|a| a.rule.store_timeout).min()
}

/// Previews or checks `checks`, waiting at most `timeout` when given.
async fn decide(
    store: &dyn Store,
    checks: &[Check<'_>],
    preview: bool,
    timeout: Option<Duration>,
) -> Result<Vec<Decision>, StoreError> {
    match timeout {
        Some(timeout) => store.decide_within(checks, preview, timeout).await,
        None if preview => store.preview_all(checks).await,
        None => store.check_all(checks).await,
    }
}

/// Rules that applied, with what each decided.
type Quotas<'a> = Vec<(&'a Applied<'a>, Decision)>;

/// The rule's key for this caller: its identities, tagged and joined; a caller lacking
/// one is counted by IP address (anonymous traffic).
fn identity(
    rule: &GatewayRule,
    ip: IpAddr,
    identity_of: impl Fn(&str) -> Option<String>,
) -> String {
    let mut key = String::new();
    for name in &rule.key {
        let Some(value) = identity_of(name) else {
            key.clear();
            let _ = write!(key, "{CLIENT_IP}={ip}");
            return key;
        };
        push_tagged(&mut key, name, &value);
    }
    key
}

/// Appends `name=value` to a key, `&`-separated, with `%` and `&` in the value escaped,
/// so that different lists of identities never make the same key.
fn push_tagged(key: &mut String, name: &str, value: &str) {
    if !key.is_empty() {
        key.push('&');
    }
    key.push_str(name);
    key.push('=');
    for part in value.split_inclusive(['%', '&']) {
        match part.strip_suffix(['%', '&']) {
            Some(plain) => {
                key.push_str(plain);
                key.push_str(if part.ends_with('%') { "%25" } else { "%26" });
            }
            None => key.push_str(part),
        }
    }
}

/// The rule's policy, with the caller's custom limit when its plan gives one.
fn policy(rule: &GatewayRule, plan: Option<&CallerPlan>) -> Policy {
    let p = rule.policy;
    match plan.and_then(|plan| plan.limit.filter(|_| rule.plans.contains(&plan.name))) {
        // Validated when the configuration was loaded.
        Some(limit) => Policy::new(p.algorithm(), limit, p.period(), p.burst()).unwrap_or(p),
        None => p,
    }
}

/// Counts shadow rules; returns the names of those that would have denied.
async fn shadow_check(store: &dyn Store, shadow: &[&Applied<'_>]) -> Vec<String> {
    if shadow.is_empty() {
        return Vec::new();
    }
    let checks: Vec<Check<'_>> = shadow.iter().map(|a| a.check(a.cost)).collect();
    match store.check_all(&checks).await {
        Ok(decisions) => shadow
            .iter()
            .zip(decisions)
            .filter(|(_, d)| !d.allowed)
            .map(|(a, _)| a.rule.name.clone())
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "shadow rules could not be checked");
            Vec::new()
        }
    }
}

/// After the upstream answered: counts the outcomes that count (starting a lockout
/// when one reaches its limit), resets on success.
async fn count_outcome(store: &dyn Store, applied: &[Applied<'_>], status: StatusCode) {
    let status = status.as_u16();
    let counted: Vec<&Applied<'_>> = applied
        .iter()
        .filter(|a| a.rule.count_statuses.contains(&status))
        .collect();
    if !counted.is_empty() {
        let checks: Vec<Check<'_>> = counted.iter().map(|a| a.check(a.cost)).collect();
        match store.check_all(&checks).await {
            Ok(decisions) => {
                for (a, d) in counted.iter().zip(decisions) {
                    if let (true, 0, Some(keys)) = (d.allowed, d.remaining, LockoutKeys::of(a)) {
                        keys.begin(store).await;
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "an outcome could not be counted"),
        }
    }
    for a in applied
        .iter()
        .filter(|a| a.rule.reset_statuses.contains(&status))
    {
        let lockout = LockoutKeys::of(a);
        let mut keys = vec![a.check(0).key];
        if let Some(lockout) = &lockout {
            keys.extend([lockout.in_force_key(), lockout.count_key()]);
        }
        for key in keys {
            if let Err(error) = store.reset(key).await {
                tracing::warn!(%error, "a key could not be reset");
            }
        }
    }
}

/// The lockout keys of one caller under one rule.
struct LockoutKeys<'a> {
    applied: &'a Applied<'a>,
    lockout: &'a super::Lockout,
}

impl<'a> LockoutKeys<'a> {
    fn of(applied: &'a Applied<'a>) -> Option<Self> {
        Some(Self {
            applied,
            lockout: applied.rule.lockout.as_ref()?,
        })
    }

    fn in_force_key(&self) -> Key<'_> {
        Key {
            rule: &self.lockout.in_force_rule,
            identity: &self.applied.identity,
        }
    }

    fn count_key(&self) -> Key<'_> {
        Key {
            rule: &self.lockout.count_rule,
            identity: &self.applied.identity,
        }
    }

    /// A preview that denies while a lockout is in force, until it ends.
    fn in_force(&self) -> Check<'_> {
        Check {
            key: self.in_force_key(),
            policy: &self.lockout.probe,
            cost: 1,
        }
    }

    /// Starts the next lockout: the n-th remembered lasts period × growth^(n-1).
    async fn begin(&self, store: &dyn Store) {
        let count = Check {
            key: self.count_key(),
            policy: &self.lockout.counter,
            cost: 1,
        };
        let n = match store.check_all(std::slice::from_ref(&count)).await {
            Ok(d) => MAX_SLIDING_LOG_LIMIT - d[0].remaining,
            Err(error) => return tracing::warn!(%error, "a lockout could not be counted"),
        };
        let wait = self.lockout.wait(self.applied.policy.period(), n);
        let Ok(policy) = Policy::new(Algorithm::Gcra, 1, wait, None) else {
            return;
        };
        let lock = Check {
            key: self.in_force_key(),
            policy: &policy,
            cost: 1,
        };
        if let Err(error) = store.check_all(std::slice::from_ref(&lock)).await {
            tracing::warn!(%error, "a lockout could not be started");
        }
        tracing::info!(rule = %self.applied.rule.name, lockout = n, ?wait, "caller locked out");
    }
}

fn quota_list<'a>(quotas: &'a [(&'a Applied<'a>, Decision)]) -> Vec<Quota<'a>> {
    quotas
        .iter()
        .map(|(a, d)| Quota {
            name: &a.rule.name,
            policy: &a.policy,
            decision: d,
        })
        .collect()
}

fn add_quota_headers(headers: &mut HeaderMap, quotas: &[(&Applied<'_>, Decision)], legacy: bool) {
    let list = quota_list(quotas);
    headers::insert(headers, &list);
    if legacy {
        headers::insert_legacy(headers, &list);
    }
}

/// The 429 answer: problem+json naming the violated rules, `Retry-After`, RateLimit.
fn too_many(quotas: &[(&Applied<'_>, Decision)], legacy: bool) -> Response {
    let denied = quotas.iter().filter(|(_, d)| !d.allowed);
    let violated = denied.clone().map(|(a, _)| a.rule.name.clone()).collect();
    // Retrying helps only if every denying limit gives a retry time.
    let retry = denied
        .map(|(_, d)| d.retry_after)
        .try_fold(std::time::Duration::ZERO, |longest, r| {
            r.map(|r| longest.max(r))
        });
    let mut response = Problem::rate_limited(violated, retry.map(ceil_secs)).into_response();
    add_quota_headers(response.headers_mut(), quotas, legacy);
    response
}

fn store_failed(error: &weir_store::StoreError) -> Response {
    tracing::warn!(%error, "the store could not decide");
    Problem::store_unavailable(error.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::push_tagged;

    fn key_of(identities: &[(&str, String)]) -> String {
        let mut key = String::new();
        for (name, value) in identities {
            push_tagged(&mut key, name, value);
        }
        key
    }

    #[test]
    fn values_are_escaped() {
        let key = key_of(&[("user", "a&b%c".into()), ("client_ip", "::1".into())]);
        assert_eq!(key, "user=a%26b%25c&client_ip=::1");
    }

    proptest! {
        /// A value holding `&name=` cannot pass for a second identity, nor an escape
        /// for the character it stands for.
        #[test]
        fn keys_are_injective(
            a in proptest::collection::vec("[a-c&%=]{0,6}", 2),
            b in proptest::collection::vec("[a-c&%=]{0,6}", 2),
        ) {
            let names = ["user", "route"];
            let a: Vec<(&str, String)> = names.iter().copied().zip(a).collect();
            let b: Vec<(&str, String)> = names.iter().copied().zip(b).collect();
            prop_assert_eq!(a == b, key_of(&a) == key_of(&b));
        }
    }
}
