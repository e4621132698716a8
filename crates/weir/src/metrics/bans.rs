//! What bans and allow and deny lists are counted by: bans started and requests a ban
//! refused, per rule; requests a list matched, per list and scope. Rare events (a
//! label lookup each), so not resolved when the engine is built. And the slots of
//! `concurrency` rules held, per rule (a lookup per request under such a rule).

use super::EngineMetrics;
use super::families::{ListLabels, RuleLabels};

/// Which list matched a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// An allow list: the request skipped the rules.
    Allow,
    /// A deny list: the request was refused (403).
    Deny,
}

impl EngineMetrics {
    /// Counts a ban started under `rule`.
    pub(crate) fn ban_started(&self, rule: &str) {
        let labels = RuleLabels {
            rule: rule.to_owned(),
        };
        self.metrics
            .families
            .bans_started
            .get_or_create(&labels)
            .inc();
    }

    /// Counts a request refused because its key is banned under `rule`.
    pub(crate) fn ban_refused(&self, rule: &str) {
        let labels = RuleLabels {
            rule: rule.to_owned(),
        };
        self.metrics
            .families
            .ban_refusals
            .get_or_create(&labels)
            .inc();
    }

    /// The gauge of the slots this instance holds under the `concurrency` rule
    /// `rule` (whoever holds it adds one, and takes it away when it lets go).
    pub(crate) fn slots_held(&self, rule: &str) -> prometheus_client::metrics::gauge::Gauge {
        let labels = RuleLabels {
            rule: rule.to_owned(),
        };
        self.metrics
            .families
            .slots_held
            .get_or_create(&labels)
            .clone()
    }

    /// Counts a request `list` matched; `rule` is the rule whose list it is (`None`:
    /// the global list).
    pub(crate) fn list_matched(&self, list: ListKind, rule: Option<&str>) {
        let labels = ListLabels {
            list: match list {
                ListKind::Allow => "allow",
                ListKind::Deny => "deny",
            },
            scope: rule.unwrap_or("global").to_owned(),
        };
        self.metrics
            .families
            .list_matches
            .get_or_create(&labels)
            .inc();
    }
}
