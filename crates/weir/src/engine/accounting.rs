//! What the engine counts and logs of its decisions: a series per rule, plan and
//! outcome, and denials logged at info (rate limited).

use std::net::IpAddr;
use std::sync::Arc;

use weir_core::Decision;

use super::applied::Applied;
use super::settlement::StoreUsed;
use super::{Engine, EngineSpec};
use crate::metrics::{EngineMetrics, Metrics, NONE, Outcome, RuleShape};
use crate::request::{Facts, Refused};

impl Engine {
    /// Counts a refusal, and returns it.
    pub(super) fn refused(&self, refused: Refused) -> Refused {
        self.metrics.refused(refused.reason);
        refused
    }

    /// Counts each enforcing rule's decision, and logs denials (rate-limited).
    pub(super) fn count(
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
    pub(super) fn count_failure(
        &self,
        enforced: &[Applied<'_>],
        plan: Option<&str>,
        outcome: Outcome,
    ) {
        let now = self.clock.now();
        for a in enforced {
            let series = self.series[a.index];
            self.metrics
                .decided(series, plan, outcome, &a.identity, None, now);
        }
    }

    /// Logs a rule's denial of a request (see [`Engine::log_denial`]).
    pub(super) fn log_applied(
        &self,
        a: &Applied<'_>,
        plan: Option<&str>,
        facts: &Facts<'_>,
        message: &str,
    ) {
        let client = Some(facts.client_ip);
        self.log_denial(&a.rule.name, &a.identity, plan, client, message);
    }

    /// Logs a denial at info, at most once per rule and identity a minute (and 20 a
    /// second in all). Identities come from callers: control characters are escaped,
    /// so that no identity can forge a log line.
    pub(super) fn log_denial(
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
}

/// The series an engine of `spec` counts into: every named rule under every plan it
/// may see, and a gateway route per rule with a `match`.
pub(super) fn engine_metrics(spec: &EngineSpec, metrics: Arc<Metrics>) -> EngineMetrics {
    let routing = &spec.routing;
    let known: Vec<&str> = routing
        .plans
        .as_ref()
        .map(|p| p.known.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let shapes: Vec<RuleShape<'_>> = spec
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
    EngineMetrics::new(metrics, spec.store.label(), &shapes, &routes)
}
