//! The series one engine counts into, resolved when the engine is built: counting a
//! decision is then a few atomic additions, with no label lookup on the request path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use weir_store::StoreError;

use super::families::{
    DecisionLabels, GatewayLabels, ReasonLabels, RuleLabels, StoreErrorLabels, StoreOpLabels,
};
use super::{Metrics, RuleLive};

/// What became of one rule's decision for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The rule allowed it (on the shared store).
    Allowed,
    /// The rule denied it.
    Denied,
    /// A shadow rule would have allowed it.
    ShadowAllowed,
    /// A shadow rule would have denied it.
    ShadowDenied,
    /// Allowed by this instance's local fallback limit (the shared store was down).
    FallbackAllowed,
    /// Denied by the local fallback limit.
    FallbackDenied,
    /// The store was down and the rule fails closed: 503.
    FailedClosed,
    /// The store could not decide (full, or an unexpected answer): 503.
    Unavailable,
}

const OUTCOMES: [Outcome; 8] = [
    Outcome::Allowed,
    Outcome::Denied,
    Outcome::ShadowAllowed,
    Outcome::ShadowDenied,
    Outcome::FallbackAllowed,
    Outcome::FallbackDenied,
    Outcome::FailedClosed,
    Outcome::Unavailable,
];

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::ShadowAllowed => "shadow_allowed",
            Outcome::ShadowDenied => "shadow_denied",
            Outcome::FallbackAllowed => "fallback_allowed",
            Outcome::FallbackDenied => "fallback_denied",
            Outcome::FailedClosed => "failed_closed",
            Outcome::Unavailable => "unavailable",
        }
    }
}

/// The store operations timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    /// The all-or-nothing check of a request's enforcing rules (reservations included).
    Check,
    /// The check of its shadow rules.
    Shadow,
    /// Giving back or resetting reservations once the answer's status is known.
    Settle,
    /// The admin API reading or resetting a key.
    Admin,
}

const OPS: [StoreOp; 4] = [
    StoreOp::Check,
    StoreOp::Shadow,
    StoreOp::Settle,
    StoreOp::Admin,
];

impl StoreOp {
    fn as_str(self) -> &'static str {
        match self {
            StoreOp::Check => "check",
            StoreOp::Shadow => "shadow",
            StoreOp::Settle => "settle",
            StoreOp::Admin => "admin",
        }
    }
}

/// The refusal reasons counted, in the order of [`EngineMetrics::refused`]'s index.
pub const REFUSALS: [&str; 3] = ["unreadable", "unsupported_body", "unknown_host"];

/// The status classes counted.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// One rule's series.
struct RuleSeries {
    name: String,
    live: Arc<RuleLive>,
    limit: u64,
    near_limit: Counter,
    /// Per plan the rule can see (`none` without plans): a counter per outcome.
    by_plan: Vec<(String, [Counter; OUTCOMES.len()])>,
}

/// The series an engine counts into.
pub struct EngineMetrics {
    metrics: Arc<Metrics>,
    rules: Vec<RuleSeries>,
    store: &'static str,
    /// Per operation: on the shared store, then on the fallback.
    latency: [[Histogram; 2]; OPS.len()],
    refused: [Counter; REFUSALS.len()],
    /// Per route (the first rule matched; the last entry: none), per status class.
    gateway: Vec<[Counter; CLASSES.len()]>,
}

impl std::fmt::Debug for EngineMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineMetrics")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

/// A rule as the metrics see it: its name, its limit, the plans it may be counted under.
pub struct RuleShape<'a> {
    /// The rule's name.
    pub name: &'a str,
    /// Its limit (near-limit means less than a tenth of it left).
    pub limit: u64,
    /// The plans it may be counted under (`none` when plans are not used).
    pub plans: Vec<&'a str>,
}

impl EngineMetrics {
    /// The series for rules shaped as `rules`, on a store of `kind` (`memory` or
    /// `redis`), with a gateway route for each name of `routes`.
    pub fn new(
        metrics: Arc<Metrics>,
        kind: &'static str,
        rules: &[RuleShape<'_>],
        routes: &[&str],
    ) -> Self {
        let f = &metrics.families;
        let rules = rules
            .iter()
            .map(|shape| RuleSeries {
                name: shape.name.to_owned(),
                live: metrics.rule(shape.name),
                limit: shape.limit,
                near_limit: f.near_limit.get_or_create_owned(&RuleLabels {
                    rule: shape.name.to_owned(),
                }),
                by_plan: shape
                    .plans
                    .iter()
                    .map(|plan| {
                        let counters = OUTCOMES.map(|outcome| {
                            f.decisions.get_or_create_owned(&DecisionLabels {
                                rule: shape.name.to_owned(),
                                plan: (*plan).to_owned(),
                                outcome: outcome.as_str(),
                            })
                        });
                        ((*plan).to_owned(), counters)
                    })
                    .collect(),
            })
            .collect::<Vec<_>>();
        let latency = OPS.map(|op| {
            [kind, "fallback"].map(|store| {
                f.store_latency.get_or_create_owned(&StoreOpLabels {
                    store,
                    operation: op.as_str(),
                })
            })
        });
        let refused =
            REFUSALS.map(|reason| f.refused.get_or_create_owned(&ReasonLabels { reason }));
        let routes = routes
            .iter()
            .copied()
            .chain(["none"])
            .map(|route| {
                CLASSES.map(|status| {
                    f.gateway_requests.get_or_create_owned(&GatewayLabels {
                        route: route.to_owned(),
                        status,
                    })
                })
            })
            .collect();
        Self {
            metrics,
            rules,
            store: kind,
            latency,
            refused,
            gateway: routes,
        }
    }

    /// The index of the rule named `name` among the series.
    pub fn series_of(&self, name: &str) -> Option<usize> {
        self.rules.iter().position(|r| r.name == name)
    }

    /// The process's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Counts the decision of the rule of series `rule` ([`EngineMetrics::series_of`])
    /// for `identity` under `plan`; `remaining` is what it left (for near-limit), `now`
    /// the engine's time.
    pub fn decided(
        &self,
        rule: usize,
        plan: Option<&str>,
        outcome: Outcome,
        identity: &str,
        remaining: u64,
        now: u64,
    ) {
        let Some(series) = self.rules.get(rule) else {
            return;
        };
        let plan = plan.unwrap_or("none");
        let index = OUTCOMES.iter().position(|o| *o == outcome).unwrap_or(0);
        match series.by_plan.iter().find(|(p, _)| p == plan) {
            Some((_, counters)) => {
                counters[index].inc();
            }
            None => {
                self.metrics
                    .families
                    .decisions
                    .get_or_create(&DecisionLabels {
                        rule: series.name.clone(),
                        plan: plan.to_owned(),
                        outcome: outcome.as_str(),
                    })
                    .inc();
            }
        };
        match outcome {
            Outcome::Allowed => {
                let near = remaining.saturating_mul(10) < series.limit;
                if near {
                    series.near_limit.inc();
                }
                series.live.allowed(identity, near, now);
            }
            Outcome::ShadowAllowed | Outcome::FallbackAllowed => {
                series.live.allowed(identity, false, now);
            }
            Outcome::Denied | Outcome::ShadowDenied | Outcome::FallbackDenied => {
                series.live.denied(identity, now);
            }
            Outcome::FailedClosed | Outcome::Unavailable => {}
        }
    }

    /// Counts a request refused for reason `REFUSALS[reason]`.
    pub fn refused(&self, reason: usize) {
        if let Some(counter) = self.refused.get(reason) {
            counter.inc();
        }
    }

    /// Notes whether a decision needing the shared store was made on the fallback.
    pub fn decided_on_fallback(&self, fallback: bool) {
        self.metrics.decided_on_fallback(fallback);
    }

    /// Starts timing `op` on the shared store (or on the fallback).
    pub fn store_timer(&self, op: StoreOp, fallback: bool) -> StoreTimer<'_> {
        StoreTimer {
            metrics: self,
            op,
            fallback,
            started: Instant::now(),
        }
    }

    /// Starts counting a gateway request (in flight until the guard is finished or
    /// dropped, as when the client hangs up).
    pub fn gateway_request(&self) -> GatewayRequest<'_> {
        self.metrics.families.in_flight.inc();
        GatewayRequest { metrics: self }
    }

    /// Records the time the upstream took to answer.
    pub fn upstream_latency(&self, took: Duration) {
        self.metrics
            .families
            .upstream_latency
            .observe(took.as_secs_f64());
    }
}

/// Times one store operation.
pub struct StoreTimer<'m> {
    metrics: &'m EngineMetrics,
    op: StoreOp,
    fallback: bool,
    started: Instant,
}

impl StoreTimer<'_> {
    /// Records the time taken and, on an error, its kind.
    pub fn finish(self, error: Option<&StoreError>) {
        let op = OPS.iter().position(|o| *o == self.op).unwrap_or(0);
        self.metrics.latency[op][usize::from(self.fallback)]
            .observe(self.started.elapsed().as_secs_f64());
        if let Some(error) = error {
            let kind = match error {
                StoreError::Timeout(_) => "timeout",
                StoreError::Unavailable(_) => "unavailable",
                StoreError::Full { .. } => "full",
                StoreError::Protocol(_) => "protocol",
                StoreError::Policy(_) => "policy",
                _ => "other",
            };
            let store = if self.fallback {
                "fallback"
            } else {
                self.metrics.store
            };
            self.metrics
                .metrics
                .families
                .store_errors
                .get_or_create(&StoreErrorLabels { store, kind })
                .inc();
        }
    }
}

/// A gateway request being answered.
pub struct GatewayRequest<'m> {
    metrics: &'m EngineMetrics,
}

impl GatewayRequest<'_> {
    /// Counts the answer: `route` is the index of the first rule whose match applied
    /// (`None`: none did), `status` the status sent.
    pub fn answered(self, route: Option<usize>, status: u16) {
        let routes = &self.metrics.gateway;
        let route = route
            .filter(|&r| r < routes.len() - 1)
            .unwrap_or(routes.len() - 1);
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        routes[route][class].inc();
    }
}

impl Drop for GatewayRequest<'_> {
    fn drop(&mut self) {
        self.metrics.metrics.families.in_flight.dec();
    }
}
