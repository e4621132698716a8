//! One rule applied to one request: the unit the engine's steps (reserve, fail over,
//! shadow, count) pass between them.

use weir_core::Policy;
use weir_store::{Check, Key};

use super::Rule;

/// One rule applied to one request: whose key, under which policy, at what cost.
#[derive(Debug)]
pub(super) struct Applied<'e> {
    pub(super) index: usize,
    pub(super) rule: &'e Rule,
    pub(super) identity: String,
    /// Whether the identities were written exactly as keyed (else no reset).
    pub(super) exact: bool,
    pub(super) policy: Policy,
    pub(super) cost: u64,
    /// An allow list lets the client skip the rule: decided as a shadow rule.
    pub(super) listed: bool,
}

impl Applied<'_> {
    /// Whether the rule is only counted, never enforced: a shadow rule, or one an
    /// allow list lets the client skip.
    pub(super) fn shadow(&self) -> bool {
        self.rule.shadow || self.listed
    }

    pub(super) fn check(&self) -> Check<'_> {
        Check {
            key: Key {
                rule: &self.rule.name,
                identity: &self.identity,
            },
            policy: &self.policy,
            cost: self.cost,
        }
    }
}
