//! What the regional shares of the rules with `scope: global` did, per rule: the
//! units asked for and admitted, the shares renewed, the rebalances, and the regions
//! that could not be reached.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use weir_store::ShareEvents;

use super::Metrics;
use super::families::{RegionLabels, RenewalLabels, RuleLabels, ShareUseLabels};
use super::sharded::Counter;

/// One global rule's series.
struct RuleShares {
    offered: Counter,
    admitted: Counter,
    applied: Counter,
    late: Counter,
    stale: Counter,
    untracked: Counter,
    /// Units granted to the keys this instance renewed in the round under way; shown
    /// as the last round's in `share`.
    granting: AtomicU64,
    share: Gauge,
}

/// The share series of an engine's global rules, by the index the engine gave each.
pub(crate) struct ShareMetrics {
    rules: Vec<RuleShares>,
    rounds: Counter,
    metrics: Arc<Metrics>,
}

impl ShareMetrics {
    /// Series for the rules named, in order.
    pub(crate) fn new<'a>(
        metrics: &Arc<Metrics>,
        rules: impl IntoIterator<Item = &'a str>,
    ) -> Arc<Self> {
        let f = &metrics.families;
        let rules = rules
            .into_iter()
            .map(|rule| {
                let used = |kind| {
                    f.region_units.get_or_create_owned(&ShareUseLabels {
                        rule: rule.to_owned(),
                        kind,
                    })
                };
                let renewals = |outcome| {
                    f.region_renewals.get_or_create_owned(&RenewalLabels {
                        rule: rule.to_owned(),
                        outcome,
                    })
                };
                RuleShares {
                    offered: used("offered"),
                    admitted: used("admitted"),
                    applied: renewals("applied"),
                    late: renewals("late"),
                    stale: renewals("stale"),
                    untracked: f.region_untracked.get_or_create_owned(&RuleLabels {
                        rule: rule.to_owned(),
                    }),
                    granting: AtomicU64::new(0),
                    share: f.region_share.get_or_create_owned(&RuleLabels {
                        rule: rule.to_owned(),
                    }),
                }
            })
            .collect();
        Arc::new(Self {
            rules,
            rounds: f.region_rounds.clone(),
            metrics: Arc::clone(metrics),
        })
    }
}

impl ShareEvents for ShareMetrics {
    fn round(&self, _keys: usize) {
        self.rounds.inc();
        for rule in &self.rules {
            let last = rule.granting.swap(0, Ordering::Relaxed);
            rule.share.set(i64::try_from(last).unwrap_or(i64::MAX));
        }
    }

    fn used(&self, rule: usize, units: u64, allowed: bool) {
        if let Some(r) = self.rules.get(rule) {
            r.offered.inc_by(units);
            if allowed {
                r.admitted.inc_by(units);
            }
        }
    }

    fn renewed(&self, rule: usize, applied: bool) {
        if let Some(r) = self.rules.get(rule) {
            match applied {
                true => r.applied.inc(),
                false => r.late.inc(),
            };
        }
    }

    fn holding(&self, rule: usize, units: u64) {
        if let Some(r) = self.rules.get(rule) {
            r.granting.fetch_add(units, Ordering::Relaxed);
        }
    }

    fn stale(&self, rule: usize) {
        if let Some(r) = self.rules.get(rule) {
            r.stale.inc();
        }
    }

    fn untracked(&self, rule: usize) {
        if let Some(r) = self.rules.get(rule) {
            r.untracked.inc();
        }
    }

    fn unreachable(&self, region: &str) {
        self.metrics
            .families
            .region_unreachable
            .get_or_create(&RegionLabels {
                region: region.to_owned(),
            })
            .inc();
    }
}
