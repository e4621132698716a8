//! The decision API, through the router (no socket), with a manual clock.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;
use weir::Engine;
use weir::Reloadable;
use weir::api_router as router;
use weir::{Config, StoreConfig};
use weir_core::ManualClock;
use weir_store::{MemoryStore, MemoryStoreConfig};

const CONFIG: &str = "
rules:
  - name: api
    algorithm: token_bucket
    limit: 10
    period: 1m
  - name: daily
    algorithm: fixed_window
    limit: 25
    period: 1d
  - name: queue
    algorithm: leaky_bucket
    limit: 2
    period: 1s
    burst: 3
";

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

fn service(max_keys: Option<usize>) -> (Arc<ManualClock>, Router) {
    let config = Config::parse(CONFIG, Path::new("test.yaml")).unwrap();
    let memory = match (config.store.clone(), max_keys) {
        (_, Some(max_keys)) => MemoryStoreConfig { max_keys },
        (StoreConfig::Memory(memory), None) => memory,
        (other, None) => panic!("unexpected store {other:?}"),
    };
    let clock = Arc::new(ManualClock::new(MIDNIGHT));
    let store = Arc::new(MemoryStore::new(memory, clock.clone()));
    (
        clock.clone(),
        router(Reloadable::new(Engine::new(&config.engine, store, clock))),
    )
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

async fn send(app: &Router, method: &str, path: &str, body: impl Into<Body>) -> Reply {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
    }
}

async fn check(app: &Router, body: Value) -> Reply {
    send(app, "POST", "/v1/check", body.to_string()).await
}

#[tokio::test]
async fn an_allowed_check_answers_200_with_the_decision_and_ratelimit_fields() {
    let (_, app) = service(None);
    let reply = check(&app, json!({"rule": "api", "key": "user-42"})).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.body,
        json!({"allowed": true, "rule": "api", "limit": 10, "remaining": 9,
               "reset_after_ms": 6000, "retry_after_ms": null, "delay_ms": 0})
    );
    assert_eq!(reply.header("ratelimit-policy"), Some("\"api\";q=10;w=60"));
    assert_eq!(reply.header("ratelimit"), Some("\"api\";r=9;t=6"));
    assert_eq!(reply.header("retry-after"), None);
    assert_eq!(reply.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn a_denied_check_answers_429_with_retry_after_rounded_up() {
    let (clock, app) = service(None);
    for _ in 0..10 {
        assert_eq!(
            check(&app, json!({"rule": "api", "key": "k"})).await.status,
            StatusCode::OK
        );
    }
    clock.advance(Duration::from_nanos(300_000_400));
    let reply = check(&app, json!({"rule": "api", "key": "k"})).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        reply.body,
        json!({"allowed": false, "rule": "api", "limit": 10, "remaining": 0,
               "reset_after_ms": 59_700, "retry_after_ms": 5_700, "delay_ms": 0})
    );
    assert_eq!(reply.header("retry-after"), Some("6"));
    assert_eq!(reply.header("ratelimit"), Some("\"api\";r=0;t=60"));
    // Retrying after retry_after_ms works.
    clock.advance(Duration::from_millis(5_700));
    assert_eq!(
        check(&app, json!({"rule": "api", "key": "k"})).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn ratelimit_fields_are_valid_structured_field_lists() {
    let (_, app) = service(None);
    for body in [
        json!({"rule": "api", "key": "k"}),
        json!({"rule": "api", "key": "k", "cost": 10}),
    ] {
        let reply = check(&app, body).await;
        for name in ["ratelimit-policy", "ratelimit"] {
            let value = reply.header(name).unwrap();
            let list: sfv::List = sfv::Parser::new(value).parse().unwrap();
            assert_eq!(list.len(), 1, "{name}: {value}");
        }
    }
}

#[tokio::test]
async fn a_cost_that_never_fits_is_429_without_a_retry_time() {
    let (_, app) = service(None);
    let reply = check(&app, json!({"rule": "api", "key": "k", "cost": 11})).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.body["retry_after_ms"], Value::Null);
    assert_eq!(reply.body["remaining"], 10);
    assert_eq!(reply.header("retry-after"), None, "retrying can never work");
}

#[tokio::test]
async fn cost_is_optional_and_zero_peeks() {
    let (_, app) = service(None);
    check(&app, json!({"rule": "daily", "key": "k", "cost": 5})).await;
    let peek = check(&app, json!({"rule": "daily", "key": "k", "cost": 0})).await;
    assert_eq!(
        (peek.status, peek.body["remaining"].clone()),
        (StatusCode::OK, json!(20))
    );
    let one = check(&app, json!({"rule": "daily", "key": "k"})).await;
    assert_eq!(one.body["remaining"], 19);
    // A fixed day window resets at midnight UTC.
    assert_eq!(one.body["reset_after_ms"], 86_400_000);
}

#[tokio::test]
async fn a_peek_at_an_exhausted_key_is_allowed_and_says_nothing_remains() {
    let (_, app) = service(None);
    check(&app, json!({"rule": "daily", "key": "k", "cost": 25})).await;
    // The peek asked for nothing, so it is allowed: `remaining` is what to read.
    let peek = check(&app, json!({"rule": "daily", "key": "k", "cost": 0})).await;
    assert_eq!(
        (
            peek.status,
            peek.body["allowed"].clone(),
            peek.body["remaining"].clone()
        ),
        (StatusCode::OK, json!(true), json!(0))
    );
    // `remaining` 0: a request of cost 1 now is denied.
    let one = check(&app, json!({"rule": "daily", "key": "k"})).await;
    assert_eq!(
        (one.status, one.body["allowed"].clone()),
        (StatusCode::TOO_MANY_REQUESTS, json!(false))
    );
}

#[tokio::test]
async fn the_leaky_bucket_reports_its_delay() {
    let (_, app) = service(None);
    let delays: Vec<Value> = futures_delays(&app).await;
    assert_eq!(delays, [json!(0), json!(500), json!(1000)]);
    let full = check(&app, json!({"rule": "queue", "key": "k"})).await;
    assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.body["retry_after_ms"], 500);
}

async fn futures_delays(app: &Router) -> Vec<Value> {
    let mut delays = Vec::new();
    for _ in 0..3 {
        delays
            .push(check(app, json!({"rule": "queue", "key": "k"})).await.body["delay_ms"].clone());
    }
    delays
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_is_allowed_under_concurrent_requests() {
    let (_, app) = service(None);
    let requests: Vec<_> = (0..64)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                check(&app, json!({"rule": "daily", "key": "shared"}))
                    .await
                    .status
            })
        })
        .collect();
    let mut ok = 0;
    for request in requests {
        match request.await.unwrap() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(ok, 25);
}

#[tokio::test]
async fn bad_input_is_a_problem_json_4xx() {
    let (_, app) = service(None);
    let long_key = "k".repeat(1025);
    let cases: Vec<(Body, StatusCode, &str)> = vec![
        (
            Body::from("{not json"),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (Body::from(""), StatusCode::BAD_REQUEST, "invalid-request"),
        (
            Body::from(r#"{"rule": "api"}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"key": "k"}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": "k", "cost": -1}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": "k", "cost": 1.5}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": "k", "cost": "1"}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": "k", "cost": 1e30}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": "k", "costs": 5}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": ""}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "api", "key": 42}"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(json!({"rule": "api", "key": long_key}).to_string()),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(b"{\"rule\": \"api\", \"key\": \"\xff\xfe\"}".to_vec()),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"[1, 2]"#),
            StatusCode::BAD_REQUEST,
            "invalid-request",
        ),
        (
            Body::from(r#"{"rule": "nope", "key": "k"}"#),
            StatusCode::NOT_FOUND,
            "unknown-rule",
        ),
        (
            Body::from(r#"{"rule": "api:x", "key": "k"}"#),
            StatusCode::NOT_FOUND,
            "unknown-rule",
        ),
        (
            Body::from(vec![b' '; 17 * 1024]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
        ),
    ];
    for (body, status, kind) in cases {
        let reply = send(&app, "POST", "/v1/check", body).await;
        assert_eq!(reply.status, status, "{:?}", reply.body);
        assert_eq!(
            reply.header("content-type"),
            Some("application/problem+json")
        );
        assert_eq!(reply.body["type"], format!("/problems/{kind}"));
        assert_eq!(reply.body["status"], status.as_u16());
        assert!(reply.body["title"].is_string() && reply.body["detail"].is_string());
    }
    // Nothing bad input did was counted.
    assert_eq!(
        check(&app, json!({"rule": "api", "key": "k", "cost": 0}))
            .await
            .body["remaining"],
        10
    );
}

#[tokio::test]
async fn unknown_paths_and_methods_are_problem_json() {
    let (_, app) = service(None);
    let reply = send(&app, "GET", "/v1/check", Body::empty()).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.body["type"], "/problems/method-not-allowed");
    let reply = send(&app, "GET", "/nowhere", Body::empty()).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.body["type"], "/problems/not-found");
    let health = send(&app, "GET", "/healthz", Body::empty()).await;
    assert_eq!(health.status, StatusCode::OK);
}

#[tokio::test]
async fn a_full_store_is_a_503_not_a_denial() {
    let (_, app) = service(Some(2));
    for key in ["a", "b"] {
        assert_eq!(
            check(&app, json!({"rule": "api", "key": key})).await.status,
            StatusCode::OK
        );
    }
    let reply = check(&app, json!({"rule": "api", "key": "c"})).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.body["type"], "/problems/store-unavailable");
    assert_eq!(reply.header("retry-after"), Some("1"));
    // Keys already held keep working.
    assert_eq!(
        check(&app, json!({"rule": "api", "key": "a"})).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn identities_cannot_reach_another_rules_state() {
    let (_, app) = service(None);
    // The key "api:x" under "daily" is the store key "daily:api:x", never "api:x".
    for _ in 0..10 {
        check(&app, json!({"rule": "daily", "key": "api:x"})).await;
    }
    assert_eq!(
        check(&app, json!({"rule": "api", "key": "x"})).await.body["remaining"],
        9
    );
}

/// A body announced and not sent (a part of it, then nothing): each endpoint that
/// reads one answers 408 once it has waited 10 s, and does not hold the request, nor
/// its connection, longer.
#[tokio::test(start_paused = true)]
async fn a_body_that_stops_coming_is_answered_408_after_ten_seconds() {
    use futures_util::StreamExt;
    let (_, app) = service(None);
    for path in ["/v1/check", "/v1/decide", "/v1/settle"] {
        let part: Result<&[u8], std::io::Error> = Ok(b"{\"rule\": ");
        let stalled = futures_util::stream::iter([part]).chain(futures_util::stream::pending());
        let started = tokio::time::Instant::now();
        let reply = tokio::time::timeout(
            Duration::from_secs(60),
            send(&app, "POST", path, Body::from_stream(stalled)),
        )
        .await
        .unwrap_or_else(|_| panic!("{path}: no answer in a minute"));
        assert_eq!(reply.status, StatusCode::REQUEST_TIMEOUT, "{path}");
        assert_eq!(reply.body["type"], "/problems/body-timeout", "{path}");
        assert_eq!(started.elapsed(), Duration::from_secs(10), "{path}");
    }
    // A body in with its head is read at once, without the timer.
    let reply = check(&app, json!({"rule": "api", "key": "on-time"})).await;
    assert_eq!(reply.status, StatusCode::OK);
}
