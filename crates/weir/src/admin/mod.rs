//! The admin API and status page, on the admin listener only, and only when the
//! configuration has an `admin` section. Every `/admin/api/` call needs
//! `Authorization: Bearer <token>`; the page itself holds no data (it asks the API,
//! with a token the operator gives it in the address's `#token=` fragment, which
//! browsers never send to the server).
//!
//! - `GET /admin/api/rules`: each rule, its limit, live decision rates and totals, and
//!   the keys near their limit over the last minute;
//! - `GET /admin/api/key?rule=R&key=K`: a key's state (remaining, reset, lockout);
//! - `POST /admin/api/reset` with `{"rule": R, "key": K}`: forgets a key's state and
//!   lockouts (unlocking a caller), logged;
//! - `GET /admin/api/top?rule=R&minutes=5&n=20`: the identities the rule denied most
//!   (estimated in bounded memory; see `metrics::top`);
//! - `GET /admin/api/doors`: each door's answers so far, by status class (the page's
//!   traffic by door);
//! - `PUT`/`DELETE /admin/api/overrides/{rule}/{key}`, `GET /admin/api/overrides`:
//!   limits for one key set at runtime (see `overrides`);
//! - `PUT`/`DELETE /admin/api/lists/{list}/{kind}/{entry}`, `GET /admin/api/lists`:
//!   allow and deny list entries set at runtime (see `lists`);
//! - `GET /admin/api/bans[?rule=R]` and `DELETE /admin/api/bans/{rule}/{key}`: the
//!   bans in force, and lifting one (`bans.rs`).

mod bans;
mod command;
mod lists;
mod lists_command;
mod overrides;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use serde::{Deserialize, Serialize};

use crate::config::AdminConfig;
use crate::edge::contract::{
    BodyTooLarge, InvalidRequest, StoreUnavailable, Unauthorized, UnknownRule,
};
use crate::edge::{Problem, ceil_millis, json};
use crate::engine::Engine;
use crate::metrics::{CLASSES, Counted};
use crate::reloadable::Reloadable;

pub use self::command::{CommandError, OverrideArgs, run as run_override};
pub use self::lists_command::{ListsArgs, run as run_lists};

/// The status page: one HTML file and its script, no build step, no external assets.
const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("page.js");

/// What the page may do: its own script and the admin API, nothing else (no inline
/// script, no other origin, no framing).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The parameters each query may have.
const KEY_PARAMETERS: &[&str] = &["rule", "key"];
const TOP_PARAMETERS: &[&str] = &["rule", "minutes", "n"];

/// The largest reset request read.
const MAX_RESET_BYTES: usize = 4096;

#[derive(Clone)]
struct Admin {
    engine: Reloadable<Engine>,
    config: Reloadable<AdminConfig>,
}

/// The admin routes, to merge into the admin listener's router. The token is read from
/// `config` at each call: a reload that changes it takes effect at once.
pub(crate) fn router(engine: Reloadable<Engine>, config: Reloadable<AdminConfig>) -> Router {
    let page = || async {
        (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
                (header::CONTENT_SECURITY_POLICY, PAGE_POLICY),
                (header::REFERRER_POLICY, "no-referrer"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            PAGE,
        )
    };
    let script = || async {
        (
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            SCRIPT,
        )
    };
    Router::new()
        .route("/admin", get(page))
        .route("/admin/", get(page))
        .route("/admin/page.js", get(script))
        .route("/admin/api/rules", get(rules))
        .route("/admin/api/key", get(key))
        .route("/admin/api/reset", post(reset))
        .route("/admin/api/top", get(top))
        .route("/admin/api/doors", get(doors))
        .route("/admin/api/overrides", get(overrides::list))
        .route(
            "/admin/api/overrides/{rule}/{key}",
            put(overrides::set).delete(overrides::delete),
        )
        .route("/admin/api/lists", get(lists::list))
        .route(
            "/admin/api/lists/{list}/{kind}/{*entry}",
            put(lists::set).delete(lists::delete),
        )
        .route("/admin/api/bans", get(bans::list))
        .route("/admin/api/bans/{rule}/{*key}", delete(bans::lift))
        .with_state(Admin { engine, config })
}

/// The admin API's part of the OpenAPI document, with its bearer token scheme.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(
        rules,
        key,
        reset,
        top,
        doors,
        overrides::list,
        overrides::set,
        overrides::delete,
        lists::list,
        lists::set,
        lists::delete,
        bans::list,
        bans::lift
    ),
    modifiers(&AdminToken)
)]
pub(crate) struct AdminApi;

/// The security scheme of the admin API: `Authorization: Bearer <admin token>`.
struct AdminToken;

impl utoipa::Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some("The token of the configuration's `admin` section."))
            .build();
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme("admin_token", SecurityScheme::Http(scheme));
    }
}

/// `None` when the request carries the admin token, else the 401 to answer.
fn authorize(admin: &Admin, headers: &HeaderMap) -> Option<Response> {
    // The scheme is case-insensitive (RFC 9110, 11.1).
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    if token.is_some_and(|token| admin.config.current().accepts(token)) {
        return None;
    }
    let mut response = Problem::unauthorized().into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"weir admin\""),
    );
    Some(response)
}

/// The query's parameters, each one of `allowed`: a parameter given twice, one not
/// allowed (a typo) or one that does not decode to UTF-8 is an error, never a guess.
fn query(uri: &Uri, allowed: &[&str]) -> Result<HashMap<String, String>, Problem> {
    let decode = |text: &str| {
        let text = text.replace('+', " ");
        percent_encoding::percent_decode_str(&text)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| Problem::invalid_request("the query does not decode to UTF-8"))
    };
    let mut found = HashMap::new();
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (decode(name)?, decode(value)?);
        if !allowed.contains(&name.as_str()) {
            return Err(Problem::invalid_request(format!(
                "unknown parameter `{}`: use {}",
                name.escape_debug(),
                allowed.join(", ")
            )));
        }
        if found.contains_key(&name) {
            return Err(Problem::invalid_request(format!(
                "`{name}` is given more than once"
            )));
        }
        found.insert(name, value);
    }
    Ok(found)
}

fn required<'q>(query: &'q HashMap<String, String>, name: &str) -> Result<&'q str, Problem> {
    query
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Problem::invalid_request(format!("`{name}` is required")))
}

/// A rule as configured, and what it decided lately.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct RuleView {
    /// The rule's name.
    name: String,
    /// Its algorithm (`token_bucket`, `fixed_window`, ...).
    algorithm: String,
    /// Its limit.
    limit: u64,
    /// Its period, in seconds (0 for `concurrency`, which has none).
    period_seconds: f64,
    /// Requests allowed per second, over the last `rates_over_seconds`.
    allowed_per_second: f64,
    /// Requests denied per second, over the last `rates_over_seconds`.
    denied_per_second: f64,
    /// The span the rates are measured over.
    rates_over_seconds: f64,
    /// Requests allowed since the start.
    allowed_total: u64,
    /// Requests denied since the start.
    denied_total: u64,
    /// About how many keys were allowed with less than 10% left, over the last minute.
    near_limit_keys: u64,
}

/// Every rule, its limit, its live decision rates and totals, and the keys near their
/// limit over the last minute.
#[utoipa::path(get, path = "/admin/api/rules", tag = "admin", security(("admin_token" = [])),
    responses(
        (status = 200, description = "The rules, in configuration order.", body = Vec<RuleView>),
        (status = 401, response = Unauthorized),
    ))]
async fn rules(State(admin): State<Admin>, headers: HeaderMap) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let engine = admin.engine.current();
    let metrics = engine.metrics().metrics();
    let rates = metrics.rates();
    let now = metrics.now();
    let views: Vec<RuleView> = engine
        .rules()
        .map(|rule| {
            let live = metrics.rule(&rule.name);
            let totals = live.totals();
            let rate = rates.get(&rule.name).copied().unwrap_or_default();
            RuleView {
                name: rule.name.clone(),
                algorithm: match rule.in_flight {
                    true => "concurrency".to_owned(),
                    false => rule.policy.algorithm().to_string(),
                },
                limit: rule.policy.limit(),
                // A `concurrency` rule has no period.
                period_seconds: match rule.in_flight {
                    true => 0.0,
                    false => rule.policy.period().as_secs_f64(),
                },
                allowed_per_second: rate.allowed_per_second,
                denied_per_second: rate.denied_per_second,
                rates_over_seconds: rate.over_seconds,
                allowed_total: totals.allowed,
                denied_total: totals.denied,
                near_limit_keys: live.near_limit_keys(now),
            }
        })
        .collect();
    Json(views).into_response()
}

/// One key's state under one rule.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct KeyView {
    /// The rule.
    rule: String,
    /// The key, as stored.
    key: String,
    /// Its limit.
    limit: u64,
    /// What remains of its budget.
    remaining: u64,
    /// Milliseconds until its budget is full again.
    reset_after_ms: u64,
    /// Whether it is locked out (a `lockout` rule tripped).
    locked_out: bool,
    /// For how much longer, in milliseconds.
    locked_for_ms: Option<u64>,
    /// How many lockouts it has had in a row.
    lockouts: u64,
}

/// A key's state under a rule: what remains, when it resets, whether it is locked out.
#[utoipa::path(get, path = "/admin/api/key", tag = "admin", security(("admin_token" = [])),
    params(
        ("rule" = String, Query, description = "The rule's name.", example = "api"),
        ("key" = String, Query, description = "The key, as the rule builds it (see `weir explain`).", example = "203.0.113.7"),
    ),
    responses(
        (status = 200, description = "The key's state.", body = KeyView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
        (status = 503, response = StoreUnavailable),
    ))]
async fn key(State(admin): State<Admin>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = async {
        let query = query(&uri, KEY_PARAMETERS).map_err(IntoResponse::into_response)?;
        let rule = required(&query, "rule").map_err(IntoResponse::into_response)?;
        let key = required(&query, "key").map_err(IntoResponse::into_response)?;
        let engine = admin.engine.current();
        match engine.inspect(rule, key).await {
            Ok(Some(state)) => Ok(Json(KeyView {
                rule: rule.to_owned(),
                key: state.key,
                limit: state.limit,
                remaining: state.remaining,
                reset_after_ms: ceil_millis(state.reset_after),
                locked_out: state.locked_for.is_some(),
                locked_for_ms: state.locked_for.map(ceil_millis),
                lockouts: state.lockouts,
            })
            .into_response()),
            Ok(None) => Err(Problem::unknown_rule(rule).into_response()),
            Err(error) => {
                tracing::warn!(%error, "admin: the store could not answer");
                Err(Problem::store_unavailable().into_response())
            }
        }
    };
    answer.await.unwrap_or_else(|refused| refused)
}

/// A key to forget.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetRequest {
    /// The rule's name.
    #[schema(example = "api")]
    rule: String,
    /// The key, as the rule builds it.
    #[schema(min_length = 1, example = "203.0.113.7")]
    key: String,
}

/// What a reset did.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ResetAnswer<'a> {
    /// Always true: the key's state and lockouts are forgotten.
    reset: bool,
    /// The rule.
    rule: &'a str,
    /// The key.
    key: &'a str,
}

/// Forgets a key's state and lockouts under a rule (unlocking a caller); logged with
/// the caller's address.
#[utoipa::path(post, path = "/admin/api/reset", tag = "admin", security(("admin_token" = [])),
    request_body = ResetRequest,
    responses(
        (status = 200, description = "Forgotten.", body = ResetAnswer),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
        (status = 413, response = BodyTooLarge),
        (status = 503, response = StoreUnavailable),
    ))]
async fn reset(
    State(admin): State<Admin>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = async {
        let bytes = axum::body::to_bytes(body, MAX_RESET_BYTES)
            .await
            .map_err(|_| Problem::body_too_large(MAX_RESET_BYTES).into_response())?;
        let request: ResetRequest = json::read(
            &bytes,
            "a reset",
            r#"{"rule": "login", "key": "ana@example.com"}"#,
        )
        .map_err(IntoResponse::into_response)?;
        if request.key.is_empty() {
            return Err(Problem::invalid_request("`key` must not be empty").into_response());
        }
        let engine = admin.engine.current();
        match engine.reset_key(&request.rule, &request.key).await {
            Ok(true) => {
                tracing::info!(
                    rule = %request.rule.escape_debug(),
                    key = %request.key.escape_debug(),
                    by = %peer,
                    "admin: key reset (state and lockouts forgotten)"
                );
                Ok(Json(ResetAnswer {
                    reset: true,
                    rule: &request.rule,
                    key: &request.key,
                })
                .into_response())
            }
            Ok(false) => Err(Problem::unknown_rule(&request.rule).into_response()),
            Err(error) => {
                tracing::warn!(%error, "admin: the store could not answer");
                Err(Problem::store_unavailable().into_response())
            }
        }
    };
    answer.await.unwrap_or_else(|refused| refused)
}

/// A door's answers since the process started, by status class.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DoorView {
    /// The door: `gateway`, `layer`, `check` (`/v1/check`), `decide` (`/v1/decide`),
    /// `auth` (`/v1/auth`) or `envoy` (`ShouldRateLimit`).
    door: &'static str,
    /// Its answers by status class (`1xx` to `5xx`): 2xx allowed, 4xx denied or
    /// refused, 5xx unavailable.
    answers: BTreeMap<&'static str, u64>,
    /// All its answers.
    total: u64,
}

/// Each door's answers so far by status class (`weir_door_answers_total`): where the
/// traffic comes in.
#[utoipa::path(get, path = "/admin/api/doors", tag = "admin", security(("admin_token" = [])),
    responses(
        (status = 200, description = "Every door, answered through or not.", body = Vec<DoorView>),
        (status = 401, response = Unauthorized),
    ))]
async fn doors(State(admin): State<Admin>, headers: HeaderMap) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let engine = admin.engine.current();
    let views: Vec<DoorView> = engine
        .metrics()
        .door_totals()
        .into_iter()
        .map(|(door, totals)| DoorView {
            door: door.as_str(),
            answers: CLASSES.into_iter().zip(totals).collect(),
            total: totals.iter().sum(),
        })
        .collect();
    Json(views).into_response()
}

/// The identities a rule denied most.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct TopAnswer<'a> {
    /// The rule.
    rule: &'a str,
    /// Over how many minutes.
    minutes: u64,
    /// The identities, most denied first.
    top: Vec<Counted>,
}

/// The identities a rule denied most over the last minutes (estimated in bounded
/// memory: each count may overstate by its `error`).
#[utoipa::path(get, path = "/admin/api/top", tag = "admin", security(("admin_token" = [])),
    params(
        ("rule" = String, Query, description = "The rule's name.", example = "api"),
        ("minutes" = Option<u64>, Query, description = "Over the last how many minutes (1 to 5, default 5).", minimum = 1, maximum = 5),
        ("n" = Option<u64>, Query, description = "How many identities (1 to 64, default 20).", minimum = 1, maximum = 64),
    ),
    responses(
        (status = 200, description = "The most denied identities.", body = TopAnswer),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = UnknownRule),
    ))]
async fn top(State(admin): State<Admin>, headers: HeaderMap, uri: Uri) -> Response {
    if let Some(refused) = authorize(&admin, &headers) {
        return refused;
    }
    let answer = || -> Result<Response, Problem> {
        let query = query(&uri, TOP_PARAMETERS)?;
        let rule = required(&query, "rule")?;
        let number = |name: &str, default: u64, max: u64| match query.get(name) {
            None => Ok(default),
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    Problem::invalid_request(format!("`{name}` must be a number from 1 to {max}"))
                }),
        };
        let minutes = number("minutes", 5, 5)?;
        let n = number("n", 20, 64)?;
        let engine = admin.engine.current();
        if engine.rule(rule).is_none() {
            return Err(Problem::unknown_rule(rule));
        }
        let metrics = engine.metrics().metrics();
        let top = metrics
            .rule(rule)
            .top_denied(metrics.now(), minutes, n as usize);
        Ok(Json(TopAnswer { rule, minutes, top }).into_response())
    };
    answer().unwrap_or_else(IntoResponse::into_response)
}
