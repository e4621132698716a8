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

use crate::edge::{self, Answer, Problem, ceil_millis};
use crate::engine::{Engine, RuleDecision, SettlementId, Verdict};
use crate::reloadable::Reloadable;
use crate::request::canonical_ip;

/// The largest `/v1/decide` request read, in bytes (the facts, a body included).
pub(crate) const MAX_DECIDE_BYTES: usize = 256 * 1024;

/// One header's value, or several for a header sent more than once.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideRequest {
    method: String,
    path: String,
    host: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, HeaderValues>,
    client_ip: IpAddr,
    body: Option<String>,
}

#[derive(Debug, Serialize)]
struct QuotaJson<'a> {
    rule: &'a str,
    limit: u64,
    remaining: u64,
    reset_after_ms: u64,
}

#[derive(Debug, Serialize)]
struct DecideResponse<'a> {
    allowed: bool,
    quotas: Vec<QuotaJson<'a>>,
    violated: Vec<&'a str>,
    retry_after_ms: Option<u64>,
    shadow_denied: Vec<&'a str>,
    settlement: Option<String>,
    /// The header fields to add to the answer sent to the client.
    headers: BTreeMap<String, String>,
}

pub(super) async fn decide(State(engine): State<Reloadable<Engine>>, body: Body) -> Response {
    let engine = engine.current();
    match read(body).await {
        Ok(request) => answer(&engine, request).await,
        Err(problem) => problem.into_response(),
    }
}

async fn read(body: Body) -> Result<DecideRequest, Problem> {
    let bytes = axum::body::to_bytes(body, MAX_DECIDE_BYTES)
        .await
        .map_err(|_| Problem::body_too_large(MAX_DECIDE_BYTES))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Problem::invalid_request(format!("invalid decide request: {e}")))
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettleRequest {
    settlement: String,
    status: u16,
    /// The request's actual cost, for the rules with `cost_from` (the others keep
    /// their cost).
    #[serde(default)]
    cost: Option<u64>,
}

pub(super) async fn settle(State(engine): State<Reloadable<Engine>>, body: Body) -> Response {
    let engine = engine.current();
    let request: SettleRequest = match axum::body::to_bytes(body, 1024).await {
        Err(_) => return Problem::body_too_large(1024).into_response(),
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(request) => request,
            Err(e) => {
                return Problem::invalid_request(format!("invalid settle request: {e}"))
                    .into_response();
            }
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
