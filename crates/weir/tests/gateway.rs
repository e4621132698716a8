//! The gateway end to end: a real upstream (an HTTP server in the test), the `weir`
//! binary in front of it, and a client, all on loopback. The shipped examples are run
//! as they are, with only their upstream address replaced.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use common::Server;
use common::echo::echo;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

// ---------------------------------------------------------------- the upstream

/// 200 for the right password, 401 otherwise, whether or not the account exists.
async fn login(headers: HeaderMap, body: Bytes) -> StatusCode {
    let json = headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let password = if json {
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["password"].as_str().map(str::to_owned))
    } else {
        form_urlencoded::parse(&body)
            .find(|(k, _)| k == "password")
            .map(|(_, v)| v.into_owned())
    };
    if password.as_deref() == Some("right") {
        StatusCode::OK
    } else {
        StatusCode::UNAUTHORIZED
    }
}

async fn own_headers() -> impl IntoResponse {
    let mut headers = HeaderMap::new();
    headers.append("set-cookie", HeaderValue::from_static("a=1"));
    headers.append("set-cookie", HeaderValue::from_static("b=2"));
    headers.append(
        "ratelimit-policy",
        HeaderValue::from_static("\"upstream\";q=5;w=1"),
    );
    (headers, "mine")
}

/// The size of the large bodies the upstream sends and receives.
const BIG: usize = 3 << 20;

async fn start_upstream() -> SocketAddr {
    let app = Router::new()
        .route("/login", post(login))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                "late"
            }),
        )
        .route("/own-headers", get(own_headers))
        .route("/big", get(|| async { vec![b'x'; BIG] }))
        .route(
            "/count",
            post(|body: Body| async move {
                match axum::body::to_bytes(body, 2 * BIG).await {
                    Ok(bytes) => bytes.len().to_string(),
                    Err(_) => "too large".into(),
                }
            }),
        )
        .fallback(echo);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

// ---------------------------------------------------------------- weir and a client

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A shipped example with its upstream pointed at `upstream` (and its plans file beside
/// it), edited by `edit`.
fn example(
    dir: &Path,
    name: &str,
    upstream: SocketAddr,
    edit: impl Fn(String) -> String,
) -> PathBuf {
    let text = std::fs::read_to_string(examples().join(name)).unwrap();
    let text = edit(text.replace("http://127.0.0.1:9000", &format!("http://{upstream}")));
    std::fs::create_dir_all(dir.join("plans")).unwrap();
    std::fs::copy(
        examples().join("plans/api-keys.yaml"),
        dir.join("plans/api-keys.yaml"),
    )
    .unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<String> {
        let all: Vec<&str> = self
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        (!all.is_empty()).then(|| all.join(" | "))
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

async fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let mut request = axum::http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(Body::new(body), 8 << 20)
        .await
        .unwrap();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

async fn get_api(weir: &Server, path: &str, key: Option<&str>) -> Reply {
    let headers: Vec<(&str, &str)> = key.map(|k| ("x-api-key", k)).into_iter().collect();
    send(&weir.addr, "GET", path, &headers, "").await
}

// ---------------------------------------------------------------- proxying

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_requests_reach_the_upstream_intact_with_forwarding_headers() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "public-api.yaml", upstream, |t| t));
    let reply = send(
        &weir.addr,
        "POST",
        "/api/books?sort=title&page=2",
        &[("x-api-key", "key-pro-1"), ("content-type", "text/plain")],
        "a body",
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = reply.json();
    assert_eq!(seen["method"], "POST");
    // The Host the client asked for, as a reverse proxy keeps it.
    assert_eq!(seen["host"], weir.addr.as_str());
    assert_eq!(seen["path"], "/api/books");
    assert_eq!(seen["query"], "sort=title&page=2");
    assert_eq!(seen["body"], "a body");
    assert_eq!(seen["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen["x-forwarded-proto"], "http");
    assert_eq!(seen["forwarded"], "for=127.0.0.1;proto=http");
    assert_eq!(
        reply.header("ratelimit-policy").as_deref(),
        Some("\"pro\";q=1000;w=60")
    );
    assert_eq!(
        reply.header("ratelimit").as_deref(),
        Some("\"pro\";r=999;t=1")
    );
    // Paths no rule matches go straight through, without RateLimit fields.
    let reply = send(&weir.addr, "GET", "/public/page", &[], "").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("ratelimit"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_through_both_ways() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "shadow.yaml", upstream, |t| {
        t.replace("path: \"/books/{id}\"", "path_prefix: /")
    }));
    let upload = "y".repeat(BIG);
    for _ in 0..3 {
        let reply = send(&weir.addr, "GET", "/big", &[], "").await;
        assert_eq!((reply.status, reply.body.len()), (StatusCode::OK, BIG));
        assert!(reply.body.bytes().all(|b| b == b'x'));
        let reply = send(&weir.addr, "POST", "/count", &[], &upload).await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::OK, "3145728")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_own_headers_are_kept() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "shadow.yaml", upstream, |t| {
        t.replace("path: \"/books/{id}\"", "path_prefix: /")
    }));
    let reply = send(&weir.addr, "GET", "/own-headers", &[], "").await;
    assert_eq!(reply.body, "mine");
    assert_eq!(reply.header("set-cookie").as_deref(), Some("a=1 | b=2"));
    // One field: the upstream's item, then weir's.
    assert_eq!(
        reply.header("ratelimit-policy").as_deref(),
        Some("\"upstream\";q=5;w=1, \"search\";q=100;w=60")
    );
    // Legacy fields, as configured in the example.
    assert_eq!(reply.header("ratelimit-limit").as_deref(), Some("100"));
    assert_eq!(reply.header("x-ratelimit-remaining").as_deref(), Some("9"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_or_slow_upstream_is_a_502_or_504_problem() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let weir = Server::start(&example(dir.path(), "login.yaml", dead, |t| t));
    let reply = send(&weir.addr, "GET", "/anything", &[], "").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert_eq!(reply.json()["type"], "/problems/bad-gateway");
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("application/problem+json")
    );
    drop(weir);
    let log = dir.path().join("weir.log");
    let config = example(dir.path(), "login.yaml", upstream, |t| {
        t.replace("  url: http", "  timeout: 300ms\n  url: http")
    });
    let weir = Server::start_with(
        &config,
        &[],
        std::process::Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let started = std::time::Instant::now();
    let reply = send(&weir.addr, "GET", "/slow", &[], "").await;
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(reply.json()["type"], "/problems/gateway-timeout");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Logged with its reason, once: the second within 10 s is not.
    let again = send(&weir.addr, "GET", "/slow", &[], "").await;
    assert_eq!(again.status, StatusCode::GATEWAY_TIMEOUT);
    drop(weir);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("the upstream gave no answer"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("504") && lines[0].contains("did not answer within 300ms"),
        "{text}"
    );
}

/// An HTTP/1.0 upstream's answer goes to an HTTP/1.1 client as weir's own HTTP/1.1
/// answer (a proxy answers in its own version, RFC 9110 6.2), its body whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_1_0_upstream_is_answered_in_http_1_1() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            let _ = stream
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nold but fine")
                .await;
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "login.yaml", upstream, |t| t));
    let mut stream = tokio::net::TcpStream::connect(&weir.addr).await.unwrap();
    stream
        .write_all(b"GET /anything HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("\r\nold but fine\r\n"), "{answer}");
}

// ---------------------------------------------------------------- the public API example

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_api_example_limits_by_plan_key_and_cost() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "public-api.yaml", upstream, |t| t));

    // Free: 60 a minute per key; the 61st is a 429 that says why and when.
    for i in 0..60 {
        assert_eq!(
            get_api(&weir, "/api/books", Some("key-free-1"))
                .await
                .status,
            StatusCode::OK,
            "request {i}"
        );
    }
    let denied = get_api(&weir, "/api/books", Some("key-free-1")).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        denied.header("content-type").as_deref(),
        Some("application/problem+json")
    );
    let problem = denied.json();
    assert_eq!(problem["type"], "/problems/rate-limited");
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["violated"], json!(["free"]));
    assert_eq!(denied.header("retry-after").as_deref(), Some("1"));
    assert_eq!(
        denied.header("ratelimit-policy").as_deref(),
        Some("\"free\";q=60;w=60")
    );
    assert_eq!(
        denied.header("ratelimit").as_deref(),
        Some("\"free\";r=0;t=60")
    );
    for name in ["ratelimit-policy", "ratelimit"] {
        let value = denied.header(name).unwrap();
        let _: sfv::List = sfv::Parser::new(value.as_str()).parse().unwrap();
    }

    // Another free key has its own budget; an export costs 50 of it.
    let export = get_api(&weir, "/api/exports/all", Some("key-free-2")).await;
    assert_eq!(export.status, StatusCode::OK);
    assert_eq!(
        export.header("ratelimit").as_deref(),
        Some("\"free\";r=10;t=50")
    );
    let again = get_api(&weir, "/api/ai/summarise", Some("key-free-2")).await;
    assert_eq!(
        again.status,
        StatusCode::TOO_MANY_REQUESTS,
        "only 10 left for a cost of 50"
    );
    assert_eq!(again.header("retry-after").as_deref(), Some("40"));
    assert_eq!(
        get_api(&weir, "/api/books", Some("key-free-2"))
            .await
            .status,
        StatusCode::OK,
        "the denied call took nothing"
    );

    // Plans and custom limits.
    let pro = get_api(&weir, "/api/books", Some("key-pro-1")).await;
    assert_eq!(
        pro.header("ratelimit-policy").as_deref(),
        Some("\"pro\";q=1000;w=60")
    );
    let big = get_api(&weir, "/api/books", Some("key-enterprise-big")).await;
    assert_eq!(
        big.header("ratelimit-policy").as_deref(),
        Some("\"enterprise\";q=20000;w=60")
    );
    let enterprise = get_api(&weir, "/api/books", Some("key-enterprise-1")).await;
    assert_eq!(
        enterprise.header("ratelimit-policy").as_deref(),
        Some("\"enterprise\";q=10000;w=60")
    );

    // Anonymous: 30 a minute per IP, shared with keys no plan lists: made-up keys
    // from one IP get no more than no key at all.
    for i in 0..30 {
        let key = format!("guessed-{i}");
        let key = (i % 2 == 0).then_some(key.as_str());
        assert_eq!(
            get_api(&weir, "/api/books", key).await.status,
            StatusCode::OK
        );
    }
    for key in [None, Some("guessed-31"), Some("key-free-unlisted")] {
        let anonymous = get_api(&weir, "/api/books", key).await;
        assert_eq!(anonymous.status, StatusCode::TOO_MANY_REQUESTS, "{key:?}");
        assert_eq!(anonymous.json()["violated"], json!(["anonymous"]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_headers_count_only_from_trusted_proxies() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    // The example trusts 127.0.0.1: the test client is a trusted proxy here.
    let trusted = Server::start(&example(dir.path(), "public-api.yaml", upstream, |t| t));
    let as_from = |xff: &'static str| {
        let weir = &trusted;
        async move {
            send(
                &weir.addr,
                "GET",
                "/api/books",
                &[("x-forwarded-for", xff)],
                "",
            )
            .await
        }
    };
    for _ in 0..30 {
        assert_eq!(as_from("198.51.100.1").await.status, StatusCode::OK);
    }
    assert_eq!(
        as_from("198.51.100.1").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The client's own claim at the left is ignored; the proxy's appended hop counts.
    assert_eq!(
        as_from("6.6.6.6, 198.51.100.1").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(as_from("198.51.100.2").await.status, StatusCode::OK);
    drop(trusted);

    // Without trusted proxies, the peer is the client whatever it claims.
    let untrusted = Server::start(&example(dir.path(), "public-api.yaml", upstream, |t| {
        t.replace("trusted_proxies: [127.0.0.1/32]", "trusted_proxies: []")
    }));
    for i in 0..30 {
        let xff = format!("203.0.113.{i}");
        let reply = send(
            &untrusted.addr,
            "GET",
            "/api/books",
            &[("x-forwarded-for", &xff)],
            "",
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    let spoofed = send(
        &untrusted.addr,
        "GET",
        "/api/books",
        &[("x-forwarded-for", "203.0.113.200")],
        "",
    )
    .await;
    assert_eq!(
        spoofed.status,
        StatusCode::TOO_MANY_REQUESTS,
        "spoofing X-Forwarded-For gains nothing"
    );
}

// ---------------------------------------------------------------- the login example

async fn attempt(weir: &Server, email: &str, password: &str) -> Reply {
    let body = json!({"email": email, "password": password}).to_string();
    send(
        &weir.addr,
        "POST",
        "/login",
        &[("content-type", "application/json")],
        &body,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_example_counts_failures_per_account_and_resets_on_success() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "login.yaml", upstream, |t| t));

    // Four failures, then a success: the account's counter starts again.
    for _ in 0..4 {
        assert_eq!(
            attempt(&weir, "ana@x.io", "wrong").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        attempt(&weir, "ana@x.io", "right").await.status,
        StatusCode::OK
    );
    // Five failures, written differently each time: one account.
    for email in ["Ana@X.io", " ana@x.io", "ANA@x.io ", "ana@X.IO", "ana@x.io"] {
        assert_eq!(
            attempt(&weir, email, "wrong").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    // Now even the right password is blocked, without reaching the app.
    let blocked = attempt(&weir, "ana@x.io", "right").await;
    assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(blocked.json()["violated"], json!(["login-account-ip"]));
    assert_eq!(blocked.header("retry-after").as_deref(), Some("900"));

    // An account that does not exist is answered exactly alike.
    for _ in 0..5 {
        assert_eq!(
            attempt(&weir, "nobody@x.io", "wrong").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    let ghost = attempt(&weir, "nobody@x.io", "right").await;
    assert_eq!(ghost.status, blocked.status);
    assert_eq!(ghost.json()["detail"], blocked.json()["detail"]);
    let account_item = |r: &Reply| {
        r.header("ratelimit")
            .unwrap()
            .split(", ")
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(account_item(&ghost), account_item(&blocked));
    assert_eq!(ghost.header("retry-after"), blocked.header("retry-after"));

    // A form body works too, and another account is unaffected.
    let form = send(
        &weir.addr,
        "POST",
        "/login",
        &[("content-type", "application/x-www-form-urlencoded")],
        "email=bo%40x.io&password=right",
    )
    .await;
    assert_eq!(form.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_example_limits_failures_per_ip_across_accounts() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "login.yaml", upstream, |t| t));
    for i in 0..50 {
        let reply = attempt(&weir, &format!("user{i}@x.io"), "wrong").await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    let stuffing = attempt(&weir, "user99@x.io", "wrong").await;
    assert_eq!(stuffing.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stuffing.json()["violated"], json!(["login-ip"]));
    // Spoofing X-Forwarded-For from an untrusted peer changes nothing.
    let body = json!({"email": "user98@x.io", "password": "wrong"}).to_string();
    let spoofed = send(
        &weir.addr,
        "POST",
        "/login",
        &[
            ("content-type", "application/json"),
            ("x-forwarded-for", "9.9.9.9"),
        ],
        &body,
    )
    .await;
    assert_eq!(spoofed.status, StatusCode::TOO_MANY_REQUESTS);
}

// ---------------------------------------------------------------- JWT and shadow mode

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn token(alg: Algorithm, key: &EncodingKey, sub: &str, exp: u64, kid: Option<&str>) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, &json!({"sub": sub, "exp": exp}), key).unwrap()
}

async fn book(weir: &Server, token: &str) -> Reply {
    let bearer = format!("Bearer {token}");
    send(
        &weir.addr,
        "GET",
        "/books/42",
        &[("authorization", bearer.as_str())],
        "",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_rules_report_but_never_deny_and_bad_tokens_are_not_trusted() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "shadow.yaml", upstream, |t| t));
    let key = EncodingKey::from_secret(b"change-me-to-a-long-random-secret").unwrap();
    let alice = token(Algorithm::HS256, &key, "alice", now() + 600, None);

    // The enforcing bucket holds 10; the shadow one 3.
    for i in 0..10 {
        let reply = book(&weir, &alice).await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}");
        let shadow = reply.header("weir-shadow-limited");
        assert_eq!(
            shadow.as_deref(),
            (i >= 3).then_some("search-strict"),
            "request {i}"
        );
        assert_eq!(
            reply.header("ratelimit-policy").as_deref(),
            Some("\"search\";q=100;w=60"),
            "shadow rules are not advertised"
        );
    }
    let denied = book(&weir, &alice).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.json()["violated"], json!(["search"]));

    // Alice's exhausted budget is not reachable with an expired or forged token: those
    // callers are anonymous, counted by IP, with a fresh budget.
    let expired = token(Algorithm::HS256, &key, "alice", now() - 10, None);
    assert_eq!(book(&weir, &expired).await.status, StatusCode::OK);
    let forged = token(
        Algorithm::HS256,
        &EncodingKey::from_secret(b"another-secret-of-enough-length").unwrap(),
        "bob",
        now() + 600,
        None,
    );
    assert_eq!(book(&weir, &forged).await.status, StatusCode::OK);
    let bob = token(Algorithm::HS256, &key, "bob", now() + 600, None);
    assert_eq!(
        book(&weir, &bob).await.header("ratelimit").as_deref(),
        Some("\"search\";r=9;t=1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs256_es256_and_jwks_tokens_are_verified() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let keys = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/keys");
    let rsa =
        EncodingKey::from_rsa_pem(&std::fs::read(keys.join("rsa-private.pem")).unwrap()).unwrap();
    let ec =
        EncodingKey::from_ec_pem(&std::fs::read(keys.join("ec-private.pem")).unwrap()).unwrap();
    let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(&rsa, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("k1".into());
    std::fs::write(
        dir.path().join("jwks.json"),
        json!({"keys": [jwk]}).to_string(),
    )
    .unwrap();
    for (source, alg, key, kid) in [
        (
            format!(
                "rs256_public_key_file: {}",
                keys.join("rsa-public.pem").display()
            ),
            Algorithm::RS256,
            &rsa,
            None,
        ),
        (
            format!(
                "es256_public_key_file: {}",
                keys.join("ec-public.pem").display()
            ),
            Algorithm::ES256,
            &ec,
            None,
        ),
        (
            "jwks_file: jwks.json".to_owned(),
            Algorithm::RS256,
            &rsa,
            Some("k1"),
        ),
    ] {
        let config = example(dir.path(), "shadow.yaml", upstream, |t| {
            t.replace("hs256_secret: change-me-to-a-long-random-secret", &source)
        });
        let weir = Server::start(&config);
        let carol = token(alg, key, "carol", now() + 600, kid);
        for _ in 0..10 {
            assert_eq!(book(&weir, &carol).await.status, StatusCode::OK, "{source}");
        }
        assert_eq!(
            book(&weir, &carol).await.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{source}: carol is identified"
        );
        let dave = token(alg, key, "dave", now() + 600, kid);
        assert_eq!(
            book(&weir, &dave).await.status,
            StatusCode::OK,
            "{source}: dave has his own budget"
        );
        // HS256 signed with the public key's text must not pass as RS256/ES256.
        let confused = token(
            Algorithm::HS256,
            &EncodingKey::from_secret(b"carol-is-not-this-key!").unwrap(),
            "carol",
            now() + 600,
            kid,
        );
        assert_eq!(
            book(&weir, &confused).await.status,
            StatusCode::OK,
            "{source}: counted by IP, not as carol"
        );
    }
}

// ---------------------------------------------------------------- the decision API beside

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_api_serves_on_the_admin_address_in_gateway_mode() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&example(dir.path(), "login.yaml", upstream, |t| t));
    let admin = weir.admin.clone().unwrap();
    let reply = send(
        &admin,
        "POST",
        "/v1/check",
        &[],
        r#"{"rule": "login-account-ip", "key": "x", "cost": 0}"#,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["remaining"], 5);
    assert_eq!(
        send(&admin, "GET", "/healthz", &[], "").await.status,
        StatusCode::OK
    );
    // The gateway's own port forwards /healthz to the upstream like any path.
    let proxied = send(&weir.addr, "GET", "/healthz", &[], "").await;
    assert_eq!(proxied.json()["path"], "/healthz");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_come_from_a_verified_claim_or_a_trusted_header() {
    let upstream = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let rules = "rules:\n\
        \x20 - { name: free, match: { path_prefix: / }, plans: [free], key: [client_ip], algorithm: gcra, limit: 2, period: 1m }\n\
        \x20 - { name: pro, match: { path_prefix: / }, plans: [pro], key: [client_ip], algorithm: gcra, limit: 5, period: 1m }\n\
        \x20 - { name: anon, match: { path_prefix: / }, plans: [anonymous], key: [client_ip], algorithm: gcra, limit: 1, period: 1m }\n";
    let policy_of = |reply: &Reply| reply.header("ratelimit-policy").unwrap_or_default();

    // From a verified JWT claim.
    let path = dir.path().join("jwt.yaml");
    std::fs::write(&path, format!(
        "upstream:\n  url: http://{upstream}\nidentities:\n  user:\n    jwt: {{ claim: sub, hs256_secret: a-secret-of-sixteen-bytes }}\nplans:\n  jwt_claim: plan\n  identity: user\n  default: free\n{rules}"
    )).unwrap();
    let weir = Server::start(&path);
    let key = EncodingKey::from_secret(b"a-secret-of-sixteen-bytes").unwrap();
    let with_plan = jsonwebtoken::encode(
        &Header::default(),
        &json!({"sub": "u1", "plan": "pro", "exp": now() + 600}),
        &key,
    )
    .unwrap();
    let without = token(Algorithm::HS256, &key, "u2", now() + 600, None);
    let forged = jsonwebtoken::encode(
        &Header::default(),
        &json!({"sub": "u3", "plan": "pro", "exp": now() + 600}),
        &EncodingKey::from_secret(b"not-the-secret-at-all").unwrap(),
    )
    .unwrap();
    for (token, want) in [
        (with_plan, "\"pro\";q=5;w=60"),
        (without, "\"free\";q=2;w=60"),
        (forged, "\"anon\";q=1;w=60"),
    ] {
        assert_eq!(policy_of(&book(&weir, &token).await), want);
    }
    assert_eq!(
        policy_of(&send(&weir.addr, "GET", "/x", &[], "").await),
        "\"anon\";q=1;w=60"
    );
    drop(weir);

    // From a header set by a trusted authentication layer: believed only from it, and
    // only when it names a plan a rule knows.
    let path = dir.path().join("header.yaml");
    let trusted = "client_ip:\n  trusted_proxies: [127.0.0.1]\n";
    std::fs::write(&path, format!("upstream:\n  url: http://{upstream}\n{trusted}plans:\n  header: X-Plan\n  default: free\n{rules}")).unwrap();
    let weir = Server::start(&path);
    let with_plan = |plan: &'static str| [("x-plan", plan)];
    for (plan, want) in [
        ("pro", "\"pro\";q=5;w=60"),
        ("nonexistent", "\"free\";q=2;w=60"),
        ("Pro", "\"free\";q=2;w=60"),
    ] {
        let reply = send(&weir.addr, "GET", "/x", &with_plan(plan), "").await;
        assert_eq!(policy_of(&reply), want, "X-Plan: {plan}");
    }
    assert_eq!(
        policy_of(&send(&weir.addr, "GET", "/x", &[], "").await),
        "\"free\";q=2;w=60"
    );
    drop(weir);
    // From a client that is not a trusted proxy, the header means nothing.
    std::fs::write(&path, format!("upstream:\n  url: http://{upstream}\nplans:\n  header: X-Plan\n  default: free\n{rules}")).unwrap();
    let weir = Server::start(&path);
    let reply = send(&weir.addr, "GET", "/x", &with_plan("pro"), "").await;
    assert_eq!(policy_of(&reply), "\"free\";q=2;w=60");
}
