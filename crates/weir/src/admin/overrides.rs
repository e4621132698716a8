//! The admin API's overrides: a limit for one key of one rule, set at runtime.
//!
//! - `PUT /admin/api/overrides/{rule}/{key}` with `{"limit", "period", "burst",
//!   "expires_at", "reason"}` sets (or replaces) one;
//! - `DELETE /admin/api/overrides/{rule}/{key}` deletes it;
//! - `GET /admin/api/overrides[?rule=R]` lists those in force.
//!
//! `{key}` is the rule's key as the engine writes it (`client_ip=203.0.113.7`,
//! `api_key=k1&client_ip=...`; for a rule of the decision API alone, the key
//! `/v1/check` is sent), percent-encoded in the path; it is read back and written
//! canonically (an address by the configured IPv6 prefix, an e-mail folded), and the
//! answer gives it so. Each change is logged as an audit line (target `weir::audit`):
//! rule, key, the limit before and after, the reason, the caller and the time.

use std::net::SocketAddr;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Admin, authorize, query};
use crate::edge::contract::{
    BodyTooLarge, InvalidRequest, StoreUnavailable, Unauthorized, UnknownOverride, UnknownRule,
};
use crate::edge::{Problem, json};
use crate::engine::{MAX_REASON_CHARS, Override, OverrideError, OverrideRequest, Replaced, Stored};

/// The largest override body read.
const MAX_OVERRIDE_BYTES: usize = 4096;

/// The parameters the list takes.
const LIST_PARAMETERS: &[&str] = &["rule"];

/// An override to set.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverrideBody {
    /// The limit per period, within the bounds of the rule's algorithm (1 to
    /// 1000000000; `sliding_log` to 10000).
    #[schema(minimum = 1, example = 1000)]
    limit: u64,
    /// The period (`500ms`, `10s`, `1m`, `1h`, `1d`; 1ms to 366d). Default: the rule's.
    #[schema(example = "1m")]
    period: Option<String>,
    /// The capacity of a `token_bucket`, `gcra` or `leaky_bucket` rule. Default: the
    /// limit.
    #[schema(minimum = 1)]
    burst: Option<u64>,
    /// When it ends (RFC 3339, to the second, in the future). Default: when deleted.
    #[schema(example = "2030-01-01T00:00:00Z")]
    expires_at: Option<String>,
    /// Why it is set: kept with it, logged and shown on the status page (at most 256
    /// characters).
    #[schema(example = "contract 4711: enterprise trial")]
    reason: Option<String>,
}

/// A limit in force for a key.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LimitView {
    /// The limit per period.
    limit: u64,
    /// The period, in seconds.
    period_seconds: f64,
    /// The capacity (the limit for the window algorithms).
    capacity: u64,
    /// Where it comes from: `override`, `plans file` (the key's custom limit, for a
    /// rule keyed on the plans file's identity), or `rule` (the rule's limit).
    from: &'static str,
}

/// An override in force.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct OverrideView {
    /// The rule.
    rule: String,
    /// The key, as the engine keys the rule.
    key: String,
    /// The limit per period.
    limit: u64,
    /// Its period in seconds; null: the rule's.
    period_seconds: Option<f64>,
    /// Its burst; null: the limit.
    burst: Option<u64>,
    /// When it ends (RFC 3339); null: when deleted.
    expires_at: Option<String>,
    /// Why it was set.
    reason: String,
    /// When it was set (RFC 3339).
    set_at: String,
}

/// What a change did.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct OverrideChange {
    /// The rule.
    rule: String,
    /// The key, as the engine keys the rule (what to send to delete it).
    key: String,
    /// The key's limit before.
    before: LimitView,
    /// The key's limit after.
    after: LimitView,
    /// The override set (null after a delete).
    #[serde(rename = "override")]
    set: Option<OverrideView>,
}

/// Sets a limit for one key of a rule, winning over the key's plan and the rule's
/// limit until `expires_at` (override > plans file custom limit > plan > rule);
/// applied by every instance within a second. Logged as an audit line.
#[utoipa::path(put, path = "/admin/api/overrides/{rule}/{key}", operation_id = "set_override", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("rule" = String, Path, description = "The rule's name.", example = "api"),
        ("key" = String, Path, description = "The key as the engine keys the rule (`weir explain` shows it), percent-encoded.", example = "client_ip=203.0.113.7"),
    ),
    request_body = OverrideBody,
    responses(
        (status = 200, description = "Set (replacing the key's override, if any).", body = OverrideChange),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
        (status = 413, response = BodyTooLarge),
        (status = 503, response = StoreUnavailable),
    ))]
pub(super) async fn set(
    State(admin): State<Admin>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Body,
) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = async {
        let Path((rule, key)) = path.map_err(path_problem)?;
        let bytes = axum::body::to_bytes(body, MAX_OVERRIDE_BYTES)
            .await
            .map_err(|_| Problem::body_too_large(MAX_OVERRIDE_BYTES).into_response())?;
        let body: OverrideBody = json::read(
            &bytes,
            "an override",
            r#"{"limit": 1000, "period": "1m", "expires_at": "2030-01-01T00:00:00Z", "reason": "trial"}"#,
        )
        .map_err(IntoResponse::into_response)?;
        let request = request(body).map_err(IntoResponse::into_response)?;
        let engine = admin.engine.current();
        let changed = engine
            .set_override(&rule, &key, request)
            .await
            .map_err(refusal)?;
        audit(&rule, &changed, peer, engine.overrides().now_secs(), "set");
        Ok(Json(change(&rule, changed)).into_response())
    };
    answer.await.unwrap_or_else(|refused: Response| refused)
}

/// Deletes a key's override: the key's plan and the rule's limit apply again, on every
/// instance within a second. Logged as an audit line.
#[utoipa::path(delete, path = "/admin/api/overrides/{rule}/{key}", operation_id = "delete_override", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("rule" = String, Path, description = "The rule's name.", example = "api"),
        ("key" = String, Path, description = "The key as the engine keys the rule, percent-encoded.", example = "client_ip=203.0.113.7"),
    ),
    responses(
        (status = 200, description = "Deleted.", body = OverrideChange),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownOverride),
        (status = 503, response = StoreUnavailable),
    ))]
pub(super) async fn delete(
    State(admin): State<Admin>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = async {
        let Path((rule, key)) = path.map_err(path_problem)?;
        let engine = admin.engine.current();
        let changed = engine.delete_override(&rule, &key).await.map_err(refusal)?;
        audit(
            &rule,
            &changed,
            peer,
            engine.overrides().now_secs(),
            "deleted",
        );
        Ok(Json(change(&rule, changed)).into_response())
    };
    answer.await.unwrap_or_else(|refused: Response| refused)
}

/// The overrides in force (of one rule, with `rule`), by rule and key.
#[utoipa::path(get, path = "/admin/api/overrides", operation_id = "list_overrides", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("rule" = Option<String>, Query, description = "Only this rule's.", example = "api"),
    ),
    responses(
        (status = 200, description = "The overrides in force.", body = Vec<OverrideView>),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
    ))]
pub(super) async fn list(State(admin): State<Admin>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = || -> Result<Response, Problem> {
        let query = query(&uri, LIST_PARAMETERS)?;
        let rule = query.get("rule").map(String::as_str);
        let engine = admin.engine.current();
        if let Some(rule) = rule
            && !engine.overridable(rule)
        {
            return Err(Problem::unknown_rule(rule));
        }
        let views: Vec<OverrideView> = engine
            .overrides()
            .list(rule)
            .into_iter()
            .map(view)
            .collect();
        Ok(Json(views).into_response())
    };
    answer().unwrap_or_else(IntoResponse::into_response)
}

/// The body read into what the engine checks: the period and the expiry parsed, each
/// error naming its field.
fn request(body: OverrideBody) -> Result<OverrideRequest, Problem> {
    let field =
        |name: &str, message: String| Problem::invalid_request(format!("`{name}`: {message}"));
    let period = body
        .period
        .as_deref()
        .map(|p| weir_core::parse_period(p).map_err(|e| field("period", e.to_string())))
        .transpose()?;
    let expires_at = body.expires_at.as_deref().map(expiry).transpose()?;
    let reason = body.reason.unwrap_or_default();
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(field(
            "reason",
            format!("at most {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(OverrideRequest {
        limit: body.limit,
        period,
        burst: body.burst,
        expires_at,
        reason,
    })
}

/// `expires_at` as written (RFC 3339) in seconds since the Unix epoch, kept to the
/// second: a fraction ends it at the next second.
pub(super) fn expiry(text: &str) -> Result<u64, Problem> {
    let field = |message: String| Problem::invalid_request(format!("`expires_at`: {message}"));
    let at = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| {
        field(format!(
            "`{}` is not an RFC 3339 time such as 2030-01-01T00:00:00Z",
            text.escape_debug()
        ))
    })?;
    let seconds = at.unix_timestamp() + i64::from(at.nanosecond() > 0);
    u64::try_from(seconds).map_err(|_| field("must be in the future".into()))
}

/// A path that does not decode (not UTF-8): a 400 naming it.
fn path_problem(_: PathRejection) -> Response {
    Problem::invalid_request("the rule and key in the path must be percent-encoded UTF-8")
        .into_response()
}

/// The answer to a change the engine refused.
fn refusal(error: OverrideError) -> Response {
    match error {
        OverrideError::UnknownRule(rule) => Problem::unknown_rule(&rule).into_response(),
        OverrideError::Invalid { .. } => {
            Problem::invalid_request(error.to_string()).into_response()
        }
        OverrideError::NotSet => Problem::no_override().into_response(),
        OverrideError::Unavailable(error) => {
            tracing::warn!(%error, "admin: the override could not be kept");
            Problem::store_unavailable().into_response()
        }
    }
}

/// The audit line of a change.
fn audit(rule: &str, changed: &Replaced, peer: SocketAddr, at: u64, what: &str) {
    let before = limit(&changed.before, changed);
    let after = limit(&changed.after, changed);
    let reason = changed
        .after
        .as_ref()
        .or(changed.before.as_ref())
        .map(|o| o.reason.as_str())
        .unwrap_or_default();
    // A deleted override's own expiry, or the new one's.
    let expires_at = changed
        .after
        .as_ref()
        .or(changed.before.as_ref())
        .and_then(|o| o.expires_at)
        .map_or_else(|| "never".to_owned(), rfc3339);
    tracing::info!(
        target: "weir::audit",
        rule = %rule,
        key = %changed.key.escape_debug(),
        old_limit = %describe(&before),
        new_limit = %describe(&after),
        reason = %reason.escape_debug(),
        expires_at = %expires_at,
        at = %rfc3339(at),
        by = %peer,
        "admin: override {what}"
    );
}

fn describe(limit: &LimitView) -> String {
    format!(
        "{} per {}s, capacity {} ({})",
        limit.limit, limit.period_seconds, limit.capacity, limit.from
    )
}

/// The limit a key has with `entry` (an override, or none: the rule's, or its plans
/// file custom limit).
fn limit(entry: &Option<Override>, changed: &Replaced) -> LimitView {
    let policy = entry
        .as_ref()
        .and_then(|o| o.policy(&changed.rule_policy).ok());
    let (policy, from) = match policy {
        Some(policy) => (policy, "override"),
        None => changed.base,
    };
    LimitView {
        limit: policy.limit(),
        period_seconds: policy.period().as_secs_f64(),
        capacity: policy.capacity(),
        from,
    }
}

fn change(rule: &str, changed: Replaced) -> OverrideChange {
    OverrideChange {
        rule: rule.to_owned(),
        before: limit(&changed.before, &changed),
        after: limit(&changed.after, &changed),
        set: changed.after.map(|entry| {
            view(Stored {
                rule: rule.to_owned(),
                key: changed.key.clone(),
                entry,
            })
        }),
        key: changed.key,
    }
}

fn view(stored: Stored) -> OverrideView {
    let o = stored.entry;
    OverrideView {
        rule: stored.rule,
        key: stored.key,
        limit: o.limit,
        period_seconds: o.period().map(|p| p.as_secs_f64()),
        burst: o.burst,
        expires_at: o.expires_at.map(rfc3339),
        reason: o.reason,
        set_at: rfc3339(o.set_at),
    }
}

/// Seconds since the Unix epoch as RFC 3339 (UTC).
pub(super) fn rfc3339(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}
