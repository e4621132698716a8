//! What the engine decided about a request, for a front door to translate.

use std::time::Duration;

use weir_core::{Decision, Policy};
use weir_store::StoreError;

use super::Settlement;
use crate::edge::ratelimit::Quota;

/// The engine's answer for one request.
#[derive(Debug)]
pub enum Verdict<'e> {
    /// Let it go on; report the quotas; settle once the answer's status is known.
    Allowed(Allowed<'e>),
    /// Too many: answer 429 with the quotas and the violated rules. Nothing was
    /// consumed.
    Denied(Denied<'e>),
    /// The store could not decide and a rule that applies fails closed (or the store is
    /// full, or refused the check): answer 503. Nothing was consumed.
    Unavailable(Unavailable),
    /// The request cannot be read one way (an identity sent twice, a body field that
    /// is ambiguous or unreadable, a host no rule knows): refuse it. Nothing was
    /// consumed.
    Refused(Refused),
}

/// A request the engine will not decide on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// What kind of request it is.
    pub reason: Refusal,
    /// What to tell the client.
    pub detail: String,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It cannot be read one way (400).
    Unreadable,
    /// Its body is one weir does not read, on a route keyed by one of its fields (415).
    UnsupportedBody,
    /// It names a host no rule names (421).
    UnknownHost,
}

impl Refused {
    /// 400: the request cannot be read one way.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self {
            reason: Refusal::Unreadable,
            detail: detail.into(),
        }
    }

    /// 415: a body weir cannot read, on a route keyed by one of its fields.
    pub fn unsupported_media_type(detail: impl Into<String>) -> Self {
        Self {
            reason: Refusal::UnsupportedBody,
            detail: detail.into(),
        }
    }

    /// 421: a host none of the rules name.
    pub(super) fn misdirected(host: &str) -> Self {
        Self {
            reason: Refusal::UnknownHost,
            detail: format!(
                "no rule here names the host `{}`; send the host the API is served under",
                host.escape_debug()
            ),
        }
    }

    /// The HTTP status that answers it.
    pub fn status(&self) -> u16 {
        match self.reason {
            Refusal::Unreadable => 400,
            Refusal::UnsupportedBody => 415,
            Refusal::UnknownHost => 421,
        }
    }
}

/// One enforcing rule's decision for the request.
#[derive(Debug, Clone, Copy)]
pub struct RuleDecision<'e> {
    /// The rule's name.
    pub name: &'e str,
    /// The policy it was decided under (the caller's plan's, or the fallback's share).
    pub policy: Policy,
    /// What it decided.
    pub decision: Decision,
}

impl RuleDecision<'_> {
    /// Its part in the RateLimit header fields.
    pub fn quota(&self) -> Quota<'_> {
        Quota {
            name: self.name,
            policy: &self.policy,
            decision: &self.decision,
        }
    }
}

/// A request that may go on.
#[derive(Debug)]
pub struct Allowed<'e> {
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
pub struct Denied<'e> {
    /// Each enforcing rule's decision (those that allowed report their unchanged
    /// state), in file order.
    pub quotas: Vec<RuleDecision<'e>>,
}

impl<'e> Denied<'e> {
    pub(super) fn new(quotas: Vec<RuleDecision<'e>>) -> Self {
        Self { quotas }
    }

    /// The names of the rules that denied it.
    pub fn violated(&self) -> impl Iterator<Item = &'e str> + '_ {
        self.quotas
            .iter()
            .filter(|q| !q.decision.allowed)
            .map(|q| q.name)
    }

    /// When retrying can succeed: the longest wait of the denying rules, or `None`
    /// when one of them can never admit this request (its cost is above the limit).
    pub fn retry_after(&self) -> Option<Duration> {
        self.quotas
            .iter()
            .filter(|q| !q.decision.allowed)
            .try_fold(Duration::ZERO, |longest, q| {
                q.decision.retry_after.map(|r| longest.max(r))
            })
    }
}

/// Why the engine could not decide.
#[derive(Debug, Clone)]
pub struct Unavailable {
    /// For the problem's detail: what failed.
    pub detail: String,
}

impl Unavailable {
    pub(super) fn from_error(error: &StoreError) -> Self {
        Self {
            detail: error.to_string(),
        }
    }
}
