//! The admin API's bans (a rule's `on_limited`): listed, and lifted.
//!
//! - `GET /admin/api/bans[?rule=R]`: the bans in force, the fleet's on a shared store
//!   (this instance's on a store in process), at most `MAX_LISTED_BANS`, with
//!   `truncated` when there were more;
//! - `DELETE /admin/api/bans/{rule}/{key}`: lifts a ban in the store (every instance
//!   stops enforcing it within `BAN_FRESH_FOR`), logged with the caller's address.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::{Admin, authorize, query};
use crate::edge::contract::{InvalidRequest, StoreUnavailable, Unauthorized, UnknownRule};
use crate::edge::{Problem, ceil_millis};
use crate::engine::LiftError;

/// Where a ban's path starts.
const PREFIX: &str = "/admin/api/bans/";

/// One ban in force.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct BanJson {
    /// The rule (or the Envoy descriptor limit, by its `rate_limit.name`) whose
    /// `on_limited` banned the key.
    #[schema(example = "login")]
    rule: String,
    /// The key, as stored (lift it with this key).
    #[schema(example = "client_ip=203.0.113.7")]
    key: String,
    /// Milliseconds until the ban ends.
    ends_in_ms: u64,
}

/// The bans in force.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct BansAnswer {
    /// Longest first: at most 1000.
    bans: Vec<BanJson>,
    /// How many bans are in force in all.
    total: u64,
    /// Whether more are in force than `bans` lists (those ending soonest left out).
    truncated: bool,
}

/// The bans in force, of one rule or of all: on a shared store, those every instance
/// started (the fleet's); on a store in process, this instance's. At most 1000, those
/// that end last.
#[utoipa::path(get, path = "/admin/api/bans", operation_id = "list_bans", tag = "admin", security(("admin_token" = [])),
    params(
        ("rule" = Option<String>, Query, description = "Only this rule's bans.", example = "login"),
    ),
    responses(
        (status = 200, description = "The bans in force, longest first.", body = BansAnswer),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
        (status = 503, response = StoreUnavailable),
    ))]
pub(super) async fn list(State(admin): State<Admin>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let query = match query(&uri, &["rule"]) {
        Ok(query) => query,
        Err(problem) => return problem.into_response(),
    };
    let rule = query.get("rule").map(String::as_str);
    let engine = admin.engine.current();
    if let Some(rule) = rule
        && engine.rule(rule).is_none()
        && engine.banning(rule).is_none()
    {
        return Problem::unknown_rule(rule).into_response();
    }
    let list = match engine.bans(rule).await {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!(%error, "admin: the store could not list the bans");
            return Problem::store_unavailable().into_response();
        }
    };
    let truncated = list.total > list.bans.len() as u64;
    let bans = list
        .bans
        .into_iter()
        .map(|ban| BanJson {
            rule: ban.rule,
            key: ban.key,
            ends_in_ms: ceil_millis(ban.left),
        })
        .collect();
    Json(BansAnswer {
        bans,
        total: list.total,
        truncated,
    })
    .into_response()
}

/// What lifting did.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LiftAnswer {
    /// Whether a ban was in force (false: the key was not banned). Either way the key is
    /// not banned now and its denials are forgotten.
    lifted: bool,
    /// The rule.
    rule: String,
    /// The key, as the rule keys its callers (`client_ip=::ffff:192.0.2.1` is
    /// `client_ip=192.0.2.1`).
    key: String,
}

/// Lifts the ban of a key under a rule, and forgets its denials; every instance stops
/// enforcing it within half a second. Lifting a key that is not banned changes nothing.
#[utoipa::path(delete, path = "/admin/api/bans/{rule}/{key}", operation_id = "lift_ban", tag = "admin", security(("admin_token" = [])),
    params(
        ("rule" = String, Path, description = "The rule's name (a rule with `on_limited`), or an Envoy descriptor limit's (`rate_limit.name`, with `x-weir: { on_limited }`).", example = "login"),
        ("key" = String, Path, description = "The key, as listed by `GET /admin/api/bans` (percent-encoded).", example = "client_ip=203.0.113.7"),
    ),
    responses(
        (status = 200, description = "Lifted.", body = LiftAnswer),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
        (status = 503, response = StoreUnavailable),
    ))]
pub(super) async fn lift(
    State(admin): State<Admin>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let (rule, key) = match rule_and_key(uri.path()) {
        Ok(found) => found,
        Err(problem) => return problem.into_response(),
    };
    let engine = admin.engine.current();
    match engine.lift_ban(&rule, &key).await {
        Err(LiftError::UnknownRule) => Problem::unknown_rule(&rule).into_response(),
        Err(LiftError::Key(why)) => {
            Problem::invalid_request(format!("`key`: {why}")).into_response()
        }
        Ok(lifted) => {
            tracing::info!(
                rule = %rule.escape_debug(),
                key = %lifted.key.escape_debug(),
                banned = lifted.was_banned,
                by = %peer,
                "admin: ban lifted"
            );
            Json(LiftAnswer {
                lifted: lifted.was_banned,
                rule,
                key: lifted.key,
            })
            .into_response()
        }
        Err(LiftError::Store(error)) => {
            tracing::warn!(%error, "admin: the store could not answer");
            Problem::store_unavailable().into_response()
        }
    }
}

/// The rule and the key of a ban's path, each percent-decoded once (a key may hold
/// `/`, written `%2F` or as it is: the key is the rest of the path).
fn rule_and_key(path: &str) -> Result<(String, String), Problem> {
    let rest = path.strip_prefix(PREFIX).unwrap_or_default();
    let (rule, key) = rest
        .split_once('/')
        .ok_or_else(|| Problem::invalid_request("the path is /admin/api/bans/{rule}/{key}"))?;
    let decode = |text: &str, name: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|s| s.into_owned())
            .ok()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Problem::invalid_request(format!(
                    "`{name}` must be non-empty UTF-8, percent-encoded"
                ))
            })
    };
    Ok((decode(rule, "rule")?, decode(key, "key")?))
}

#[cfg(test)]
mod tests {
    use super::rule_and_key;

    #[test]
    fn a_key_may_hold_slashes_written_either_way() {
        let found = |path: &str| rule_and_key(path).ok();
        let v6 = Some(("api".to_owned(), "client_ip=2001:db8::/64".to_owned()));
        assert_eq!(found("/admin/api/bans/api/client_ip=2001:db8::%2F64"), v6);
        assert_eq!(found("/admin/api/bans/api/client_ip=2001:db8::/64"), v6);
        assert_eq!(found("/admin/api/bans/api/"), None);
        assert_eq!(found("/admin/api/bans/api"), None);
        assert_eq!(found("/admin/api/bans/api/%ff"), None);
    }
}
