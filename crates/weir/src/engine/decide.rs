//! A request's verdict: the rules that apply to its caller, reserved in one
//! all-or-nothing step on the shared store (or, when it cannot decide, under each
//! rule's failure policy), the shadow rules counted after, and a settlement for the
//! rules counted by outcome.

use std::sync::Arc;

use weir_core::{Decision, Policy};

use super::applied::Applied;
use super::failover::on_fallback;
use super::key::Identities;
use super::plan::CallerPlan;
use super::reserve::{Reservation, reserve};
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
            applied.into_iter().partition(|a| !a.shadow());
        // An allow-listed caller skips the `concurrency` rules outright: a slot has no
        // shadow to report (no rate, nothing to count).
        let shadow: Vec<Applied<'e>> = shadow.into_iter().filter(|a| !a.rule.in_flight).collect();
        // A ban this instance knows of refuses at once: no store step.
        if let Some(banned) = self.banned_here(&enforced) {
            return Verdict::Denied(self.refused_by_ban(&enforced, banned));
        }
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
            Ok(Reservation::nothing())
        } else {
            let timer = self.metrics.store_timer(StoreOp::Check, false);
            let reserved = reserve(self.store.as_ref(), &enforced, timeout).await;
            timer.finish(reserved.as_ref().err());
            reserved
        };
        let (used, enforced, reservation) = match reserved {
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
        let Reservation {
            allowed,
            decisions,
            bans,
        } = reservation;
        // What the shared store says of bans is remembered; the fallback knows none.
        if used == StoreUsed::Shared {
            for &(i, left) in &bans {
                let a = &enforced[i];
                self.saw_ban(&a.rule.name, &a.identity, left);
            }
        }
        self.count(used, &enforced, &decisions, plan, facts);
        let mut quotas = quotas(&enforced, &decisions);
        // The rules whose bans refused it (indices of `enforced`, so taken before the
        // concurrency rules' quotas join and all are put in file order).
        let banned: Vec<RuleDecision<'e>> = bans
            .iter()
            .filter(|(_, left)| left.is_some())
            .map(|&(i, _)| quotas[i])
            .collect();
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
            if !banned.is_empty() {
                return Verdict::Denied(self.refused_by_ban(&enforced, banned));
            }
            let denied: Vec<(&Rule, &str)> = enforced
                .iter()
                .zip(&decisions)
                .filter(|(_, d)| !d.allowed)
                .map(|(a, _)| (a.rule, a.identity.as_str()))
                .collect();
            self.denied_by(self.store_used(used), &denied).await;
            return Verdict::Denied(Denied::new(quotas));
        }

        let shadow = match used {
            StoreUsed::Shared => shadow,
            StoreUsed::Fallback => on_fallback(shadow),
        };
        let (shadow_denied, shadow_decisions) = self.shadow(used, &shadow, plan, facts).await;
        // The rules an allow list let the client skip report what they would have
        // decided, as allowing: the RateLimit fields show the cost, no `Retry-After`.
        for (a, d) in shadow.iter().zip(&shadow_decisions) {
            if a.listed {
                quotas.push(RuleDecision {
                    name: &a.rule.name,
                    policy: a.policy,
                    decision: Decision {
                        allowed: true,
                        retry_after: None,
                        ..*d
                    },
                    in_flight: false,
                });
            }
        }
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

    /// The verdict on a request refused by the bans of `banned` (the banned rules'
    /// quotas, nothing left until each ban's end), counted: answered 403 when one of
    /// those rules asks for it, else 429.
    fn refused_by_ban<'e>(
        &self,
        enforced: &[Applied<'e>],
        banned: Vec<RuleDecision<'e>>,
    ) -> Denied<'e> {
        let mut status = 429;
        for q in &banned {
            self.metrics.ban_refused(q.name);
            if let Some(on) = enforced
                .iter()
                .find(|a| a.rule.name == q.name)
                .and_then(|a| a.rule.on_limited.as_ref())
                && on.status == 403
            {
                status = 403;
            }
        }
        Denied::banned(banned, status)
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
        let mut applied: Vec<Applied<'e>> = routed
            .rules
            .iter()
            .map(|&index| (index, &self.routing.rules[index]))
            .filter(|(_, rule)| {
                rule.plans.is_empty() || plan.as_ref().is_some_and(|p| rule.plans.contains(&p.name))
            })
            .map(|(index, rule)| {
                let key = identities.key(&rule.key);
                let policy = self
                    .overrides
                    .policy(&rule.name, &key.key, &rule.policy)
                    .unwrap_or_else(|| policy(rule, plan.as_ref()));
                Applied {
                    index,
                    rule,
                    identity: key.key,
                    exact: key.exact,
                    policy,
                    cost: rule.cost_of(facts.method, facts.host, facts.path),
                    listed: false,
                }
            })
            .collect();
        let listed = self.listed(&identities, facts, &mut applied);
        // An identity a rule keys on that cannot be read one way refuses the request:
        // never a weaker key.
        match identities.refused() {
            Some(refused) => Err(refused),
            None => listed.map(|()| (applied, plan)),
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

/// The rule's policy, with the caller's custom limit when its plan gives one (an
/// override, looked up before, wins over both: override > plans file custom limit >
/// plan > rule).
fn policy(rule: &Rule, plan: Option<&CallerPlan>) -> Policy {
    let p = rule.policy;
    match plan.and_then(|plan| plan.limit.filter(|_| rule.plans.contains(&plan.name))) {
        // Validated when the configuration was loaded.
        Some(limit) => p.relimit(limit, p.burst()).unwrap_or(p),
        None => p,
    }
}
