//! Setting and deleting an override: checked against the rule as the configuration's
//! rules are checked, so that nothing is stored that the rule could not take.

use std::time::Duration;

use weir_core::{Policy, PolicyError};

use super::backing::KeepError;
use super::canonical::{canonical_key, custom_limit};
use super::{MAX_OVERRIDES, Override};
use crate::engine::descriptors::{descriptor_key, named_limit};
use crate::engine::{Engine, Quota, StoreKind};

/// What an override is set on: a rule, or a named Envoy descriptor limit.
struct Target {
    /// Its own policy.
    policy: Policy,
    /// The key's policy without an override, and where it comes from.
    base: (Policy, &'static str),
    /// Whether it is `scope: global`.
    global: bool,
    /// Whether it is `algorithm: concurrency`.
    in_flight: bool,
    /// The key, canonical.
    key: String,
}

/// The longest `reason` kept.
pub(crate) const MAX_REASON_CHARS: usize = 256;

/// An override to set, as the admin API read it.
#[derive(Debug, Clone)]
pub(crate) struct OverrideRequest {
    /// The limit per period.
    pub limit: u64,
    /// The period (`None`: the rule's).
    pub period: Option<Duration>,
    /// The capacity of a bucket algorithm (`None`: the limit).
    pub burst: Option<u64>,
    /// When it ends, in seconds since the Unix epoch (`None`: when deleted).
    pub expires_at: Option<u64>,
    /// Why it is set.
    pub reason: String,
}

/// What a change did: the key as the engine keys it, the override before and after.
#[derive(Debug, Clone)]
pub(crate) struct Replaced {
    /// The canonical key.
    pub key: String,
    /// The override in force before (`None`: the rule's limit, or the plan's).
    pub before: Option<Override>,
    /// The override in force after (`None`: deleted).
    pub after: Option<Override>,
    /// The rule's own policy.
    pub rule_policy: Policy,
    /// The key's policy without an override: the rule's, or its plans file custom
    /// limit; and where it comes from (`rule`, `plans file`).
    pub base: (Policy, &'static str),
}

/// Why an override was not set or deleted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OverrideError {
    /// No rule has the name.
    #[error("no rule is named `{0}`")]
    UnknownRule(String),
    /// A field is wrong; nothing was stored.
    #[error("`{field}`: {message}")]
    Invalid {
        /// The field at fault.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The key has no override to delete.
    #[error("no override is set for this key")]
    NotSet,
    /// Where overrides are kept did not take the change; nothing changed.
    #[error(transparent)]
    Unavailable(#[from] KeepError),
}

/// Whether `c` is a control, or an invisible or direction-changing character that would
/// make the audit log or the status page show another text than was written (refused
/// in a reason, and in a list entry).
pub(super) fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn invalid(field: &'static str, message: impl Into<String>) -> OverrideError {
    OverrideError::Invalid {
        field,
        message: message.into(),
    }
}

impl Engine {
    /// Sets `request` as the override of `key` (canonicalised) under the rule named
    /// `rule`, once it passes the checks the configuration's rules pass.
    pub(crate) async fn set_override(
        &self,
        rule: &str,
        key: &str,
        request: OverrideRequest,
    ) -> Result<Replaced, OverrideError> {
        let named = self.override_target(rule, key)?;
        if named.global {
            return Err(invalid(
                "rule",
                "the rule has `scope: global`: its limit is shared by the regions, which an override for one key cannot change",
            ));
        }
        if named.in_flight {
            if request.period.is_some() || request.burst.is_some() {
                let field = if request.period.is_some() {
                    "period"
                } else {
                    "burst"
                };
                return Err(invalid(
                    field,
                    "the rule is `algorithm: concurrency`: override its slots (`limit`) only",
                ));
            }
            if !(1..=super::super::MAX_IN_FLIGHT).contains(&request.limit) {
                return Err(invalid(
                    "limit",
                    format!(
                        "a `concurrency` rule's slots are a whole number from 1 to {}",
                        super::super::MAX_IN_FLIGHT
                    ),
                ));
            }
        }
        let key = named.key;
        let now = self.overrides.now_secs();
        if request.expires_at.is_some_and(|end| end <= now) {
            return Err(invalid("expires_at", "must be in the future"));
        }
        let reason = request.reason.trim();
        if reason.chars().count() > MAX_REASON_CHARS || reason.chars().any(hidden) {
            return Err(invalid(
                "reason",
                format!(
                    "at most {MAX_REASON_CHARS} characters, no control, invisible or direction-changing characters"
                ),
            ));
        }
        if request.period.is_some() && named.policy.calendar().is_some() {
            return Err(invalid(
                "period",
                "this rule's windows follow its calendar: override its limit only",
            ));
        }
        let entry = Override {
            limit: request.limit,
            period_ms: request
                .period
                .map(|p| u64::try_from(p.as_millis()).unwrap_or(u64::MAX)),
            burst: request.burst,
            expires_at: request.expires_at,
            reason: reason.to_owned(),
            set_at: now,
        };
        let policy = entry.policy(&named.policy).map_err(|error| {
            let field = match error {
                PolicyError::PeriodOutOfRange(_) => "period",
                PolicyError::BurstOutOfRange(_) | PolicyError::BurstNotApplicable(_) => "burst",
                _ => "limit",
            };
            invalid(field, error.to_string())
        })?;
        if self.store_kind == StoreKind::Redis {
            weir_store::check_redis_policy(&policy).map_err(|e| invalid("limit", e.to_string()))?;
        }
        if self.overrides.get(rule, &key).is_none()
            && self.overrides.count_in_force() >= MAX_OVERRIDES
        {
            return Err(invalid(
                "key",
                format!("{MAX_OVERRIDES} overrides are in force already: delete some first"),
            ));
        }
        let before = self.overrides.put(rule, &key, entry.clone()).await?;
        Ok(Replaced {
            key,
            before,
            after: Some(entry),
            rule_policy: named.policy,
            base: named.base,
        })
    }

    /// Deletes the override of `key` (canonicalised) under the rule named `rule`.
    pub(crate) async fn delete_override(
        &self,
        rule: &str,
        key: &str,
    ) -> Result<Replaced, OverrideError> {
        let named = self.override_target(rule, key)?;
        let key = named.key;
        if self.overrides.get(rule, &key).is_none() {
            return Err(OverrideError::NotSet);
        }
        let before = self.overrides.remove(rule, &key).await?;
        Ok(Replaced {
            key,
            before,
            after: None,
            rule_policy: named.policy,
            base: named.base,
        })
    }

    /// What the override of `key` under `name` is set on: the rule of that name, else
    /// the Envoy descriptor limit (`rate_limit.name`), with `key` canonical.
    fn override_target(&self, name: &str, key: &str) -> Result<Target, OverrideError> {
        let unknown = || OverrideError::UnknownRule(name.to_owned());
        if let Some(named) = self.rule(name) {
            let key = self.override_key(name, key)?;
            let p = named.policy;
            let custom = (self.routing.rules.iter())
                .find(|r| r.name == name)
                .and_then(|rule| custom_limit(&self.routing, rule, &key));
            // As a request is decided (validated when the configuration was loaded).
            let base = match custom.and_then(|limit| p.relimit(limit, p.burst()).ok()) {
                Some(custom) => (custom, "plans file"),
                None => (p, "rule"),
            };
            return Ok(Target {
                policy: p,
                base,
                global: named.global,
                in_flight: named.in_flight,
                key,
            });
        }
        let limits = self.envoy.as_deref().ok_or_else(unknown)?;
        let limit = match named_limit(limits, name) {
            Ok(Some(limit)) => limit,
            Ok(None) => return Err(unknown()),
            Err(n) => {
                return Err(invalid(
                    "rule",
                    format!(
                        "{n} Envoy descriptor limits are named `{name}`: an override names one (give it a name of its own)"
                    ),
                ));
            }
        };
        if limit.lease.is_some() {
            return Err(invalid(
                "rule",
                "the descriptor limit is leased (`x-weir: { lease }`): its leases are planned for its own limit, which an override would change",
            ));
        }
        if name.contains(':') {
            return Err(invalid(
                "rule",
                "a descriptor limit whose name holds `:` cannot be overridden (overrides are kept under `name:key`): rename it",
            ));
        }
        let Quota::Counted(policy) = limit.quota else {
            return Err(unknown());
        };
        let key = descriptor_key(limits, name, limit, key).map_err(|m| invalid("key", m))?;
        Ok(Target {
            policy,
            base: (policy, "rule"),
            global: false,
            in_flight: false,
            key,
        })
    }

    /// Whether overrides can name `name`: a rule, or a named Envoy descriptor limit.
    pub(crate) fn overridable(&self, name: &str) -> bool {
        self.rule(name).is_some()
            || self
                .envoy
                .as_deref()
                .is_some_and(|limits| matches!(named_limit(limits, name), Ok(Some(_)) | Err(_)))
    }

    /// `key` as the rule named `rule` keys its callers.
    fn override_key(&self, rule: &str, key: &str) -> Result<String, OverrideError> {
        self.rule_key(rule, key)
            .map_err(|message| invalid("key", message))
    }

    /// `key`, as an operator writes it, as the rule named `rule` keys its callers (one
    /// spelling for one caller, as overrides and bans are kept); the error says why it
    /// is no key of the rule.
    pub(in crate::engine) fn rule_key(&self, rule: &str, key: &str) -> Result<String, String> {
        let routed = self
            .routing
            .rules
            .iter()
            .find(|r| r.name == rule)
            .map(|r| r.key.as_slice());
        canonical_key(&self.routing, routed, key)
    }
}
