//! One override as it is kept (in the file, in Redis) and looked up.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use weir_core::{Policy, PolicyError};

/// A limit for one key of one rule, set at runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Override {
    /// The limit per period.
    pub limit: u64,
    /// The period in milliseconds; `None`: the rule's.
    pub period_ms: Option<u64>,
    /// The capacity of a bucket algorithm; `None`: the limit.
    pub burst: Option<u64>,
    /// When it ends, in seconds since the Unix epoch; `None`: when it is deleted.
    pub expires_at: Option<u64>,
    /// Why it was set (for the audit log and the status page).
    pub reason: String,
    /// When it was set, in seconds since the Unix epoch.
    pub set_at: u64,
}

impl Override {
    /// Whether it is in force at `now` (seconds since the Unix epoch).
    pub(crate) fn in_force(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|end| now < end)
    }

    /// The period it sets, if any.
    pub(crate) fn period(&self) -> Option<Duration> {
        self.period_ms.map(Duration::from_millis)
    }

    /// The policy of a rule whose own policy is `base` under this override: `base`'s
    /// algorithm with this limit, period (else `base`'s, its calendar kept) and burst.
    /// (A calendar rule's period is refused when an override is set: its windows are
    /// its calendar's.)
    pub(crate) fn policy(&self, base: &Policy) -> Result<Policy, PolicyError> {
        match self.period() {
            None => base.relimit(self.limit, self.burst),
            Some(period) => Policy::new(base.algorithm(), self.limit, period, self.burst),
        }
    }
}

/// An override with its rule and key: a record of the file or the shared table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stored {
    /// The rule's name.
    pub rule: String,
    /// The key, canonical (as the engine keys the rule).
    pub key: String,
    /// The override.
    #[serde(flatten)]
    pub entry: Override,
}

impl Stored {
    /// Its field in the shared table: rule names hold no `:`, so `rule:key` is one
    /// field per (rule, key).
    pub(crate) fn field(rule: &str, key: &str) -> String {
        format!("{rule}:{key}")
    }

    /// A record of the shared table, read back: `None` (and logged) when it does not
    /// parse (written by a newer weir, or by hand).
    pub(crate) fn from_record(field: &str, value: &str) -> Option<Self> {
        let parsed = serde_json::from_str::<Self>(value)
            .ok()
            .filter(|s| Self::field(&s.rule, &s.key) == field);
        if parsed.is_none() {
            tracing::warn!(
                field = %field.escape_debug(),
                "an override in the shared store does not parse; it is ignored"
            );
        }
        parsed
    }

    /// Its JSON text.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
