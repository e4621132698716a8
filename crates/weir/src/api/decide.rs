//! `POST /v1/decide` and `POST /v1/settle`: the gateway's decision for services that
//! receive requests themselves (the shape of Envoy's external authorization).
//!
//! A service sends a request's facts (method, path, host, headers, client IP, body)
//! and gets exactly the verdict the gateway would reach for that request, with the
//! header fields to send: 200 (go on), 429 (answer too many), 503 (the limiter cannot
//! decide; answer 503). When a rule that applies is counted by outcome (failed
//! logins), an allowed verdict carries a `settlement` id: report the app's status with
//! `POST /v1/settle` so the reservation is kept or given back. So does a rule whose
//! cost is known only at the end (`cost_from`): report the actual `cost` with the
//! status, and the estimate reserved is trued up to it. A settlement not reported
//! within `SETTLE_WITHIN` (60 s) stays counted.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::edge::contract::{BodyTimeout, BodyTooLarge, InvalidRequest, StoreUnavailable};
use crate::edge::{self, Answer, Problem, ProblemJson, ceil_millis, json};
use crate::engine::{Engine, RuleDecision, SettlementId, Verdict};
use crate::metrics::Door;
use crate::reloadable::Reloadable;
use crate::request::canonical_ip;

/// The largest `/v1/decide` request read, in bytes (the facts, a body included).
pub(crate) const MAX_DECIDE_BYTES: usize = 256 * 1024;

/// One header's value, or several for a header sent more than once.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

/// A request a service received, to be decided as the gateway would decide it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideRequest {
    /// The request's method (an HTTP token).
    #[schema(example = "POST", pattern = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
    method: String,
    /// Its target in origin form (path and query), as received.
    #[schema(example = "/v1/login?next=%2F", pattern = "^/")]
    path: String,
    /// Its host (else the `host` header among `headers`).
    #[schema(example = "api.example.com")]
    host: Option<String>,
    /// Its header fields, by name: one value, or a list for a field sent more than once.
    #[serde(default, deserialize_with = "once_each")]
    headers: BTreeMap<String, HeaderValues>,
    /// The address of the client that sent it (IPv4 or IPv6).
    #[schema(schema_with = ip_address, example = "203.0.113.7")]
    client_ip: IpAddr,
    /// Its body as text, for rules keyed on a body field or plans found by one.
    body: Option<String>,
}

/// The `headers` object, each name once: JSON would let a name stand twice and keep
/// the last, so that a caller's second `x-api-key` would be read where the gateway
/// refuses a key sent twice. Several values of a header are given as a list.
fn once_each<'de, D>(deserializer: D) -> Result<BTreeMap<String, HeaderValues>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Once;
    impl<'de> serde::de::Visitor<'de> for Once {
        type Value = BTreeMap<String, HeaderValues>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of header names and values")
        }

        fn visit_map<M: serde::de::MapAccess<'de>>(
            self,
            mut map: M,
        ) -> Result<Self::Value, M::Error> {
            let mut headers = BTreeMap::new();
            while let Some((name, values)) = map.next_entry::<String, HeaderValues>()? {
                if headers.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "header `{}` is given twice: give its values as a list",
                        name.escape_debug()
                    )));
                }
                headers.insert(name, values);
            }
            Ok(headers)
        }
    }
    deserializer.deserialize_map(Once)
}

/// An IPv4 or IPv6 address, as the schema of `client_ip`.
fn ip_address() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    let address = |format| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(format)))
    };
    OneOfBuilder::new()
        .item(address(KnownFormat::Ipv4))
        .item(address(KnownFormat::Ipv6))
        .build()
        .into()
}

/// One rule's quota after the decision.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct QuotaJson<'a> {
    /// The rule.
    rule: &'a str,
    /// Its limit for this caller.
    limit: u64,
    /// What remains.
    remaining: u64,
    /// Milliseconds until the budget is full again (rounded up).
    reset_after_ms: u64,
}

/// The verdict on a request.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DecideResponse<'a> {
    /// Whether the request may go on.
    allowed: bool,
    /// The quota of every rule that applied.
    quotas: Vec<QuotaJson<'a>>,
    /// The rules that denied it.
    violated: Vec<&'a str>,
    /// When denied, milliseconds to wait before retrying (`null`: never, at this cost).
    retry_after_ms: Option<u64>,
    /// Shadow rules that would have denied it (they only report).
    shadow_denied: Vec<&'a str>,
    /// When a rule is counted by outcome or its cost is known at the end: the id to
    /// report the outcome with (`POST /v1/settle`, within 60 s).
    settlement: Option<String>,
    /// The header fields to add to the answer sent to the client.
    headers: BTreeMap<String, String>,
}

/// Decides a request a service received exactly as the gateway would, and says which
/// header fields to send its client.
#[utoipa::path(
    post,
    path = "/v1/decide",
    tag = "decision",
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Allowed: go on. The same fields are on this answer and in `headers`.", body = DecideResponse),
        (status = 429, description = "Denied: answer the client 429 with `headers`.", body = DecideResponse),
        (status = 400, response = InvalidRequest),
        (status = 408, response = BodyTimeout),
        (status = 413, response = BodyTooLarge),
        (status = 415, description = "A rule keys on a body field this body does not give (not JSON or a form).", body = ProblemJson, content_type = "application/problem+json"),
        (status = 421, description = "No rule names this host, and the configuration refuses unknown hosts.", body = ProblemJson, content_type = "application/problem+json"),
        (status = 503, response = StoreUnavailable),
    )
)]
pub(super) async fn decide(State(engine): State<Reloadable<Engine>>, body: Body) -> Response {
    let engine = engine.current();
    let response = match read(body).await {
        Ok(request) => answer(&engine, request).await,
        Err(problem) => problem.into_response(),
    };
    engine
        .metrics()
        .door_answered(Door::Decide, response.status().as_u16());
    response
}

async fn read(body: Body) -> Result<DecideRequest, Problem> {
    let bytes = super::read_body(body, MAX_DECIDE_BYTES).await?;
    json::read(
        &bytes,
        "a decide request",
        r#"{"method": "GET", "path": "/", "client_ip": "203.0.113.7"}"#,
    )
}

async fn answer(engine: &Arc<Engine>, request: DecideRequest) -> Response {
    let Ok(method) = Method::from_bytes(request.method.as_bytes()) else {
        return Problem::invalid_request("`method` is not an HTTP method").into_response();
    };
    // The path a request was sent to (origin form): `""` or `*` names no resource a
    // rule could match, and is not what the service received.
    if !request.path.starts_with('/') {
        return Problem::invalid_request("`path` must start with `/`").into_response();
    }
    let mut headers = match header_map(&request.headers) {
        Ok(headers) => headers,
        Err(problem) => return problem.into_response(),
    };
    if let Some(host) = &request.host {
        match HeaderValue::try_from(host.as_str()) {
            Ok(host) => {
                headers.insert(header::HOST, host);
            }
            Err(_) => return Problem::invalid_request("`host` is not a host").into_response(),
        }
    }
    // Read as the gateway reads the request it receives.
    let (head, routed) = match engine.read(&method, &Uri::default(), &request.path, &headers) {
        Ok(read) => read,
        Err(refused) => return edge::refused(&refused),
    };
    let body = request.body.as_deref().map(str::as_bytes);
    // The caller is a service trusted with the admin listener: what it reports (a plan
    // header set by its authentication layer) is believed.
    let facts = head.facts(&headers, canonical_ip(request.client_ip), true, body);
    let legacy = engine.legacy_headers();
    let verdict = engine.decide(routed, &facts).await;
    // A denial is answered as JSON here (what the service tells its client is its
    // own); refusals and 503s as every door answers them.
    if let Verdict::Denied(denied) = &verdict {
        let mut fields = HeaderMap::new();
        edge::add_quota_headers(&mut fields, &denied.quotas, legacy);
        return respond(
            StatusCode::TOO_MANY_REQUESTS,
            fields,
            DecideResponse {
                allowed: false,
                quotas: quotas(&denied.quotas),
                violated: denied.violated().collect(),
                retry_after_ms: denied.retry_after().map(ceil_millis),
                shadow_denied: Vec::new(),
                settlement: None,
                headers: BTreeMap::new(),
            },
        );
    }
    let allowed = match edge::answer(verdict, legacy) {
        Answer::Proceed(allowed) => allowed,
        Answer::Stop(answer) => return answer,
    };
    let mut fields = HeaderMap::new();
    edge::add_allowed_headers(&mut fields, &allowed, legacy);
    let settlement = allowed.settlement.map(|s| engine.park(s).to_string());
    respond(
        StatusCode::OK,
        fields,
        DecideResponse {
            allowed: true,
            quotas: quotas(&allowed.quotas),
            violated: Vec::new(),
            retry_after_ms: None,
            shadow_denied: allowed.shadow_denied,
            settlement,
            headers: BTreeMap::new(),
        },
    )
}

/// The verdict as JSON, its header fields both on the answer and listed in the body.
fn respond(status: StatusCode, fields: HeaderMap, mut body: DecideResponse<'_>) -> Response {
    body.headers = fields
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect();
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().extend(fields);
    response
}

fn quotas<'a>(quotas: &'a [RuleDecision<'a>]) -> Vec<QuotaJson<'a>> {
    quotas
        .iter()
        .map(|q| QuotaJson {
            rule: q.name,
            limit: q.policy.limit(),
            remaining: q.decision.remaining,
            reset_after_ms: ceil_millis(q.decision.reset_after),
        })
        .collect()
}

fn header_map(headers: &BTreeMap<String, HeaderValues>) -> Result<HeaderMap, Problem> {
    let mut map = HeaderMap::new();
    for (name, values) in headers {
        let name = HeaderName::try_from(name.as_str()).map_err(|_| {
            Problem::invalid_request(format!("`{}` is not a header name", name.escape_debug()))
        })?;
        let values = match values {
            HeaderValues::One(value) => std::slice::from_ref(value),
            HeaderValues::Many(values) => values.as_slice(),
        };
        for value in values {
            let value = HeaderValue::try_from(value.as_str()).map_err(|_| {
                Problem::invalid_request(format!("the value of header `{name}` is not valid"))
            })?;
            map.append(name.clone(), value);
        }
    }
    Ok(map)
}

/// The outcome of a request decided with a settlement.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettleRequest {
    /// The id `/v1/decide` (or `Weir-Reservation`) gave.
    #[schema(pattern = "^[0-9a-fA-F]{32}$")]
    settlement: String,
    /// The status the app answered: what outcome-counted rules count by.
    #[schema(minimum = 100, maximum = 599)]
    status: u16,
    /// The request's actual cost, for the rules with `cost_from` (the others keep
    /// their cost).
    #[serde(default)]
    cost: Option<u64>,
}

/// Reports the outcome of a request decided with a settlement: its reservations are kept
/// or given back, and a cost known only at the end is trued up.
#[utoipa::path(
    post,
    path = "/v1/settle",
    tag = "decision",
    request_body = SettleRequest,
    responses(
        (status = 204, description = "Settled."),
        (status = 400, response = InvalidRequest),
        (status = 404, description = "No settlement waits under this id (settled already, expired, or made before a reload); its reservations stay counted.", body = ProblemJson, content_type = "application/problem+json"),
        (status = 408, response = BodyTimeout),
        (status = 413, response = BodyTooLarge),
    )
)]
pub(super) async fn settle(State(engine): State<Reloadable<Engine>>, body: Body) -> Response {
    let engine = engine.current();
    let request: SettleRequest = match super::read_body(body, 1024).await {
        Err(problem) => return problem.into_response(),
        Ok(bytes) => match json::read(
            &bytes,
            "a settlement",
            r#"{"settlement": "<the id /v1/decide gave>", "status": 200}"#,
        ) {
            Ok(request) => request,
            Err(problem) => return problem.into_response(),
        },
    };
    if !(100..=599).contains(&request.status) {
        return Problem::invalid_request("`status` must be an HTTP status (100 to 599)")
            .into_response();
    }
    let Ok(id) = request.settlement.parse::<SettlementId>() else {
        return Problem::invalid_request("`settlement` is not a settlement id").into_response();
    };
    match engine.unpark(id) {
        Some(settlement) => {
            settlement
                .settle_costs(request.status, |_| request.cost)
                .await;
            StatusCode::NO_CONTENT.into_response()
        }
        None => Problem::unknown_settlement().into_response(),
    }
}
