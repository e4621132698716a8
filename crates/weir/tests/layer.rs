//! weir inside a service: the tower layer in front of an axum app, in process, on the
//! memory store with a manual clock (and on a real Redis for the failure policy).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Request, StatusCode};
use axum::routing::{get, post};
use serde_json::Value;
use tower::{Layer, ServiceExt};
use weir::{Config, Engine, Reloadable, WeirLayer, WeirService};
use weir_core::ManualClock;
use weir_store::{MemoryStore, MemoryStoreConfig};
use weir_testkit::RedisServer;

/// 2026-12-01 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

const CONFIG: &str = "\
identities:
  email: { body_field: email, normalize: email }
rules:
  - name: books
    match: { path_prefix: /books }
    algorithm: gcra
    limit: 10
    period: 1m
  - name: login
    match: { methods: [POST], path: /login }
    key: [email]
    algorithm: sliding_log
    limit: 2
    period: 15m
    count_statuses: [401]
";

/// The app: `/books` answers with the path it was routed, `/login` 200 for the right
/// password and 401 otherwise, `/health` is under no rule. Every call is counted.
fn app(calls: Arc<AtomicUsize>) -> Router<()> {
    Router::new()
        .route("/books", get(|| async { "books" }))
        .route(
            "/books/{id}",
            get(|uri: axum::http::Uri| async move { uri.path().to_owned() }),
        )
        .route(
            "/login",
            post(|body: String| async move {
                let login: Value = serde_json::from_str(&body).unwrap();
                if login["password"] == "right" {
                    (StatusCode::OK, "welcome")
                } else {
                    (StatusCode::UNAUTHORIZED, "no")
                }
            }),
        )
        .route("/health", get(|| async { "ok" }))
        .route(
            "/whoami",
            get(|headers: HeaderMap| async move {
                [
                    "host",
                    "x-forwarded-for",
                    "forwarded",
                    "x-real-ip",
                    "x-forwarded-host",
                ]
                .iter()
                .map(|name| {
                    let value = headers.get(*name).map_or("-", |v| v.to_str().unwrap());
                    format!("{name}: {value}\n")
                })
                .collect::<String>()
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            calls,
            |State(calls): State<Arc<AtomicUsize>>,
             request: Request<Body>,
             next: axum::middleware::Next| async move {
                calls.fetch_add(1, Ordering::Relaxed);
                next.run(request).await
            },
        ))
}

/// The app with weir in front: the layer wraps the whole router, so that weir reads and
/// decides before routing and the router routes the canonical target.
type Guarded = WeirService<Router<()>>;

struct Service {
    app: Guarded,
    calls: Arc<AtomicUsize>,
    clock: Arc<ManualClock>,
}

fn service() -> Service {
    let config = Config::parse(CONFIG, Path::new("layer.yaml")).unwrap();
    let clock = Arc::new(ManualClock::new(MIDNIGHT));
    let store = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    let engine = Reloadable::new(Engine::new(&config.engine, store, clock.clone()));
    let calls = Arc::new(AtomicUsize::new(0));
    Service {
        app: WeirLayer::new(&config, engine).layer(app(calls.clone())),
        calls,
        clock,
    }
}

struct Reply {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

async fn send(app: &Guarded, request: axum::http::request::Builder, body: Body) -> Reply {
    let peer = SocketAddr::from(([192, 0, 2, 7], 40000));
    let request = request.extension(ConnectInfo(peer)).body(body).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn get_books(path: &str) -> axum::http::request::Builder {
    Request::get(path).header("host", "api.example")
}

async fn login(app: &Guarded, email: &str, password: &str) -> Reply {
    let body = format!(r#"{{"email":"{email}","password":"{password}"}}"#);
    let request = Request::post("/login")
        .header("host", "api.example")
        .header("content-type", "application/json");
    send(app, request, Body::from(body)).await
}

/// Concurrent requests of one client admit exactly the limit; the others are answered
/// by weir (429, Retry-After, RateLimit fields, problem+json) and never reach the app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_admit_exactly_the_limit() {
    let service = service();
    let replies = at_once(&service.app, "/books", 40).await;
    let admitted = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(admitted, 10);
    assert_eq!(replies.iter().filter(|r| r.status == 429).count(), 30);
    assert_eq!(
        service.calls.load(Ordering::Relaxed),
        10,
        "denials never reach the app"
    );
    let denied = replies.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(denied.json()["type"], "/problems/rate-limited");
    assert_eq!(denied.json()["violated"], serde_json::json!(["books"]));
    assert_eq!(denied.headers["retry-after"], "6");
    assert_eq!(denied.headers["ratelimit-policy"], "\"books\";q=10;w=60");
    let allowed = replies.iter().find(|r| r.status == 200).unwrap();
    assert_eq!(allowed.body, "books");
    assert!(
        allowed.headers["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with("\"books\";r=")
    );
    // Time is the engine's: six seconds later one more unit is back.
    service.clock.advance(Duration::from_secs(6));
    assert_eq!(
        send(&service.app, get_books("/books"), Body::empty())
            .await
            .status,
        200
    );
}

/// Spellings of one path share one budget, and the app is given the canonical one.
#[tokio::test]
async fn variants_of_a_path_are_one_request() {
    let service = service();
    let spellings = ["/books/1", "/books/./1", "/books/x/../1", "/books/%31"];
    for (i, path) in spellings.iter().cycle().take(10).enumerate() {
        let reply = send(&service.app, get_books(path), Body::empty()).await;
        assert_eq!(reply.status, 200, "{i}: {path}");
        assert_eq!(reply.body, "/books/1", "the app routes what was decided");
    }
    assert_eq!(
        send(&service.app, get_books("/Books/1/"), Body::empty())
            .await
            .status,
        429
    );
}

/// A request that cannot be read one way is refused before the app sees it; one no
/// rule applies to goes straight on.
#[tokio::test]
async fn unreadable_requests_are_refused_and_unlimited_ones_pass() {
    let service = service();
    let twice = Request::get("/books")
        .header("host", "api.example")
        .header("host", "other.example");
    let reply = send(&service.app, twice, Body::empty()).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["type"], "/problems/invalid-request");
    assert_eq!(service.calls.load(Ordering::Relaxed), 0);
    for _ in 0..30 {
        let reply = send(&service.app, get_books("/health"), Body::empty()).await;
        assert_eq!((reply.status, reply.headers.get("ratelimit")), (200, None));
    }
}

/// What the app is told of where a request came from is what weir read: forwarding
/// headers a client wrote never reach it (there is no trusted proxy here), and an
/// absolute-form target's host comes with its port.
#[tokio::test]
async fn the_app_reads_the_client_weir_read() {
    let service = service();
    let forged = Request::get("/whoami")
        .header("host", "api.example")
        .header("x-forwarded-for", "6.6.6.6")
        .header("forwarded", "for=6.6.6.6")
        .header("x-real-ip", "6.6.6.6")
        .header("x-forwarded-host", "evil.example");
    let reply = send(&service.app, forged, Body::empty()).await;
    assert_eq!(
        reply.body,
        "host: api.example\nx-forwarded-for: 192.0.2.7\nforwarded: for=192.0.2.7;proto=http\n\
         x-real-ip: 192.0.2.7\nx-forwarded-host: -\n"
    );
    let absolute = Request::get("http://api.example:8080/whoami");
    let reply = send(&service.app, absolute, Body::empty()).await;
    assert!(
        reply.body.starts_with("host: api.example:8080\n"),
        "{}",
        reply.body
    );
}

/// Bodies are read within bounds: one that says it is too large is refused before it
/// is read, one that breaks off is a 400 (not a 413), and nothing reaches the app.
#[tokio::test]
async fn bodies_are_read_within_bounds() {
    let service = service();
    let huge = Request::post("/login")
        .header("host", "api.example")
        .header("content-type", "application/json")
        .header("content-length", "10000000");
    let reply = send(&service.app, huge, Body::from("{}")).await;
    assert_eq!(
        (reply.status, reply.json()["type"].as_str()),
        (413, Some("/problems/body-too-large"))
    );
    let broken = broken_body();
    let reply = send(
        &service.app,
        Request::post("/login")
            .header("host", "api.example")
            .header("content-type", "application/json"),
        broken,
    )
    .await;
    assert_eq!(
        (reply.status, reply.json()["type"].as_str()),
        (400, Some("/problems/invalid-request"))
    );
    assert_eq!(service.calls.load(Ordering::Relaxed), 0);
}

/// A body that sends a few bytes and then fails, as a connection that breaks off does.
fn broken_body() -> Body {
    let (mut sender, body) =
        http_body_util::channel::Channel::<bytes::Bytes, std::io::Error>::new(2);
    tokio::spawn(async move {
        sender
            .send_data(bytes::Bytes::from_static(b"{\"email\":"))
            .await
            .unwrap();
        sender.abort(std::io::Error::other("the client hung up"));
    });
    Body::new(body)
}

/// Failed logins are counted by the app's answer, per email read from the body: a
/// success gives its unit back, a third failure is denied, another email is apart.
#[tokio::test]
async fn logins_are_settled_with_the_apps_status() {
    let service = service();
    let app = &service.app;
    assert_eq!(login(app, "ana@example.com", "right").await.status, 200);
    assert_eq!(login(app, "ana@example.com", "right").await.status, 200);
    assert_eq!(login(app, "Ana@Example.com", "wrong").await.status, 401);
    assert_eq!(login(app, "ana@example.com", "wrong").await.status, 401);
    let locked = login(app, "ana@example.com", "right").await;
    assert_eq!(
        locked.status, 429,
        "two failures spend the limit: {}",
        locked.body
    );
    assert_eq!(login(app, "bob@example.com", "wrong").await.status, 401);
    // The body reached the app intact: the right password still signs bob in.
    assert_eq!(login(app, "bob@example.com", "right").await.status, 200);
}

/// Without the connection's address, weir cannot key on the client: a 500, never a
/// guess.
#[tokio::test]
async fn a_request_without_its_address_is_not_guessed() {
    let service = service();
    let request = get_books("/books").body(Body::empty()).unwrap();
    let response = service.app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 500);
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    let problem: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(problem["type"], "/problems/no-client-address");
    assert_eq!(service.calls.load(Ordering::Relaxed), 0);
}

/// On a shared store that fails, each rule's failure policy holds in the layer as in
/// the gateway: fail closed is a 503 with the fixed detail, fail open decides on this
/// instance's fallback limits.
#[tokio::test]
async fn a_failing_store_follows_each_rules_failure_policy() {
    let mut redis = RedisServer::start();
    let text = format!(
        "store: {{ type: redis, url: '{}', timeout: 100ms }}\nrules:\n  - {{ name: open, match: {{ path_prefix: /books }}, algorithm: gcra, limit: 5, period: 1m }}\n  - {{ name: closed, match: {{ path_prefix: /health }}, algorithm: gcra, limit: 5, period: 1m, failure: closed }}\n",
        redis.url()
    );
    let config = Config::parse(&text, Path::new("layer-redis.yaml")).unwrap();
    let service = weir::instance(&config).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let app = WeirLayer::new(&config, service.engine.clone()).layer(app(calls));
    assert_eq!(
        send(&app, get_books("/health"), Body::empty()).await.status,
        200
    );
    redis.kill();
    let closed = send(&app, get_books("/health"), Body::empty()).await;
    assert_eq!(closed.status, 503, "{}", closed.body);
    assert_eq!(closed.json()["type"], "/problems/store-unavailable");
    let open: Vec<u16> = at_once(&app, "/books", 8)
        .await
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(
        open.iter().filter(|s| **s == 200).count(),
        5,
        "{open:?}: the fallback's limit"
    );
    assert_eq!(open.iter().filter(|s| **s == 429).count(), 3, "{open:?}");
}

/// `n` requests to `path` sent at once, each on its own task; their statuses and
/// replies, in no order.
async fn at_once(app: &Guarded, path: &'static str, n: usize) -> Vec<Reply> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let app = app.clone();
        tasks.spawn(async move { send(&app, get_books(path), Body::empty()).await });
    }
    tasks.join_all().await
}

/// A key throttled to 2 a minute by the plans file (the rule's limit is 100) keeps its
/// own limit (this instance's share of it) while Redis is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_limit_holds_on_the_fallback() {
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keys.yaml"),
        "keys:\n  small: { plan: std, limit: 2 }\n",
    )
    .unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(
        &path,
        format!(
            "store: {{ type: redis, url: '{}', timeout: 100ms }}\n\
             identities:\n  api_key: {{ header: X-Api-Key }}\n\
             plans:\n  file: keys.yaml\n  identity: api_key\n  default: std\n\
             rules:\n  - {{ name: books, match: {{ path_prefix: /books }}, plans: [std], key: [api_key], algorithm: gcra, limit: 100, period: 1m }}\n",
            redis.url()
        ),
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    let service = weir::instance(&config).await.unwrap();
    let app =
        WeirLayer::new(&config, service.engine.clone()).layer(app(Arc::new(AtomicUsize::new(0))));
    let small = || get_books("/books").header("x-api-key", "small");
    let on_redis: Vec<u16> = futures_statuses(&app, small, 4).await;
    assert_eq!(on_redis, [200, 200, 429, 429], "on Redis, the custom limit");
    redis.kill();
    let on_fallback: Vec<u16> = futures_statuses(&app, small, 4).await;
    assert_eq!(on_fallback, [200, 200, 429, 429], "on the fallback");
}

async fn futures_statuses(
    app: &Guarded,
    request: impl Fn() -> axum::http::request::Builder,
    n: usize,
) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..n {
        statuses.push(send(app, request(), Body::empty()).await.status);
    }
    statuses
}

/// A plans-file custom limit on a global rule is checked as the rule's own: 1 a minute
/// cannot be shared by 2 regions (a unit each at least), refused at load rather than
/// failing every request of the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_limit_on_a_global_rule_is_checked_at_load() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keys.yaml"),
        "keys:\n  small: { plan: std, limit: 1 }\n",
    )
    .unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(
        &path,
        format!(
            "store: {{ type: redis, url: '{}', timeout: 100ms }}\n\
             region: {{ name: a, peers: {{ b: 'redis://127.0.0.1:1' }} }}\n\
             identities:\n  api_key: {{ header: X-Api-Key }}\n\
             plans:\n  file: keys.yaml\n  identity: api_key\n  default: std\n\
             rules:\n  - {{ name: books, scope: global, match: {{ path_prefix: /books }}, plans: [std], key: [api_key], algorithm: token_bucket, limit: 100, period: 1m }}\n",
            redis.url()
        ),
    )
    .unwrap();
    let refused = Config::load(&path).unwrap_err().to_string();
    assert!(
        refused.contains("custom limit 1 of key `small` for rule `books`")
            && refused.contains("at least one unit per region"),
        "{refused}"
    );
}

/// A rule whose cost the inner service's answer states (`cost_from`) is trued up as in
/// the gateway: the estimate reserved, the JSON body's figure settled at its end, an
/// overspend a debt the caller waits out.
#[tokio::test]
async fn costs_stated_in_the_answer_settle_as_in_the_gateway() {
    use weir_store::{Key, Store};
    let config = Config::parse(
        "rules:
  - name: tokens
    match: { methods: [POST], path: /chat }
    algorithm: token_bucket
    limit: 100
    period: 1m
    cost: 10
    cost_from: { json: /usage/total_tokens }
",
        Path::new("layer.yaml"),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(MIDNIGHT));
    let store = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    let engine = Reloadable::new(Engine::new(&config.engine, store.clone(), clock.clone()));
    let chat = Router::new().route(
        "/chat",
        post(|body: String| async move {
            axum::Json(serde_json::json!({"usage": {"total_tokens": body.parse::<u64>().unwrap()}}))
        }),
    );
    let app = WeirLayer::new(&config, engine).layer(chat);
    let ask = |tokens: u64| {
        let request = Request::post("/chat").header("host", "api.example");
        send(&app, request, Body::from(tokens.to_string()))
    };
    let policy = config.engine.rules[0].policy;
    let left = || async {
        let key = Key {
            rule: "tokens",
            identity: "client_ip=192.0.2.7",
        };
        store.check(key, &policy, 0).await.unwrap().remaining
    };
    let until_left = |tokens: u64| async move {
        for _ in 0..1_000 {
            if left().await == tokens {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(left().await, tokens);
    };
    assert_eq!(ask(3).await.status, 200);
    until_left(97).await;
    // 150 used with 87 left after the reservation of 10: 140 more, 53 owed.
    assert_eq!(ask(150).await.status, 200);
    until_left(0).await;
    let denied = ask(1).await;
    assert_eq!(denied.status, 429);
    // 53 owed and 10 to reserve, at 100 a minute: 37.8 s, whole seconds up.
    assert_eq!(denied.headers["retry-after"], "38");
    clock.advance(Duration::from_millis(37_799));
    assert_eq!(ask(10).await.status, 429);
    clock.advance(Duration::from_millis(1));
    assert_eq!(ask(10).await.status, 200);
}
