//! The series one engine counts into (its rules' decisions, refusals, the store's
//! operations), resolved when the engine is built: counting a decision is then a few
//! atomic additions, with no label lookup on the request path. The doors' own series
//! are in `doors.rs`.

use std::sync::Arc;
use std::time::Instant;

use weir_core::Decision;
use weir_store::{Check, StoreError};

use super::doors::{CLASSES, Door, EnvoyOutcome};
use super::families::{
    CostLabels, DecisionLabels, EnvoyLabels, GatewayLabels, ReasonLabels, RuleLabels,
    STORE_ERROR_KINDS, StoreErrorLabels, StoreOpLabels, store_buckets,
};
use super::sharded::{Counter, Histogram};
use super::{Metrics, RuleLive};
use crate::request::Refusal;

/// What became of one rule's decision for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
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

const OUTCOMES: usize = 8;

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

    /// The outcomes a rule can have: a shadow rule only its two; the fallback and
    /// failing closed only on a shared store.
    fn possible(shadow: bool, shared_store: bool) -> &'static [Outcome] {
        use Outcome::*;
        match (shadow, shared_store) {
            (true, _) => &[ShadowAllowed, ShadowDenied],
            (false, false) => &[Allowed, Denied, Unavailable],
            (false, true) => &[
                Allowed,
                Denied,
                FallbackAllowed,
                FallbackDenied,
                FailedClosed,
                Unavailable,
            ],
        }
    }
}

/// The store operations timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreOp {
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

/// The label of requests no rule's route matched, and of callers without a plan
/// (parentheses: no rule or plan name can hold them).
pub(crate) const NONE: &str = "(none)";

/// One rule's series.
struct RuleSeries {
    live: Arc<RuleLive>,
    name: String,
    near_limit: Counter,
    /// Per plan the rule can see ([`NONE`] without plans): a counter per outcome it
    /// can have, by `Outcome as usize`.
    by_plan: Vec<(String, [Option<Counter>; OUTCOMES])>,
}

/// The series an engine counts into.
pub(crate) struct EngineMetrics {
    pub(super) metrics: Arc<Metrics>,
    rules: Vec<RuleSeries>,
    /// Per operation: on the shared store, then on the fallback.
    latency: [[Histogram; 2]; OPS.len()],
    /// Per store (shared, fallback), per kind of error.
    errors: [[Counter; STORE_ERROR_KINDS.len()]; 2],
    refused: [Counter; 4],
    /// Per route (the first rule matched; the last entry: none), per status class.
    pub(super) gateway: Vec<[Counter; CLASSES.len()]>,
    /// The Envoy door's descriptors, per [`EnvoyOutcome`].
    pub(super) envoy: [Counter; EnvoyOutcome::ALL.len()],
    /// Every door's answers, per door, per status class.
    pub(super) doors: [[Counter; CLASSES.len()]; Door::ALL.len()],
}

impl std::fmt::Debug for EngineMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineMetrics")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

/// A rule as the metrics see it.
pub(crate) struct RuleShape<'a> {
    /// The rule's name.
    pub name: &'a str,
    /// The plans it may be counted under ([`NONE`] among them when a caller may have
    /// none).
    pub plans: Vec<&'a str>,
    /// Whether it is a shadow rule.
    pub shadow: bool,
}

impl EngineMetrics {
    /// The series for rules shaped as `rules` (their index here is their series), on a
    /// store of `kind` (`memory` or `redis`), with a gateway route for each rule
    /// named in `routes`.
    pub(crate) fn new(
        metrics: Arc<Metrics>,
        kind: &'static str,
        rules: &[RuleShape<'_>],
        routes: &[&str],
    ) -> Self {
        let f = &metrics.families;
        let shared_store = kind != "memory";
        let rules = rules
            .iter()
            .map(|shape| RuleSeries {
                live: metrics.rule(shape.name),
                name: shape.name.to_owned(),
                near_limit: f.near_limit.get_or_create_owned(&RuleLabels {
                    rule: shape.name.to_owned(),
                }),
                by_plan: shape
                    .plans
                    .iter()
                    .map(|plan| {
                        let mut counters: [Option<Counter>; OUTCOMES] = Default::default();
                        for &outcome in Outcome::possible(shape.shadow, shared_store) {
                            counters[outcome as usize] =
                                Some(f.decisions.get_or_create_owned(&DecisionLabels {
                                    rule: shape.name.to_owned(),
                                    plan: (*plan).to_owned(),
                                    outcome: outcome.as_str(),
                                }));
                        }
                        ((*plan).to_owned(), counters)
                    })
                    .collect(),
            })
            .collect::<Vec<_>>();
        // The fallback's series exist only beside a shared store: on the memory store
        // nothing decides on a fallback, and exported series that can never move would
        // only mislead (they are kept, unexported, so that counting needs no branch).
        let stores = [kind, "fallback"];
        let exported = |store: &str| store != "fallback" || shared_store;
        let latency = OPS.map(|op| {
            stores.map(|store| {
                if !exported(store) {
                    return store_buckets();
                }
                f.store_latency.get_or_create_owned(&StoreOpLabels {
                    store,
                    operation: op.as_str(),
                })
            })
        });
        let errors = stores.map(|store| {
            STORE_ERROR_KINDS.map(|kind| {
                if !exported(store) {
                    return Counter::default();
                }
                f.store_errors
                    .get_or_create_owned(&StoreErrorLabels { store, kind })
            })
        });
        let refused = [
            Refusal::Unreadable,
            Refusal::UnsupportedBody,
            Refusal::UnknownHost,
            Refusal::Listed,
        ]
        .map(|reason| {
            f.refused.get_or_create_owned(&ReasonLabels {
                reason: reason_label(reason),
            })
        });
        let routes = routes
            .iter()
            .copied()
            .chain([NONE])
            .map(|route| {
                CLASSES.map(|status| {
                    f.gateway_requests.get_or_create_owned(&GatewayLabels {
                        route: route.to_owned(),
                        status,
                    })
                })
            })
            .collect();
        let envoy = EnvoyOutcome::ALL.map(|outcome| {
            f.envoy_descriptors.get_or_create_owned(&EnvoyLabels {
                outcome: outcome.as_str(),
            })
        });
        let doors = super::doors::door_series(f);
        Self {
            metrics,
            rules,
            latency,
            errors,
            refused,
            envoy,
            doors,
            gateway: routes,
        }
    }

    /// The process's metrics.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Counts the decision of the rule of series `rule` for `identity` under `plan`;
    /// `decision` is what the store said (none when it could not decide: near-limit
    /// is read from its remaining units and limit), `now` the engine's time.
    pub(crate) fn decided(
        &self,
        rule: usize,
        plan: Option<&str>,
        outcome: Outcome,
        identity: &str,
        decision: Option<&Decision>,
        now: u64,
    ) {
        let Some(series) = self.rules.get(rule) else {
            return;
        };
        let plan = plan.unwrap_or(NONE);
        let counter = series
            .by_plan
            .iter()
            .find(|(p, _)| p == plan)
            .and_then(|(_, counters)| counters[outcome as usize].as_ref());
        match counter {
            Some(counter) => {
                counter.inc();
            }
            // Not expected (every plan and outcome the rule can meet is resolved):
            // counted all the same, the slow way.
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
        }
        match outcome {
            Outcome::Allowed => {
                let near = decision.is_some_and(|d| d.remaining.saturating_mul(10) < d.limit);
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

    /// Counts a request refused before any rule counted it.
    pub(crate) fn refused(&self, reason: Refusal) {
        let index = match reason {
            Refusal::Unreadable => 0,
            Refusal::UnsupportedBody => 1,
            Refusal::UnknownHost => 2,
            Refusal::Listed => 3,
        };
        self.refused[index].inc();
    }

    /// Counts the units of estimated costs given back and charged beyond, by rule, and
    /// those stated past the rule's `max` (`forgiven`: not charged).
    pub(crate) fn costs_settled(
        &self,
        refunded: &[Check<'_>],
        charged: &[Check<'_>],
        forgiven: &[Check<'_>],
    ) {
        for (checks, direction) in [
            (refunded, "refunded"),
            (charged, "charged"),
            (forgiven, "forgiven"),
        ] {
            for check in checks {
                let labels = CostLabels {
                    rule: check.key.rule.to_owned(),
                    direction,
                };
                self.metrics
                    .families
                    .cost_units
                    .get_or_create(&labels)
                    .inc_by(check.cost);
            }
        }
    }

    /// Notes whether a decision needing the shared store was made on the fallback.
    pub(crate) fn decided_on_fallback(&self, fallback: bool) {
        self.metrics.decided_on_fallback(fallback);
    }

    /// Starts timing `op` on the shared store (or on the fallback).
    pub(crate) fn store_timer(&self, op: StoreOp, fallback: bool) -> StoreTimer<'_> {
        StoreTimer {
            metrics: self,
            op,
            fallback,
            started: Instant::now(),
        }
    }
}

fn reason_label(reason: Refusal) -> &'static str {
    match reason {
        Refusal::Unreadable => "unreadable",
        Refusal::UnsupportedBody => "unsupported_body",
        Refusal::UnknownHost => "unknown_host",
        Refusal::Listed => "deny_list",
    }
}

/// Times one store operation.
pub(crate) struct StoreTimer<'m> {
    metrics: &'m EngineMetrics,
    op: StoreOp,
    fallback: bool,
    started: Instant,
}

impl StoreTimer<'_> {
    /// Records the time taken and, on an error, its kind.
    pub(crate) fn finish(self, error: Option<&StoreError>) {
        let op = OPS.iter().position(|o| *o == self.op).unwrap_or(0);
        let store = usize::from(self.fallback);
        self.metrics.latency[op][store].observe(self.started.elapsed());
        if let Some(error) = error {
            let kind = match error {
                StoreError::Timeout(_) => 0,
                StoreError::Unavailable(_) | StoreError::Refused(_) | StoreError::SlotLost(_) => 1,
                StoreError::Full { .. } => 2,
                StoreError::Protocol(_) => 3,
                StoreError::Policy(_) => 4,
                _ => 5,
            };
            self.metrics.errors[store][kind].inc();
        }
    }
}
