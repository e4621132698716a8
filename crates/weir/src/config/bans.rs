//! A rule's `on_limited`: ban a key denied `after` times within `within` for `ban`.
//!
//! Not a weapon: a ban keyed on something a caller merely writes (an email in a login
//! body, a username, an API key header) would let anyone ban a real user by failing on
//! their behalf, so the rule must also be keyed by the client's address
//! (`client_ip` in `key`); a rule without `key` is keyed by it alone.

use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::ConfigError;
use super::error::Errors;
use super::period::Period;
use crate::engine::{CLIENT_IP, MAX_BAN_AFTER, OnLimited};

/// `on_limited` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOnLimited {
    ban: Period,
    after: u64,
    within: Period,
    /// 429 unless written (an HTTP status: not for an Envoy descriptor).
    status: Option<u16>,
}

/// The shortest ban: shorter would be a retry delay, which the limit already is.
const MIN_BAN: Duration = Duration::from_secs(1);

/// The rule's bans, checked: `ban` from 1s to 366d, `after` from 1 to
/// [`MAX_BAN_AFTER`], `within` from 1s to 366d, `status` 429 or 403, and a key with
/// `client_ip`.
pub(super) fn on_limited(
    i: usize,
    rule: &str,
    key: &[String],
    raw: &Spanned<RawOnLimited>,
    errors: &Errors<'_>,
) -> Result<OnLimited, ConfigError> {
    let at: Location = raw.referenced;
    let field = |name: &str| match name {
        "" => format!("rules[{i}].on_limited"),
        name => format!("rules[{i}].on_limited.{name}"),
    };
    let status = raw.value.status.unwrap_or(429);
    if status != 429 && status != 403 {
        return Err(errors.at(
            at,
            field("status"),
            format!("`status` must be 429 or 403, got {status}"),
        ));
    }
    if !key.iter().any(|k| k == CLIENT_IP) {
        return Err(errors.at(
            at,
            field(""),
            format!(
                "a ban keyed on `{}` alone would let anyone ban a real user by failing in their name: add `{CLIENT_IP}` to the rule's `key` (e.g. `key: [{}, {CLIENT_IP}]`), so a ban stops one client, not an account",
                key.join(", "),
                key.join(", ")
            ),
        ));
    }
    checked(rule, &raw.value, status).map_err(|(name, message)| errors.at(at, field(name), message))
}

/// `on_limited`'s spans and count checked (`ban` and `within` from 1s to 366d, `after`
/// from 1 to [`MAX_BAN_AFTER`]), its state kept under `rule`; else the field at fault
/// (`""`: `on_limited` itself) and why. Shared by rules and Envoy descriptors.
pub(super) fn checked(
    rule: &str,
    r: &RawOnLimited,
    status: u16,
) -> Result<OnLimited, (&'static str, String)> {
    let span = |name: &'static str, value: Duration| {
        if (MIN_BAN..=weir_core::MAX_PERIOD).contains(&value) {
            Ok(())
        } else {
            Err((name, format!("`{name}` must be between 1s and 366d")))
        }
    };
    span("ban", r.ban.0)?;
    span("within", r.within.0)?;
    if !(1..=MAX_BAN_AFTER).contains(&r.after) {
        return Err((
            "after",
            format!("`after` must be between 1 and {MAX_BAN_AFTER} denials"),
        ));
    }
    OnLimited::new(rule, r.ban.0, r.after, r.within.0, status).map_err(|e| ("", e.to_string()))
}

impl RawOnLimited {
    /// Whether `status` was written (an HTTP door's answer).
    pub(super) fn has_status(&self) -> bool {
        self.status.is_some()
    }
}
