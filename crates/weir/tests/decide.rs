//! `POST /v1/decide` and `POST /v1/settle` in process: the gateway's verdict for a
//! request's facts, shared counts with the gateway itself, settlements that are used
//! once and expire into counted attempts, and bad input answered with a 400.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::login_app::App;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use weir::Config;
use weir::Gateway;
use weir::{Handler, Instance, Reloadable};
use weir::{SETTLE_WITHIN, api_router as router};
use weir_core::ManualClock;
use weir_store::{MemoryStore, MemoryStoreConfig};

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

const CONFIG: &str = "\
identities:
  email: { body_field: email, normalize: email }
response_headers: { legacy: true }
rules:
  - name: login
    match: { methods: [POST], path: /login }
    key: [email]
    algorithm: sliding_log
    limit: 3
    period: 15m
    count_statuses: [401]
  - name: search
    match: { methods: [GET], path_prefix: /search }
    algorithm: gcra
    limit: 2
    period: 1m
";

struct Weir {
    api: Router,
    gateway: Option<Reloadable<Gateway>>,
    clock: Arc<ManualClock>,
}

impl Weir {
    fn start(upstream: Option<&App>) -> Self {
        let text = match upstream {
            Some(app) => format!("upstream:\n  url: http://{}\n{CONFIG}", app.addr),
            None => CONFIG.to_owned(),
        };
        let config = Config::parse(&text, Path::new("decide.yaml")).unwrap();
        let clock = Arc::new(ManualClock::new(MIDNIGHT));
        let store = Arc::new(MemoryStore::new(
            MemoryStoreConfig::default(),
            clock.clone(),
        ));
        let service = Instance::with_store(&config, store, clock.clone());
        Self {
            api: router(service.engine.clone()),
            gateway: service.gateway.clone(),
            clock,
        }
    }

    async fn post(&self, path: &str, body: &Value) -> (StatusCode, axum::http::HeaderMap, Value) {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = self.api.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (parts.status, parts.headers, json)
    }

    /// The facts of a login attempt by `email`.
    fn login(email: &str) -> Value {
        json!({
            "method": "POST",
            "path": "/login",
            "host": "app.test",
            "headers": {"content-type": "application/json"},
            "client_ip": "203.0.113.7",
            "body": json!({"email": email, "password": "guess"}).to_string(),
        })
    }

    /// A failed attempt decided with `/v1/decide` and settled with a 401.
    async fn fail_via_decide(&self, email: &str) -> StatusCode {
        let (status, _, verdict) = self.post("/v1/decide", &Self::login(email)).await;
        if status == StatusCode::OK {
            let id = verdict["settlement"].as_str().unwrap();
            let settled = self
                .post("/v1/settle", &json!({"settlement": id, "status": 401}))
                .await;
            assert_eq!(settled.0, StatusCode::NO_CONTENT);
        }
        status
    }

    async fn fail_via_gateway(&self, email: &str) -> StatusCode {
        let body = json!({"email": email, "password": "guess"}).to_string();
        let request = Request::post("/login")
            .header("host", "app.test")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let peer: SocketAddr = "203.0.113.7:40000".parse().unwrap();
        self.gateway
            .as_ref()
            .unwrap()
            .call(request, peer)
            .await
            .status()
    }
}

#[tokio::test]
async fn decide_reaches_the_gateways_verdict_on_the_same_counts() {
    let app = App::start().await;
    let weir = Weir::start(Some(&app));
    assert_eq!(
        weir.fail_via_gateway("ana@x.io").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(weir.fail_via_decide("ANA@x.io").await, StatusCode::OK);
    assert_eq!(
        weir.fail_via_gateway("ana@x.io ").await,
        StatusCode::UNAUTHORIZED
    );
    // Three failures, two through each door: both now deny.
    assert_eq!(
        weir.fail_via_gateway("ana@x.io").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let (status, headers, verdict) = weir.post("/v1/decide", &Weir::login("ana@x.io")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(verdict["allowed"], false);
    assert_eq!(verdict["violated"], json!(["login"]));
    assert_eq!(verdict["settlement"], Value::Null);
    assert_eq!(verdict["retry_after_ms"], 900_000);
    assert_eq!(headers["retry-after"], "900");
    assert_eq!(headers["ratelimit"], "\"login\";r=0;t=900");
    assert_eq!(
        verdict["headers"]["ratelimit-policy"],
        "\"login\";q=3;w=900"
    );
    assert_eq!(verdict["headers"]["x-ratelimit-remaining"], "0");
    assert_eq!(app.arrived(), 2, "denied attempts never reach the app");
}

#[tokio::test]
async fn decide_without_a_gateway_reports_quotas_and_headers() {
    let weir = Weir::start(None);
    let search = json!({"method": "GET", "path": "/search?q=x", "client_ip": "192.0.2.1"});
    let (status, headers, verdict) = weir.post("/v1/decide", &search).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(verdict["allowed"], true);
    assert_eq!(
        verdict["quotas"],
        json!([{"rule": "search", "limit": 2, "remaining": 1, "reset_after_ms": 30_000}])
    );
    assert_eq!(
        verdict["settlement"],
        Value::Null,
        "nothing waits for the answer"
    );
    assert_eq!(headers["ratelimit"], "\"search\";r=1;t=30");
    weir.post("/v1/decide", &search).await;
    let (status, _, verdict) = weir.post("/v1/decide", &search).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(verdict["retry_after_ms"], 30_000);
    // HEAD is limited as the GET it stands for; other paths are not limited.
    let head = json!({"method": "HEAD", "path": "/search", "client_ip": "192.0.2.1"});
    assert_eq!(
        weir.post("/v1/decide", &head).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let other = json!({"method": "GET", "path": "/books", "client_ip": "192.0.2.1"});
    let (status, _, verdict) = weir.post("/v1/decide", &other).await;
    assert_eq!((status, &verdict["quotas"]), (StatusCode::OK, &json!([])));
}

#[tokio::test]
async fn settlements_are_used_once_and_expire_into_counted_attempts() {
    let weir = Weir::start(None);
    let (_, _, verdict) = weir.post("/v1/decide", &Weir::login("bo@x.io")).await;
    let id = verdict["settlement"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    let settle = json!({"settlement": id, "status": 401});
    assert_eq!(
        weir.post("/v1/settle", &settle).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, _, problem) = weir.post("/v1/settle", &settle).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a settlement is used once");
    assert_eq!(problem["type"], "/problems/unknown-settlement");

    // One never reported stays counted, and cannot be settled after its time.
    let (_, _, verdict) = weir.post("/v1/decide", &Weir::login("bo@x.io")).await;
    let late = verdict["settlement"].as_str().unwrap().to_owned();
    weir.clock.advance(SETTLE_WITHIN + Duration::from_millis(1));
    let (status, _, _) = weir
        .post("/v1/settle", &json!({"settlement": late, "status": 200}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(weir.fail_via_decide("bo@x.io").await, StatusCode::OK);
    assert_eq!(
        weir.fail_via_decide("bo@x.io").await,
        StatusCode::TOO_MANY_REQUESTS,
        "two settled failures and one unreported attempt fill the limit of 3"
    );
}

#[tokio::test]
async fn bad_facts_and_settlements_are_a_400() {
    let weir = Weir::start(None);
    let cases = [
        ("/v1/decide", json!({"method": "GET", "path": "/"})),
        (
            "/v1/decide",
            json!({"method": "G T", "path": "/", "client_ip": "192.0.2.1"}),
        ),
        (
            "/v1/decide",
            json!({"method": "GET", "path": "x", "client_ip": "192.0.2.1"}),
        ),
        (
            "/v1/decide",
            json!({"method": "GET", "path": "", "client_ip": "192.0.2.1"}),
        ),
        (
            "/v1/decide",
            json!({"method": "OPTIONS", "path": "*", "client_ip": "192.0.2.1"}),
        ),
        (
            "/v1/decide",
            json!({"method": "GET", "path": "/", "client_ip": "not-an-ip"}),
        ),
        (
            "/v1/decide",
            json!({"method": "GET", "path": "/", "client_ip": "192.0.2.1", "headers": {"bad name": "x"}}),
        ),
        (
            "/v1/decide",
            json!({"method": "GET", "path": "/", "client_ip": "192.0.2.1", "extra": 1}),
        ),
        ("/v1/settle", json!({"settlement": "zz", "status": 200})),
        (
            "/v1/settle",
            json!({"settlement": "0".repeat(32), "status": 42}),
        ),
        ("/v1/settle", json!({"status": 200})),
    ];
    for (path, body) in cases {
        let (status, headers, problem) = weir.post(path, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(problem["type"], "/problems/invalid-request", "{body}");
    }
    // A header named twice in the object (JSON keeps the last): refused, as the
    // gateway refuses a key sent twice, never read as the last one's budget.
    let twice = r#"{"method": "GET", "path": "/", "client_ip": "192.0.2.1", "headers": {"x-api-key": "a", "x-api-key": "b"}}"#;
    let request = Request::post("/v1/decide")
        .header("content-type", "application/json")
        .body(Body::from(twice))
        .unwrap();
    let response = weir.api.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let problem: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("header `x-api-key` is given twice: give its values as a list"),
        "{problem}"
    );
}
