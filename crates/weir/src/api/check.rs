//! `POST /v1/check`: the decision API.
//!
//! Request: `{"rule": "api", "key": "user-42", "cost": 1}` (`cost` optional, default 1).
//! Answer: 200 when allowed, 429 when denied, both with the decision as JSON and the
//! RateLimit header fields; a 429 with a retry time carries `Retry-After` too. Bad
//! input is a problem+json 400, an unknown rule 404, an oversized body 413, and a store
//! that cannot decide 503 (never a denial).

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use weir_core::Decision;

use crate::config::RuleConfig;
use crate::edge::Problem;
use crate::edge::ratelimit::{self, Quota, ceil_millis};
use crate::engine::Engine;
use crate::server::Shared;

/// The largest request body read, in bytes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckRequest {
    rule: String,
    key: String,
    #[serde(default = "one")]
    cost: u64,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Serialize)]
struct CheckResponse<'a> {
    allowed: bool,
    rule: &'a str,
    limit: u64,
    remaining: u64,
    reset_after_ms: u64,
    retry_after_ms: Option<u64>,
    delay_ms: u64,
}

pub(super) async fn check(State(engine): State<Shared<Engine>>, body: Body) -> Response {
    // The engine as configured now; a reload while this request runs does not affect it.
    let engine = engine.load_full();
    // Awaits in this one function, the rest in plain ones: a nested future is copied
    // whole when it is made, on every request.
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return Problem::body_too_large(MAX_BODY_BYTES).into_response();
    };
    let (rule, request) = match read(&engine, &bytes) {
        Ok(read) => read,
        Err(problem) => return problem.into_response(),
    };
    match engine.check(rule, &request.key, request.cost).await {
        Ok(decision) => answer(rule, &decision),
        Err(error) => {
            tracing::warn!(rule = %rule.name, %error, "the store could not decide");
            Problem::store_unavailable(error.to_string()).into_response()
        }
    }
}

/// The check asked for, and its rule.
fn read<'e>(engine: &'e Engine, bytes: &[u8]) -> Result<(&'e RuleConfig, CheckRequest), Problem> {
    let request: CheckRequest = serde_json::from_slice(bytes)
        .map_err(|e| Problem::invalid_request(format!("invalid check request: {e}")))?;
    if request.key.is_empty() {
        return Err(Problem::invalid_request("`key` must not be empty"));
    }
    if request.key.len() > MAX_KEY_BYTES {
        return Err(Problem::invalid_request(format!(
            "`key` must be at most {MAX_KEY_BYTES} bytes, got {}",
            request.key.len()
        )));
    }
    let rule = engine
        .rule(&request.rule)
        .ok_or_else(|| Problem::unknown_rule(&request.rule))?;
    Ok((rule, request))
}

/// The decision as JSON, with the RateLimit fields.
fn answer(rule: &RuleConfig, decision: &Decision) -> Response {
    let status = if decision.allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let body = CheckResponse {
        allowed: decision.allowed,
        rule: &rule.name,
        limit: decision.limit,
        remaining: decision.remaining,
        reset_after_ms: ceil_millis(decision.reset_after),
        retry_after_ms: decision.retry_after.map(ceil_millis),
        delay_ms: ceil_millis(decision.delay),
    };
    let mut response = (status, Json(body)).into_response();
    let quota = Quota {
        name: &rule.name,
        policy: &rule.policy,
        decision,
    };
    ratelimit::insert(response.headers_mut(), &[quota]);
    response
}
