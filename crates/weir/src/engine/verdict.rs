//! What the engine decided about a request, for a front door to translate.

use std::time::Duration;

use weir_core::{Decision, Policy};

use super::Settlement;
use crate::request::Refused;

/// The engine's answer for one request.
#[derive(Debug)]
pub(crate) enum Verdict<'e> {
    /// Let it go on; report the quotas; settle once the answer's status is known.
    Allowed(Allowed<'e>),
    /// Too many: answer 429 with the quotas and the violated rules. Nothing was
    /// consumed.
    Denied(Denied<'e>),
    /// The store could not decide and a rule that applies fails closed (or the store is
    /// full, or refused the check): answer 503. Nothing was consumed. What failed is
    /// logged and counted by the engine (the store metrics' `kind` label); it is no
    /// business of the caller's.
    Unavailable,
    /// The request cannot be read one way (an identity sent twice, a body field that
    /// is ambiguous or unreadable, a host no rule knows): refuse it. Nothing was
    /// consumed.
    Refused(Refused),
}

/// One enforcing rule's decision for the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleDecision<'e> {
    /// The rule's name.
    pub name: &'e str,
    /// The policy it was decided under (the caller's plan's, or the fallback's share).
    pub policy: Policy,
    /// What it decided.
    pub decision: Decision,
    /// Whether the rule limits requests in flight (`algorithm: concurrency`): the
    /// policy's limit is its slots, the decision's `remaining` the slots free.
    pub in_flight: bool,
}

/// A request that may go on.
#[derive(Debug)]
pub(crate) struct Allowed<'e> {
    /// Each enforcing rule's decision, in file order.
    pub quotas: Vec<RuleDecision<'e>>,
    /// The shadow rules that would have denied it.
    pub shadow_denied: Vec<&'e str>,
    /// The reservations to settle with the answer's status (rules counted by outcome,
    /// or reset by it); `None` when no rule waits for the answer.
    pub settlement: Option<Settlement>,
}

impl Allowed<'_> {
    /// No rule applies.
    pub(super) fn unlimited() -> Self {
        Self {
            quotas: Vec::new(),
            shadow_denied: Vec::new(),
            settlement: None,
        }
    }
}

/// A request that is denied.
#[derive(Debug)]
pub(crate) struct Denied<'e> {
    /// Each enforcing rule's decision (those that allowed report their unchanged
    /// state), in file order. A rule whose key is banned reports nothing left until
    /// the ban's end.
    pub quotas: Vec<RuleDecision<'e>>,
    /// When a ban refuses it: the status to answer with (429 or 403, the rule's
    /// `on_limited.status`).
    pub banned: Option<u16>,
}

impl<'e> Denied<'e> {
    pub(super) fn new(quotas: Vec<RuleDecision<'e>>) -> Self {
        Self {
            quotas,
            banned: None,
        }
    }

    /// Refused by a ban, answered with `status`.
    pub(super) fn banned(quotas: Vec<RuleDecision<'e>>, status: u16) -> Self {
        Self {
            quotas,
            banned: Some(status),
        }
    }

    /// The names of the rules that denied it.
    pub(crate) fn violated(&self) -> impl Iterator<Item = &'e str> + '_ {
        self.quotas
            .iter()
            .filter(|q| !q.decision.allowed)
            .map(|q| q.name)
    }

    /// When retrying can succeed: the longest wait of the denying rules, or `None`
    /// when one of them can never admit this request (its cost is above the limit).
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        self.quotas
            .iter()
            .filter(|q| !q.decision.allowed)
            .try_fold(Duration::ZERO, |longest, q| {
                q.decision.retry_after.map(|r| longest.max(r))
            })
    }
}
