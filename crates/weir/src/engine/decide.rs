//! A request's verdict: the rules that apply to its caller, reserved in one
//! all-or-nothing step on the shared store (or, when it cannot decide, under each
//! rule's failure policy), the shadow rules counted after, and a settlement for the
//! rules counted by outcome.

use std::sync::Arc;

use weir_core::Policy;

use super::applied::Applied;
use super::failover::on_fallback;
use super::key::Identities;
use super::plan::CallerPlan;
use super::reserve::reserve;
use super::settlement::{Reserved, StoreUsed};
use super::{Allowed, Denied, Engine, Routed, Rule, RuleDecision, Settlement, Verdict};
use crate::metrics::{Outcome, StoreOp};
use crate::request::{Facts, Refused};

impl Engine {
    /// The verdict on a request: allowed (with the quotas to report, and a settlement
    /// for rules counted by outcome), denied, unavailable (the store cannot decide and
    /// the failure policy says 503), or refused (an identity cannot be read one way).
    /// `routed` is what [`Engine::read`] found for the same request.
    pub(crate) async fn decide<'e>(
        self: &'e Arc<Self>,
        routed: Routed,
        facts: &Facts<'_>,
    ) -> Verdict<'e> {
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
        let (slotted, enforced): (Vec<Applied<'e>>, Vec<Applied<'e>>) =
            enforced.into_iter().partition(|a| a.rule.in_flight);

        // Slots first: a request the rate rules then deny gives them back exactly (a
        // refund of a window is not).
        let mut slots = None;
        if !slotted.is_empty() {
            let taken = match self.take_slots(&slotted, timeout).await {
                Ok(taken) => taken,
                Err(outcome) => {
                    self.count_failure(&slotted, plan, outcome);
                    return Verdict::Unavailable;
                }
            };
            self.count(taken.used, &slotted, &taken.decisions, plan, facts);
            if taken.held.is_none() {
                return Verdict::Denied(Denied::new(quotas(&slotted, &taken.decisions)));
            }
            slots = Some(taken);
        }

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
                        // Released: the request does not go on.
                        drop(slots);
                        self.count_failure(&enforced, plan, outcome);
                        return Verdict::Unavailable;
                    }
                };
                let enforced = on_fallback(enforced);
                let timer = self.metrics.store_timer(StoreOp::Check, true);
                let reserved = reserve(fallback, &enforced, None).await;
                timer.finish(reserved.as_ref().err());
                match reserved {
                    Ok(reserved) => (StoreUsed::Fallback, enforced, reserved),
                    Err(error) => {
                        tracing::warn!(%error, "the local fallback store could not decide");
                        self.count_failure(&enforced, plan, Outcome::Unavailable);
                        return Verdict::Unavailable;
                    }
                }
            }
        };
        self.count(used, &enforced, &decisions, plan, facts);
        let mut quotas = quotas(&enforced, &decisions);
        let held = match slots {
            Some(mut taken) => {
                if !allowed {
                    // Given back: reported as free again.
                    for d in &mut taken.decisions {
                        d.remaining = (d.remaining + 1).min(d.limit);
                    }
                }
                quotas.extend(self::quotas(&slotted, &taken.decisions));
                // In file order, as the rules are.
                let order =
                    |q: &RuleDecision<'_>| self.routing.rules.iter().position(|r| r.name == q.name);
                quotas.sort_by_key(order);
                if allowed { taken.held.take() } else { None }
            }
            None => None,
        };
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
                cost_from: a.rule.cost_from.clone(),
            })
            .collect();
        let settlement = (!reserved.is_empty() || held.is_some())
            .then(|| Settlement::new(self, used, reserved).holding(held));
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
        // Tokens are verified at the engine's clock's wall time (a manual clock's in
        // tests), not at a time the JWT library reads itself; it is read only when a
        // token is, not on every request.
        let clock = self.clock.as_ref();
        let identities = Identities::new(&self.routing, facts, clock);
        let plan = self
            .routing
            .plans
            .as_ref()
            .map(|p| p.plan_of(*facts, clock, |name| identities.get(name)));
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
}

/// Each rule's decision, as the verdict reports it.
fn quotas<'e>(applied: &[Applied<'e>], decisions: &[weir_core::Decision]) -> Vec<RuleDecision<'e>> {
    applied
        .iter()
        .zip(decisions)
        .map(|(a, decision)| RuleDecision {
            name: &a.rule.name,
            policy: a.policy,
            decision: *decision,
            in_flight: a.rule.in_flight,
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
