//! `POST /v1/check`: the decision API.
//!
//! Request: `{"rule": "api", "key": "user-42", "cost": 1}` (`cost` optional, default 1).
//! Answer: 200 when allowed, 429 when denied, both with the decision as JSON and the
//! RateLimit header fields; a 429 with a retry time carries `Retry-After` too. Bad
//! input is a problem+json 400, an unknown rule 404, an oversized body 413, and a store
//! that cannot decide 503 (never a denial).

use std::borrow::Cow;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use weir_core::Decision;

use crate::edge::contract::{
    BodyTimeout, BodyTooLarge, InvalidRequest, StoreUnavailable, UnknownRule,
};
use crate::edge::{Problem, Quota, ceil_millis, insert_ratelimit, json};
use crate::engine::{Engine, NamedPolicy};
use crate::metrics::Door;
use crate::reloadable::Reloadable;

/// The largest request body read, in bytes.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024;

/// The longest key accepted, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// One check: spend `cost` units of `key`'s budget under `rule`. The strings are
/// borrowed from the body unless JSON escapes in them must be undone: no copy per check.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckRequest<'b> {
    /// The rule's name, as in the configuration.
    #[schema(example = "api", pattern = "^[A-Za-z0-9_.-]{1,64}$")]
    #[serde(borrow)]
    rule: Cow<'b, str>,
    /// Whose budget: any identity of at most 1024 bytes, compared byte for byte.
    #[schema(example = "user-42", min_length = 1, max_length = 1024)]
    #[serde(borrow)]
    key: Cow<'b, str>,
    /// The units this request spends (default 1); 0 reads the state without spending.
    #[serde(default = "one")]
    #[schema(default = 1, minimum = 0)]
    cost: u64,
}

/// The decision of a check (the body of its 200 and 429 answers). Written by hand in
/// [`json`] for speed; this type is its contract, and a test holds the two together.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "the contract of `json`: only its test makes one")]
pub(crate) struct CheckAnswer {
    /// Whether the request may go on.
    allowed: bool,
    /// The rule that decided.
    rule: String,
    /// The rule's limit (this key's, when a plan sets it).
    limit: u64,
    /// What remains of the budget after this check.
    remaining: u64,
    /// Milliseconds until the budget is full again (rounded up).
    reset_after_ms: u64,
    /// When denied, the milliseconds to wait before the same request would be allowed;
    /// `null` when allowed, or when it never will be (a cost above the limit).
    retry_after_ms: Option<u64>,
    /// The milliseconds to hold the request before going on (`delay` rules; else 0).
    delay_ms: u64,
}

fn one() -> u64 {
    1
}

/// Spends from a key's budget under a rule and answers whether the request may go on.
#[utoipa::path(
    post,
    path = "/v1/check",
    tag = "decision",
    request_body = CheckRequest,
    responses(
        (status = 200, description = "Allowed; the RateLimit fields describe the rule's quota.", body = CheckAnswer,
            headers(
                ("RateLimit-Policy" = String, description = "The rule's quota: `\"rule\";q=<limit>;w=<seconds>`"),
                ("RateLimit" = String, description = "What remains: `\"rule\";r=<remaining>;t=<seconds to full>`"),
            )),
        (status = 429, description = "Denied; `Retry-After` and `Retry-After-Ms` say when to try again (absent when the cost is above the limit).", body = CheckAnswer,
            headers(
                ("RateLimit-Policy" = String),
                ("RateLimit" = String),
                ("Retry-After" = u64, description = "Seconds to wait (rounded up)"),
                ("Retry-After-Ms" = u64, description = "Milliseconds to wait (rounded up)"),
            )),
        (status = 400, response = InvalidRequest),
        (status = 404, response = UnknownRule),
        (status = 408, response = BodyTimeout),
        (status = 413, response = BodyTooLarge),
        (status = 503, response = StoreUnavailable),
    )
)]
pub(super) async fn check(State(engine): State<Reloadable<Engine>>, body: Body) -> Response {
    // The engine as configured now; a reload while this request runs does not affect it.
    let engine = engine.current();
    // Awaits in this one function, the rest in plain ones: a nested future is copied
    // whole when it is made, on every request.
    let response = 'answer: {
        let bytes = match super::read_body(body, MAX_BODY_BYTES).await {
            Ok(bytes) => bytes,
            Err(problem) => break 'answer problem.into_response(),
        };
        let (rule, request) = match read(&engine, &bytes) {
            Ok(read) => read,
            Err(problem) => break 'answer problem.into_response(),
        };
        match engine.check(rule, &request.key, request.cost).await {
            Ok(decision) => answer(rule, &decision),
            Err(error) => {
                tracing::warn!(rule = %rule.name, %error, "the store could not decide");
                Problem::store_unavailable().into_response()
            }
        }
    };
    engine
        .metrics()
        .door_answered(Door::Check, response.status().as_u16());
    response
}

/// The check asked for, and its rule.
fn read<'e, 'b>(
    engine: &'e Engine,
    bytes: &'b [u8],
) -> Result<(&'e NamedPolicy, CheckRequest<'b>), Problem> {
    let request: CheckRequest<'_> =
        json::read(bytes, "a check", r#"{"rule": "api", "key": "user-42"}"#)?;
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
    if rule.in_flight {
        return Err(Problem::invalid_request(format!(
            "rule `{}` limits requests in flight (`algorithm: concurrency`): a check holds no slot; ask /v1/decide, whose settlement releases it",
            rule.name
        )));
    }
    Ok((rule, request))
}

/// The decision as JSON, with the RateLimit fields.
fn answer(rule: &NamedPolicy, decision: &Decision) -> Response {
    let status = if decision.allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut response = Response::new(Body::from(json(&rule.name, decision)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let quota = Quota {
        name: &rule.name,
        policy: &rule.policy,
        decision,
        in_flight: false,
    };
    insert_ratelimit(response.headers_mut(), &[quota]);
    response
}

/// The answer's body: `{"allowed":true,"rule":"api","limit":100,"remaining":99,
/// "reset_after_ms":600,"retry_after_ms":null,"delay_ms":0}`. Written piece by piece,
/// as serde_json's writer costs several times more on every answer: every value is a
/// number, a boolean, or a rule name, whose characters need no escaping
/// (`config::MAX_RULE_NAME`).
fn json(rule: &str, decision: &Decision) -> Vec<u8> {
    let mut digits = itoa::Buffer::new();
    let mut out = Vec::with_capacity(128 + rule.len());
    out.extend_from_slice(if decision.allowed {
        b"{\"allowed\":true,\"rule\":\""
    } else {
        b"{\"allowed\":false,\"rule\":\""
    });
    out.extend_from_slice(rule.as_bytes());
    out.extend_from_slice(b"\",\"limit\":");
    out.extend_from_slice(digits.format(decision.limit).as_bytes());
    out.extend_from_slice(b",\"remaining\":");
    out.extend_from_slice(digits.format(decision.remaining).as_bytes());
    out.extend_from_slice(b",\"reset_after_ms\":");
    out.extend_from_slice(digits.format(ceil_millis(decision.reset_after)).as_bytes());
    out.extend_from_slice(b",\"retry_after_ms\":");
    match decision.retry_after {
        Some(retry) => out.extend_from_slice(digits.format(ceil_millis(retry)).as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"delay_ms\":");
    out.extend_from_slice(digits.format(ceil_millis(decision.delay)).as_bytes());
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_body_is_the_json_of_the_decision() {
        let cases = [
            Decision {
                allowed: true,
                limit: 100,
                remaining: 99,
                reset_after: Duration::from_micros(600_001),
                retry_after: None,
                delay: Duration::ZERO,
            },
            Decision {
                allowed: false,
                limit: u64::MAX,
                remaining: 0,
                reset_after: Duration::from_secs(86_400),
                retry_after: Some(Duration::from_nanos(1)),
                delay: Duration::from_millis(250),
            },
        ];
        let expected = [
            serde_json::json!({"allowed": true, "rule": "api-v2.search_1", "limit": 100,
                "remaining": 99, "reset_after_ms": 601, "retry_after_ms": null, "delay_ms": 0}),
            serde_json::json!({"allowed": false, "rule": "api-v2.search_1", "limit": u64::MAX,
                "remaining": 0, "reset_after_ms": 86_400_000, "retry_after_ms": 1,
                "delay_ms": 250}),
        ];
        for (decision, expected) in cases.iter().zip(expected) {
            let body = json("api-v2.search_1", decision);
            let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(parsed, expected);
            // ... and it is what the OpenAPI document says it is.
            let _: CheckAnswer = serde_json::from_slice(&body).unwrap();
        }
    }
}
