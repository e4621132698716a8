//! What the token leases of the rules with `lease` did, counted per rule.

use std::sync::Arc;

use weir_store::LeaseEvents;

use super::Metrics;
use super::families::{LeaseUnitLabels, RuleLabels};
use super::sharded::Counter;

/// One leased rule's counters.
struct RuleLeases {
    grants: Counter,
    leased: Counter,
    returned: Counter,
    expired: Counter,
    denied: Counter,
}

/// The lease counters of an engine's leased rules, by the index the engine gave each
/// (its position in the list given to [`LeaseMetrics::new`]).
pub(crate) struct LeaseMetrics {
    rules: Vec<RuleLeases>,
}

impl LeaseMetrics {
    /// Counters for the rules named, in order.
    pub(crate) fn new<'a>(
        metrics: &Metrics,
        rules: impl IntoIterator<Item = &'a str>,
    ) -> Arc<Self> {
        let f = &metrics.families;
        let units = |rule: &str, fate| {
            f.lease_units.get_or_create_owned(&LeaseUnitLabels {
                rule: rule.to_owned(),
                fate,
            })
        };
        let rules = rules
            .into_iter()
            .map(|rule| {
                let labels = RuleLabels {
                    rule: rule.to_owned(),
                };
                RuleLeases {
                    grants: f.lease_grants.get_or_create_owned(&labels),
                    leased: units(rule, "leased"),
                    returned: units(rule, "returned"),
                    expired: units(rule, "expired"),
                    denied: f.lease_denials.get_or_create_owned(&labels),
                }
            })
            .collect();
        Arc::new(Self { rules })
    }

    fn rule(&self, index: usize) -> Option<&RuleLeases> {
        self.rules.get(index)
    }
}

impl LeaseEvents for LeaseMetrics {
    fn granted(&self, rule: usize, units: u64) {
        if let Some(r) = self.rule(rule) {
            r.grants.inc();
            r.leased.inc_by(units);
        }
    }

    fn returned(&self, rule: usize, units: u64) {
        if let Some(r) = self.rule(rule) {
            r.returned.inc_by(units);
        }
    }

    fn expired(&self, rule: usize, units: u64) {
        if let Some(r) = self.rule(rule) {
            r.expired.inc_by(units);
        }
    }

    fn denied_locally(&self, rule: usize) {
        if let Some(r) = self.rule(rule) {
            r.denied.inc();
        }
    }
}
