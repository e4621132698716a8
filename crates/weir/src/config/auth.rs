//! The `auth:` section: the forward-auth door (`/v1/auth`, served on `--auth-listen`),
//! which a proxy (nginx `auth_request`, ingress-nginx `auth-url`, Caddy
//! `forward_auth`, Traefik `ForwardAuth`, Envoy `ext_authz`) asks before it forwards a
//! request.
//!
//! ```yaml
//! auth:
//!   convention: forwarded      # forwarded | original | envoy
//!   trusted_proxies: [127.0.0.1/32]   # who may call the door (default: loopback)
//!   denied_status: 429         # 403 for nginx and ingress-nginx
//!   path_prefix: /v1/auth      # envoy only: ext_authz's `path_prefix`
//!   reservations: app          # the app settles rules counted by outcome (/v1/settle)
//! ```
//!
//! The door sees a request's head and nothing after it: no body, no answer. Every rule
//! a request can reach through it (every rule with a `match`) must be decidable from
//! the head, or the file is refused, rule by rule: a rule keyed on a body field never
//! is; one with `cost_from`, `count_statuses`, `reset_statuses` or `lockout` is only
//! when the app settles it (`reservations: app`). Nothing falls back to a weaker key
//! or an uncounted attempt.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use ipnet::IpNet;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ConfigError;
use super::error::Errors;
use super::file::{RawIdentity, RawPlans, RawRule};
use super::upstream::networks;

/// Which headers carry the original request, by the proxy that asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Convention {
    /// `X-Forwarded-Method`, `-Proto`, `-Host`, `-Uri`, `-For`: Traefik's `ForwardAuth`
    /// and Caddy's `forward_auth`.
    #[default]
    Forwarded,
    /// `X-Original-Method` with `X-Original-URI` (the host from `Host`) or
    /// `X-Original-URL` (absolute: its host and target), and `X-Forwarded-For`: nginx
    /// `auth_request` as the README configures it, and ingress-nginx's `auth-url`.
    Original,
    /// Envoy's `ext_authz` HTTP service: the request's own method and headers, its
    /// path after the door's `path_prefix`, and `X-Forwarded-For`.
    Envoy,
}

/// Who settles the reservations of rules counted by outcome (or priced by the
/// answer) at the door.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Reservations {
    /// Nobody: such rules cannot be reached through the door (the file is refused).
    #[default]
    None,
    /// The app behind the proxy: the door's allowed answer carries a
    /// `Weir-Reservation` id, which the app settles with `POST /v1/settle`.
    App,
}

/// The door's default path, and Envoy's `path_prefix` in the examples.
pub(crate) const AUTH_PATH: &str = "/v1/auth";

/// The forward-auth door's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthConfig {
    /// Which headers carry the original request.
    pub convention: Convention,
    /// Who may call the door (canonical blocks): anyone else is answered 403.
    pub trusted_proxies: Vec<IpNet>,
    /// The status of a denial (429, or 403 for nginx, whose `auth_request` passes only
    /// 2xx, 401 and 403).
    pub denied_status: StatusCode,
    /// For [`Convention::Envoy`]: the path the original path follows.
    pub path_prefix: String,
    /// Who settles reservations.
    pub reservations: Reservations,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            convention: Convention::Forwarded,
            trusted_proxies: loopback(),
            denied_status: StatusCode::TOO_MANY_REQUESTS,
            path_prefix: AUTH_PATH.to_owned(),
            reservations: Reservations::None,
        }
    }
}

/// 127.0.0.0/8 and ::1.
fn loopback() -> Vec<IpNet> {
    ["127.0.0.0/8", "::1/128"]
        .iter()
        .filter_map(|net| net.parse().ok())
        .collect()
}

/// `auth:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(default)]
    convention: ConventionName,
    trusted_proxies: Option<Vec<Spanned<String>>>,
    denied_status: Option<Spanned<u16>>,
    path_prefix: Option<Spanned<String>>,
    #[serde(default)]
    reservations: ReservationsName,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ConventionName {
    #[default]
    Forwarded,
    Original,
    Envoy,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ReservationsName {
    #[default]
    None,
    App,
}

/// The `auth` section, checked; and every rule reachable through the door checked
/// against what the door can see.
pub(super) fn auth(
    raw: Option<&Spanned<RawAuth>>,
    rules: &[RawRule],
    identities: &BTreeMap<String, Spanned<RawIdentity>>,
    plans: Option<&Spanned<RawPlans>>,
    errors: &Errors<'_>,
) -> Result<Option<AuthConfig>, ConfigError> {
    let Some(section) = raw else {
        return Ok(None);
    };
    // A plan looked up by a body field is never known at the door: every caller would
    // be anonymous, and the rules for plans would not apply (uncounted).
    if let Some(plans) = plans
        && let Some(identity) = &plans.value.identity
        && identities
            .get(identity.as_str())
            .is_some_and(|raw| raw.value.body_field.is_some())
    {
        return Err(errors.at(
            plans.referenced,
            "plans.identity",
            format!(
                "plans are looked up by `{identity}`, a body field: the auth door never sees a body, so it could not tell a caller's plan (look plans up by a header or a token)"
            ),
        ));
    }
    let raw = &section.value;
    let convention = match raw.convention {
        ConventionName::Forwarded => Convention::Forwarded,
        ConventionName::Original => Convention::Original,
        ConventionName::Envoy => Convention::Envoy,
    };
    let trusted_proxies = match &raw.trusted_proxies {
        None => loopback(),
        Some(list) => networks(list, "auth.trusted_proxies", errors)?,
    };
    let denied_status = match &raw.denied_status {
        None => StatusCode::TOO_MANY_REQUESTS,
        Some(status) => StatusCode::from_u16(status.value)
            .ok()
            .filter(StatusCode::is_client_error)
            .ok_or_else(|| {
                errors.at(
                    status.referenced,
                    "auth.denied_status",
                    "denied_status must be a 4xx status (429; 403 for nginx and ingress-nginx)",
                )
            })?,
    };
    let path_prefix = match &raw.path_prefix {
        None => AUTH_PATH.to_owned(),
        Some(prefix) if convention != Convention::Envoy => {
            return Err(errors.at(
                prefix.referenced,
                "auth.path_prefix",
                "`path_prefix` is for `convention: envoy` (ext_authz's path_prefix); the other conventions are served at /v1/auth",
            ));
        }
        Some(prefix) => {
            let plain = prefix.value.len() > 1
                && prefix.value.starts_with('/')
                && !prefix.value.ends_with('/')
                && prefix
                    .value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b))
                && !prefix.value.split('/').any(|s| s == "." || s == "..");
            if !plain {
                return Err(errors.at(
                    prefix.referenced,
                    "auth.path_prefix",
                    "path_prefix must be a plain path such as /v1/auth: starting with `/`, not ending with one, of letters, digits, `-`, `.`, `_`, `~`",
                ));
            }
            prefix.value.clone()
        }
    };
    let reservations = match raw.reservations {
        ReservationsName::None => Reservations::None,
        ReservationsName::App => Reservations::App,
    };
    for (i, rule) in rules.iter().enumerate() {
        decidable(i, rule, identities, reservations, errors)?;
    }
    Ok(Some(AuthConfig {
        convention,
        trusted_proxies,
        denied_status,
        path_prefix,
        reservations,
    }))
}

/// Refuses a rule the door would reach but could not decide as written.
fn decidable(
    i: usize,
    rule: &RawRule,
    identities: &BTreeMap<String, Spanned<RawIdentity>>,
    reservations: Reservations,
    errors: &Errors<'_>,
) -> Result<(), ConfigError> {
    // Only rules with a `match` decide requests (the others are `/v1/check`'s).
    if rule.route.is_none() {
        return Ok(());
    }
    let name = &rule.name.value;
    if let Some(key) = &rule.key {
        let body = key.value.iter().find(|identity| {
            identities
                .get(identity.as_str())
                .is_some_and(|raw| raw.value.body_field.is_some())
        });
        if let Some(identity) = body {
            return Err(errors.at(
                key.referenced,
                format!("rules[{i}].key"),
                format!(
                    "rule `{name}` is keyed on `{identity}`, a body field: the auth door never sees a body, so it could not decide it (key it on a header, a token or the client address, or give it a `match` the proxy's requests do not reach)"
                ),
            ));
        }
    }
    if reservations == Reservations::App {
        return Ok(());
    }
    let outcome = [
        (
            rule.cost_from.as_ref().map(|c| c.referenced),
            "cost_from",
            "is priced by the answer",
        ),
        (
            (!rule.count_statuses.is_empty()).then_some(rule.name.referenced),
            "count_statuses",
            "is counted by the answer's status",
        ),
        (
            (!rule.reset_statuses.is_empty()).then_some(rule.name.referenced),
            "reset_statuses",
            "is reset by the answer's status",
        ),
        (
            rule.lockout.as_ref().map(|l| l.referenced),
            "lockout",
            "locks out by the answer's status",
        ),
        (
            matches!(rule.algorithm, super::file::AlgorithmName::Concurrency)
                .then_some(rule.name.referenced),
            "algorithm",
            "holds a slot until the answer ends",
        ),
    ];
    if let Some((Some(at), field, what)) = outcome.into_iter().find(|(at, ..)| at.is_some()) {
        return Err(errors.at(
            at,
            format!("rules[{i}].{field}"),
            format!(
                "rule `{name}` {what}, which the auth door never sees: set `auth.reservations: app` for the app to settle it with /v1/settle (the door's answer carries a Weir-Reservation id), or keep the rule off the door's requests"
            ),
        ));
    }
    Ok(())
}
