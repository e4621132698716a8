//! The engine: every decision weir makes, whichever front door asked.
//!
//! A front door reads a request's head with [`Engine::read`] and its facts, and asks
//! [`Engine::decide`]; the engine finds the rules that apply (route, method, host, the caller's plan), works out each
//! identity once, prices the request, and checks every enforcing rule on the store in
//! one all-or-nothing step, rules counted by outcome included: their cost is
//! *reserved* before the request goes on, and the [`Settlement`] that comes with the
//! verdict keeps it or gives it back once the answer's status is known. A settlement
//! that is never settled (the client hung up, the caller forgot) keeps its reservation:
//! an attempt that reached the app counts. When the shared store cannot decide, each
//! rule's failure policy applies before anything goes on: fail closed (503) or fail
//! open to this instance's share of the limit, on a local store. The front doors only
//! translate the [`Verdict`] (a 429, a 503, or forward and settle).

mod accounting;
mod admin;
mod applied;
mod ban_ledger;
mod bans;
mod check;
mod cost;
mod decide;
mod denial_log;
mod descriptors;
mod failover;
mod identity;
mod ids;
mod key;
mod lists;
mod overrides;
mod owed;
mod pending;
mod plan;
mod reserve;
mod route;
mod routed;
mod rule;
mod settlement;
mod shadow;
mod slots;
mod spec;
mod stack;
mod throttle;
mod value_match;
mod verdict;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weir_core::Clock;
use weir_store::{LeasingStore, MemoryStore, MemoryStoreConfig, SlotStore, Store};

pub(crate) use self::bans::{LiftError, MAX_BAN_AFTER, OnLimited};
pub(crate) use self::cost::CostFrom;
use self::denial_log::DenialLog;
pub(crate) use self::descriptors::ENVOY_RULE;
pub(crate) use self::descriptors::{
    AlsoLimit, DescriptorAnswer, DescriptorAsk, DescriptorLimit, Descriptors, EnvoyAnswer,
    EnvoyAsk, NodeId, Quota, Unit,
};
pub(crate) use self::identity::{IdentitySource, Normalize, Source};
use self::ids::RandomIds;
#[cfg(feature = "simulate")]
pub(crate) use self::key::single_identity_key;
pub(crate) use self::lists::{List, Lists};
pub(crate) use self::overrides::{
    Backing as OverrideBacking, EntryChange, ListEntry, ListError, MAX_REASON_CHARS, Override,
    OverrideError, OverrideRequest, Overrides, Replaced, Stored, list_name,
    read_file as read_overrides_file,
};
pub(crate) use self::owed::{DEFAULT_MAX_OWED, Owed};
use self::pending::Pending;
pub use self::pending::SETTLE_WITHIN;
pub(crate) use self::pending::SettlementId;
pub(crate) use self::plan::{KeyPlan, PlanSource, Plans};
pub(crate) use self::route::{PathMatch, RouteMatch, rule_host};
pub(crate) use self::routed::Routed;
use self::rule::DEFAULT_DEBT_BUCKETS;
pub(crate) use self::rule::{Failure, Lockout, MAX_DEBT_BUCKETS, Rule};
pub(crate) use self::settlement::Settlement;
pub(crate) use self::slots::HeldSlots;
pub(crate) use self::spec::MAX_IN_FLIGHT;
pub(crate) use self::spec::RegionSpec;
pub(crate) use self::spec::StoreKind;
pub use self::spec::{EngineSpec, NamedPolicy};
pub(crate) use self::stack::StoreStack;
pub(crate) use self::throttle::Throttle;
pub(crate) use self::value_match::{Condition, ValueMatch, ValueSource};
pub(crate) use self::verdict::{Allowed, Denied, RuleDecision, Verdict};
use crate::metrics::{EngineMetrics, Metrics};
use crate::request::PathOptions;

/// The identity every engine has: the client's IP address.
pub(crate) const CLIENT_IP: &str = "client_ip";

/// How often, at most, the engine logs that it decides on the local fallback.
const FALLBACK_LOG_EVERY: u64 = 10_000_000_000;

/// What the engine needs to decide requests: the rules with a `match`, and how callers
/// are identified and given plans.
#[derive(Debug, Clone)]
pub(crate) struct Routing {
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
    /// The global allow and deny lists, if any.
    pub lists: Option<Lists>,
}

/// Decides requests against the configured rules, on one store.
///
/// Cheap to share (`Arc<Engine>`); a reload builds a new one. Time (for the local
/// fallback and for settlements left pending) comes from the clock it is given.
pub struct Engine {
    /// Every rule, in file order, and by name (looked up on every decision API call:
    /// foldhash, several times quicker than SipHash on short names, and seeded).
    rules: Vec<NamedPolicy>,
    named: HashMap<String, usize, foldhash::fast::RandomState>,
    routing: Routing,
    /// Per routed rule, whether its key reads a body field: worked out at load, not
    /// per request.
    reads_body: Vec<bool>,
    /// The hosts the routed rules name (empty: no rule names one).
    named_hosts: Vec<String>,
    store: Arc<dyn Store>,
    /// The leases of the rules with `lease` (the store above, when there are any on a
    /// shared store).
    leasing: Option<Arc<LeasingStore>>,
    /// This instance's own limiter, for fail-open rules while a shared store is down;
    /// none when the store is in process (it never becomes unreachable).
    fallback: Option<MemoryStore>,
    /// Where the slots of requests in flight are taken (`algorithm: concurrency`).
    slots: Arc<dyn SlotStore>,
    /// Where they are taken while a shared store is down (fail-open rules).
    fallback_slots: Option<Arc<dyn SlotStore>>,
    /// A slot's lease on a shared store (`store.slot_lease`).
    slot_lease: Duration,
    clock: Arc<dyn Clock>,
    pending: Pending,
    /// The ids settlements are written under (see `Store::settle_all`).
    settlement_ids: RandomIds,
    /// Settlements the shared store could not take, written when it answers again
    /// (the instance's, kept across reloads); none on a store in process.
    owed: Option<Arc<Owed>>,
    /// That settlements are owed, logged at most every 10 s.
    owed_logged: throttle::Throttle,
    /// That the engine decides on the fallback, logged at most every 10 s.
    fallback_logged: throttle::Throttle,
    /// That the store could not decide an Envoy request, likewise.
    unavailable_logged: throttle::Throttle,
    metrics: EngineMetrics,
    /// Per routed rule, its series in `metrics`.
    series: Vec<usize>,
    denials: DenialLog,
    /// The overrides set at runtime (the process's, kept across reloads).
    overrides: Arc<Overrides>,
    /// The kind of store it decides on (an override must suit it).
    store_kind: StoreKind,
    /// The bans this instance met (see `bans`).
    bans: bans::BanCache,
    /// The Envoy descriptors, when configured (for the admin API: their named
    /// limits' bans and overrides).
    envoy: Option<Arc<Descriptors>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rules", &self.named.len())
            .field("routed", &self.routing.rules.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine for the rules of `spec`, keeping state in `store` alone (a store in
    /// process: nothing in front of it) and reading time from `clock`, counting into
    /// metrics of its own. A shared store's stack (breaker, fallback, regions, leases)
    /// is built by the service (`weir::service`, `Service::with_store`). With a
    /// `spec` for a shared store, settlements the store cannot take are owed and
    /// written when it answers again (see [`Engine::settle_owed`]).
    pub fn new(spec: &EngineSpec, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let metrics = Arc::new(Metrics::new(clock.clone()));
        let mut stack = StoreStack::alone(store);
        if spec.store.is_shared() {
            stack.owed = Some(Owed::new(spec.max_owed, clock.clone(), &metrics));
        }
        Self::with_stack(spec, stack, clock, metrics)
    }

    /// An engine for the rules of `spec` deciding on a finished store `stack`, counting
    /// into the process's `metrics` (which outlive reloads).
    pub(crate) fn with_stack(
        spec: &EngineSpec,
        stack: StoreStack,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let named: HashMap<String, usize, _> = spec
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| (rule.name.clone(), i))
            .collect();
        let StoreStack {
            store,
            leasing,
            fallback,
            owed,
            slots,
        } = stack;
        // Slots in this process take few keys: one per key with a request in flight.
        let in_memory = || {
            let config = MemoryStoreConfig { max_keys: 1 };
            Arc::new(MemoryStore::new(config, clock.clone())) as Arc<dyn SlotStore>
        };
        let slots = slots.unwrap_or_else(in_memory);
        let fallback_slots = fallback.is_some().then(in_memory);
        let routing = spec.routing.clone();
        let reads_body_field = |name: &str| {
            routing
                .identities
                .get(name)
                .is_some_and(IdentitySource::reads_body)
        };
        // A plan looked up by a body field is needed to know whether a rule for some
        // plans applies at all: without the body every caller would be anonymous.
        let plans_read_body = routing.plans.as_ref().is_some_and(|plans| {
            matches!(&plans.source, PlanSource::File { identity, .. } if reads_body_field(identity))
        });
        let reads_body = routing
            .rules
            .iter()
            .map(|rule| plans_read_body || rule.key.iter().any(|name| reads_body_field(name)))
            .collect();
        let mut named_hosts: Vec<String> = routing
            .rules
            .iter()
            .filter_map(|r| r.route.host.clone())
            .collect();
        named_hosts.sort();
        named_hosts.dedup();
        let metrics = accounting::engine_metrics(spec, metrics);
        let denials = DenialLog::new(clock.clone());
        let overrides = Arc::new(Overrides::in_process(clock.clone()));
        let series = routing
            .rules
            .iter()
            .map(|rule| named.get(&rule.name).copied().unwrap_or(usize::MAX))
            .collect();
        Self {
            rules: spec.rules.clone(),
            named,
            routing,
            reads_body,
            named_hosts,
            store,
            leasing,
            fallback,
            slots,
            fallback_slots,
            slot_lease: spec.slot_lease,
            pending: Pending::default(),
            settlement_ids: RandomIds::default(),
            owed,
            owed_logged: throttle::Throttle::new(FALLBACK_LOG_EVERY),
            clock,
            fallback_logged: throttle::Throttle::new(FALLBACK_LOG_EVERY),
            unavailable_logged: throttle::Throttle::new(FALLBACK_LOG_EVERY),
            metrics,
            series,
            denials,
            overrides,
            store_kind: spec.store,
            bans: bans::BanCache::default(),
            envoy: spec.envoy.clone(),
        }
    }

    /// This engine deciding with the process's overrides `overrides` (kept across
    /// reloads) instead of a book of its own.
    pub(crate) fn with_overrides(mut self, overrides: Arc<Overrides>) -> Self {
        self.overrides = overrides;
        self
    }

    /// The overrides set at runtime.
    pub(crate) fn overrides(&self) -> &Arc<Overrides> {
        &self.overrides
    }

    /// The policy of `rule` (whose own is `base`) for `key`: the override in force,
    /// else `base`.
    fn overridden(&self, rule: &str, key: &str, base: &weir_core::Policy) -> weir_core::Policy {
        self.overrides.policy(rule, key, base).unwrap_or(*base)
    }

    /// What the engine counts into.
    pub(crate) fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    /// The store the engine decides on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Gives back every lease this engine holds, and takes no more (requests still in
    /// flight on it check on the shared store directly): when a reload replaces it,
    /// and at shutdown.
    pub async fn release_leases(&self) {
        if let Some(leasing) = &self.leasing {
            leasing.release_all().await;
        }
    }

    /// At a graceful stop (after the last request): sends the settlements owed to the
    /// shared store (written when it answers again, see [`Engine::new`]) once more, for
    /// at most `within`, and gives up what is left, logging its count. Returns how many
    /// were given up. The queue is the instance's, shared by the engines reloads made:
    /// call it on the engine serving last.
    pub async fn settle_owed(&self, within: Duration) -> usize {
        match &self.owed {
            Some(owed) => owed.settle_before_exit(within).await,
            None => 0,
        }
    }

    /// How often the leases at their deadline must be given back, when this engine
    /// leases and was built outside a Tokio runtime (so its leasing store runs no loop
    /// of its own): for a simulation on a virtual clock, with
    /// [`Engine::give_back_due_leases`].
    #[cfg(feature = "simulate")]
    pub(crate) fn lease_tick(&self) -> Option<Duration> {
        self.leasing.as_ref().map(|l| l.give_back_every())
    }

    /// Gives back the leases at their deadline (see [`Engine::lease_tick`]).
    #[cfg(feature = "simulate")]
    pub(crate) async fn give_back_due_leases(&self) {
        if let Some(leasing) = &self.leasing {
            leasing.give_back_due().await;
        }
    }

    /// The rule with this name (for `POST /v1/check`).
    pub fn rule(&self, name: &str) -> Option<&NamedPolicy> {
        self.named.get(name).map(|&i| &self.rules[i])
    }

    /// Every rule, in file order.
    pub fn rules(&self) -> impl Iterator<Item = &NamedPolicy> {
        self.rules.iter()
    }

    /// Whether answers also carry the older `RateLimit-*` and `X-RateLimit-*` fields.
    pub fn legacy_headers(&self) -> bool {
        self.routing.legacy_headers
    }

    /// Keeps a settlement for `POST /v1/settle`, under a new id. One left unsettled
    /// past [`SETTLE_WITHIN`] is dropped, and so kept (counted).
    pub(crate) fn park(&self, mut settlement: Settlement) -> SettlementId {
        settlement.unhold();
        settlement.release_slots_after(SETTLE_WITHIN);
        self.pending
            .park(settlement, self.clock.now(), SETTLE_WITHIN)
    }

    /// Takes back the settlement parked under `id`, if it is still there.
    pub(crate) fn unpark(&self, id: SettlementId) -> Option<Settlement> {
        self.pending.unpark(id, self.clock.now())
    }
}
