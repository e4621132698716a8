//! The Prometheus families weir exports, and their label sets.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter as RareCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::{Registry, Unit};

use super::sharded::{Counter, Gauge as SharedGauge, Histogram};

/// A decision of one rule for one request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DecisionLabels {
    pub(super) rule: String,
    pub(super) plan: String,
    pub(super) outcome: &'static str,
}

/// One rule.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RuleLabels {
    pub(super) rule: String,
}

/// Why a request was refused before any rule counted it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: &'static str,
}

/// One store.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StoreLabels {
    pub(super) store: &'static str,
}

/// One listener: `main`, `admin` or `grpc`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ListenerLabels {
    pub(super) listener: &'static str,
}

/// One operation on one store.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StoreOpLabels {
    pub(super) store: &'static str,
    pub(super) operation: &'static str,
}

/// One kind of store error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StoreErrorLabels {
    pub(super) store: &'static str,
    pub(super) kind: &'static str,
}

/// What became of units leased under one rule.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LeaseUnitLabels {
    pub(super) rule: String,
    pub(super) fate: &'static str,
}

/// Units of a global rule, by what became of them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ShareUseLabels {
    pub(super) rule: String,
    pub(super) kind: &'static str,
}

/// A share renewal of a global rule, by outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RenewalLabels {
    pub(super) rule: String,
    pub(super) outcome: &'static str,
}

/// One region (names come from the configuration).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RegionLabels {
    pub(super) region: String,
}

/// A reload's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabels {
    pub(super) result: &'static str,
}

/// What became of one descriptor of a `ShouldRateLimit` call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EnvoyLabels {
    pub(super) outcome: &'static str,
}

/// What became of a settlement sent again to the shared store.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: &'static str,
}

/// No labels: a series that exists only once something makes it (beside a shared
/// store, for the settlements owed to it).
pub(super) type NoLabels = Vec<(&'static str, &'static str)>;

/// The kinds of store errors counted (see `StoreTimer::finish`).
pub(super) const STORE_ERROR_KINDS: [&str; 6] = [
    "timeout",
    "unavailable",
    "full",
    "protocol",
    "policy",
    "other",
];

/// The configuration serving.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ConfigLabels {
    pub(super) sha256: String,
}

/// Gateway answers: the first rule whose route matched (`none` when none did), and the
/// status class (`2xx`...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct GatewayLabels {
    pub(super) route: String,
    pub(super) status: &'static str,
}

/// A door's answers: the door (`gateway`, `auth`...) and the status class (`2xx`...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DoorLabels {
    pub(super) door: &'static str,
    pub(super) status: &'static str,
}

/// Requests the gateway shed: the shedding route (its path prefix; `(none)` for other
/// requests) and its priority.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ShedLabels {
    pub(super) route: String,
    pub(super) priority: &'static str,
}

/// Units of estimated costs trued up when the answer stated the actual cost: the rule,
/// and whether they were given back (`refunded`), charged beyond (`charged`) or stated
/// past the rule's `max` and not charged (`forgiven`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CostLabels {
    pub(super) rule: String,
    pub(super) direction: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

pub(super) fn store_buckets() -> Histogram {
    // 50 µs to about 1.6 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

fn upstream_buckets() -> Histogram {
    // 0.5 ms to about 8 s.
    Histogram::new(exponential_buckets(0.000_5, 2.0, 15))
}

/// Every family, registered once. What requests update is sharded per thread
/// (`sharded.rs`); what changes rarely is prometheus-client's own.
pub(super) struct Families {
    pub(super) decisions: Family<DecisionLabels, Counter>,
    pub(super) near_limit: Family<RuleLabels, Counter>,
    pub(super) near_limit_keys: Family<RuleLabels, Gauge>,
    pub(super) refused: Family<ReasonLabels, Counter>,
    pub(super) store_latency: Histograms<StoreOpLabels>,
    pub(super) store_errors: Family<StoreErrorLabels, Counter>,
    pub(super) store_up: Family<StoreLabels, Gauge>,
    pub(super) breaker_open: Family<StoreLabels, Gauge>,
    pub(super) slots_lost: Family<StoreLabels, Gauge>,
    pub(super) fallback_activations: RareCounter,
    pub(super) reloads: Family<ResultLabels, RareCounter>,
    pub(super) config: Family<ConfigLabels, Gauge>,
    pub(super) gateway_requests: Family<GatewayLabels, Counter>,
    pub(super) upstream_latency: Histogram,
    pub(super) in_flight: SharedGauge,
    pub(super) lease_grants: Family<RuleLabels, Counter>,
    pub(super) lease_units: Family<LeaseUnitLabels, Counter>,
    pub(super) lease_denials: Family<RuleLabels, Counter>,
    pub(super) shed: Family<ShedLabels, Counter>,
    pub(super) shed_limit: Gauge,
    pub(super) connections: Family<ListenerLabels, Gauge>,
    pub(super) connections_max: Family<ListenerLabels, Gauge>,
    pub(super) cost_units: Family<CostLabels, Counter>,
    pub(super) envoy_descriptors: Family<EnvoyLabels, Counter>,
    pub(super) door_answers: Family<DoorLabels, Counter>,
    pub(super) region_units: Family<ShareUseLabels, Counter>,
    pub(super) region_renewals: Family<RenewalLabels, Counter>,
    pub(super) region_share: Family<RuleLabels, Gauge>,
    pub(super) region_rounds: Counter,
    pub(super) region_unreachable: Family<RegionLabels, RareCounter>,
    pub(super) region_untracked: Family<RuleLabels, Counter>,
    pub(super) settlements_owed: Family<NoLabels, Gauge>,
    pub(super) settlements_dropped: Family<ReasonLabels, RareCounter>,
    pub(super) settlements_retried: Family<OutcomeLabels, RareCounter>,
    pub(super) overrides_in_force: Family<RuleLabels, Gauge>,
    pub(super) bans_started: Family<RuleLabels, RareCounter>,
    pub(super) ban_refusals: Family<RuleLabels, RareCounter>,
    pub(super) list_matches: Family<ListLabels, RareCounter>,
    pub(super) slots_held: Family<RuleLabels, Gauge>,
}

/// An allow or deny list that matched a request: `list` (`allow` or `deny`) and
/// `scope` (`global`, or the rule's name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ListLabels {
    pub(super) list: &'static str,
    pub(super) scope: String,
}

impl Families {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            decisions: Family::default(),
            near_limit: Family::default(),
            near_limit_keys: Family::default(),
            refused: Family::default(),
            store_latency: Family::new_with_constructor(store_buckets),
            store_errors: Family::default(),
            store_up: Family::default(),
            breaker_open: Family::default(),
            slots_lost: Family::default(),
            fallback_activations: RareCounter::default(),
            reloads: Family::default(),
            config: Family::default(),
            gateway_requests: Family::default(),
            upstream_latency: upstream_buckets(),
            in_flight: SharedGauge::default(),
            lease_grants: Family::default(),
            lease_units: Family::default(),
            lease_denials: Family::default(),
            shed: Family::default(),
            shed_limit: Gauge::default(),
            connections: Family::default(),
            connections_max: Family::default(),
            cost_units: Family::default(),
            envoy_descriptors: Family::default(),
            door_answers: Family::default(),
            region_units: Family::default(),
            region_renewals: Family::default(),
            region_share: Family::default(),
            region_rounds: Counter::default(),
            region_unreachable: Family::default(),
            region_untracked: Family::default(),
            settlements_owed: Family::default(),
            settlements_dropped: Family::default(),
            settlements_retried: Family::default(),
            overrides_in_force: Family::default(),
            bans_started: Family::default(),
            ban_refusals: Family::default(),
            list_matches: Family::default(),
            slots_held: Family::default(),
        };
        let f = &families;
        registry.register(
            "decisions",
            "Decisions by rule, caller plan (`none` without plans) and outcome: allowed, denied, shadow_allowed, shadow_denied, fallback_allowed, fallback_denied (decided on this instance's local fallback), failed_closed, unavailable",
            f.decisions.clone(),
        );
        registry.register(
            "near_limit_decisions",
            "Requests a rule allowed that left less than 10% of its limit",
            f.near_limit.clone(),
        );
        registry.register(
            "near_limit_keys",
            "Distinct keys a rule allowed with less than 10% of its limit left, over the last minute (estimated, about 3% error)",
            f.near_limit_keys.clone(),
        );
        registry.register(
            "refused_requests",
            "Requests refused before any rule counted them: unreadable (400), unsupported_body (415), unknown_host (421), deny_list (403: the client is on a deny list)",
            f.refused.clone(),
        );
        registry.register_with_unit(
            "store_latency",
            "Time the store took, by store (redis, memory, fallback) and operation",
            Unit::Seconds,
            f.store_latency.clone(),
        );
        registry.register(
            "store_errors",
            "Store operations that failed, by store and kind (timeout, unavailable, full, protocol, policy)",
            f.store_errors.clone(),
        );
        registry.register(
            "overrides_in_force",
            "Overrides set at runtime (admin API, `weir override`) in force now, by rule",
            f.overrides_in_force.clone(),
        );
        registry.register(
            "store_up",
            "Whether the store answers now (1) or not (0): what /readyz reports",
            f.store_up.clone(),
        );
        registry.register(
            "store_breaker_open",
            "Whether the store's circuit breaker is open (1): checks go to each rule's failure policy without waiting",
            f.breaker_open.clone(),
        );
        registry.register(
            "store_slots_lost",
            "Redis Cluster hash slots whose primary the health loop finds unreachable while the rest answer: keys there follow their rules' failure policy, the rest are decided as usual",
            f.slots_lost.clone(),
        );
        registry.register(
            "fallback_activations",
            "Times this instance switched to deciding fail-open rules on its local fallback",
            f.fallback_activations.clone(),
        );
        registry.register(
            "config_reloads",
            "Configuration reloads by result (ok, refused)",
            f.reloads.clone(),
        );
        registry.register(
            "config_loaded",
            "The configuration serving now, by the SHA-256 of its file (always 1)",
            f.config.clone(),
        );
        registry.register(
            "gateway_requests",
            "Gateway answers by route (the first rule whose match applies, before plans; none) and status class",
            f.gateway_requests.clone(),
        );
        registry.register_with_unit(
            "gateway_upstream_latency",
            "Time from forwarding a request to the upstream's answer headers",
            Unit::Seconds,
            f.upstream_latency.clone(),
        );
        registry.register(
            "gateway_in_flight",
            "Gateway requests being answered now",
            f.in_flight.clone(),
        );
        registry.register(
            "lease_grants",
            "Token leases this instance was granted, by rule (rules with `lease`)",
            f.lease_grants.clone(),
        );
        registry.register(
            "lease_units",
            "Units of leases by rule and fate: leased (granted to this instance), returned (given back unspent), expired (not spent and not given back in time: counted as spent)",
            f.lease_units.clone(),
        );
        registry.register(
            "lease_local_denials",
            "Requests this instance denied from a denial the store gave for a leased key, without asking it again",
            f.lease_denials.clone(),
        );
        registry.register(
            "gateway_shed_requests",
            "Requests the gateway shed (503 overloaded) by shedding route (its path prefix, or the name of the rule whose match gave the priority; (none) for others) and priority",
            f.shed.clone(),
        );
        registry.register(
            "cost_settled_units",
            "Units of estimated costs trued up to the cost the answer stated (cost_from), by rule and direction: refunded (used less than reserved) or charged (used more: a debt past the limit) or forgiven (stated past cost_from.max, not charged)",
            f.cost_units.clone(),
        );
        registry.register(
            "gateway_concurrency_limit",
            "The shedder's current limit on requests in flight to the upstream (0 without a shedding section)",
            f.shed_limit.clone(),
        );
        registry.register(
            "connections",
            "Connections a listener (main, admin, grpc) serves now",
            f.connections.clone(),
        );
        registry.register(
            "connections_max",
            "The most connections a listener serves at once (--max-connections): past it, new ones wait in the listen queue",
            f.connections_max.clone(),
        );
        registry.register(
            "envoy_descriptors",
            "Descriptors of Envoy's ShouldRateLimit calls by outcome: ok, over_limit, over_limit_shadow (over, in shadow mode: answered OK), unlimited, no_limit (no limit matched), fallback (decided on this instance's local fallback), unavailable (the store could not decide)",
            f.envoy_descriptors.clone(),
        );
        registry.register(
            "door_answers",
            "Answers by door (gateway, layer, check: /v1/check, decide: /v1/decide, auth: /v1/auth, envoy: ShouldRateLimit over gRPC) and status class: 2xx allowed, 4xx denied or refused, 5xx unavailable (an Envoy call over the limit is 4xx, one the store could not decide 5xx)",
            f.door_answers.clone(),
        );
        registry.register(
            "region_units",
            "Units of the rules with scope global asked for on this instance, by rule and kind: offered (asked for), admitted",
            f.region_units.clone(),
        );
        registry.register(
            "region_renewals",
            "Share renewals this instance made for keys of global rules, by rule and outcome: applied (in force), late (granted but its claim had been replaced or its deadline had passed), stale (home had a later claim)",
            f.region_renewals.clone(),
        );
        registry.register(
            "region_share_units",
            "Units per period granted to the keys of a global rule that this instance renewed in the last rebalance (the region's share of the rule: the sum over its instances)",
            f.region_share.clone(),
        );
        registry.register(
            "region_rebalances",
            "Rebalances of the shares of global rules this instance ran",
            f.region_rounds.clone(),
        );
        registry.register(
            "region_unreachable",
            "Share calls to a region's store that failed or timed out, by region: while they fail, its share of the keys it is home to lapses to the floors",
            f.region_unreachable.clone(),
        );
        registry.register(
            "region_untracked_requests",
            "Requests for keys of a global rule this instance could not track (it tracks 100,000 keys at most): decided at the region's floor",
            f.region_untracked.clone(),
        );
        registry.register(
            "settlements_owed",
            "Settlements (refunds and charges of answered requests) the shared store could not take when they were made, kept by this instance to be written when it answers again",
            f.settlements_owed.clone(),
        );
        registry.register(
            "settlements_dropped",
            "Owed settlements given up, by reason: full (pushed out by newer ones past settlements.max_owed), stale (a try may have been written longer ago than the store remembers settlements: not sent again, so never written twice), refused (the store refused it, not an outage), shutdown (still owed when the instance stopped)",
            f.settlements_dropped.clone(),
        );
        registry.register(
            "settlements_retried",
            "Owed settlements written when the store answered again, by outcome: written, repeated (an earlier try had been written, its answer lost: not written again)",
            f.settlements_retried.clone(),
        );
        registry.register(
            "bans_started",
            "Bans started by a rule's on_limited (a key denied `after` times within `within`), counted by the instance that started each",
            f.bans_started.clone(),
        );
        registry.register(
            "ban_refusals",
            "Requests refused because their key is banned under the rule",
            f.ban_refusals.clone(),
        );
        registry.register(
            "list_matches",
            "Requests an allow list let skip the rules (list=allow) or a deny list refused with 403 (list=deny), by scope: global or the rule's name",
            f.list_matches.clone(),
        );
        registry.register(
            "slots_held",
            "Slots of `concurrency` rules this instance holds now, per rule: its requests (and WebSocket connections) in flight under the rule",
            f.slots_held.clone(),
        );
        families
    }
}
