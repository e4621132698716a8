//! Door parity: one table of requests through every door that takes HTTP requests (the
//! gateway in front of a real upstream, the tower layer in front of the same app in
//! process, `/v1/decide` + `/v1/settle` called as a service would call them, the
//! gateway's listener asked in HTTP/2 (h2c, each request a stream of one connection,
//! its host as `:authority`), the gateway asked each request as a WebSocket handshake
//! (HTTP/1.1 `Upgrade: websocket`, decided at the handshake with its identity, then
//! passed on as the upgrade to the upstream), and the forward-auth door `/v1/auth`
//! asked as a trusted proxy asks it), each
//! on an engine of its own built from one configuration. Every door must reach the same
//! verdict for every request: the same status, the same RateLimit, `Retry-After` and
//! shadow fields, the same problem type for weir's own answers, and the same decision
//! and refusal counts in `/metrics`. The forward-auth door never sees a body: rows
//! with one are refused there (`/problems/body-not-seen`), never decided without it.
//! A handshake is a `GET` without a body: the WebSocket door answers the rows
//! without one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::{Layer, ServiceExt};
use weir::{Config, Handler, Instance, WeirLayer, decision_router};
use weir_core::ManualClock;
use weir_store::{MemoryStore, MemoryStoreConfig};
use weir_testkit::RedisServer;

/// 2026-12-01 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

/// Where every request comes from (no proxy is trusted: the client is the peer).
const PEER: &str = "192.0.2.7";

/// The proxy that asks the forward-auth door (trusted by its default, loopback).
const PROXY: &str = "127.0.0.1:41000";

/// Rules for every kind of row: limited, shadow, keyed by a header, by a body field,
/// counted by outcome, requests in flight, a ban, and a rule's deny list.
const RULES: &str = "\
identities:
  api_key: { header: x-api-key }
  email: { body_field: email, normalize: email }
  tenant: { query_param: tenant }
  session: { cookie: sid }
rules:
  - name: books
    match: { path_prefix: /books }
    algorithm: gcra
    limit: 2
    period: 1m
  - name: preview
    match: { path_prefix: /preview }
    algorithm: fixed_window
    limit: 1
    period: 1h
    shadow: true
  - name: keys
    match: { path_prefix: /keyed }
    key: [api_key]
    algorithm: sliding_window
    limit: 5
    period: 1m
  - name: login
    match: { methods: [POST], path: /login }
    key: [email]
    algorithm: sliding_log
    limit: 2
    period: 15m
    count_statuses: [401]
  - name: exports
    match: { path_prefix: /reports, query: { format: csv } }
    key: [tenant]
    algorithm: fixed_window
    limit: 1
    period: 1h
  - name: sessions
    match: { path_prefix: /session, headers: { x-tier: { prefix: beta } } }
    key: [session]
    algorithm: fixed_window
    limit: 1
    period: 1h
  - name: reports
    match: { path_prefix: /inflight }
    algorithm: concurrency
    limit: 1
  - name: guarded
    match: { path_prefix: /guarded }
    algorithm: fixed_window
    limit: 1
    period: 1h
    on_limited: { ban: 15m, after: 2, within: 10m }
  - name: closed
    match: { path_prefix: /closed }
    algorithm: fixed_window
    limit: 100
    period: 1h
    lists:
      deny: { client_ip: [192.0.2.0/24, 127.0.0.0/8] }   # the h2c door's peer is loopback
";

/// The app behind every door: `/login` 200 for the right password and 401 otherwise,
/// anything else 200, saying in `x-upgrade` the `Upgrade` it was asked for (a
/// handshake answered without switching, so that its answer compares with the
/// others').
fn app() -> Router {
    Router::new()
        .route(
            "/login",
            post(|body: Bytes| async move {
                let login: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if login["password"] == "right" {
                    StatusCode::OK
                } else {
                    StatusCode::UNAUTHORIZED
                }
            }),
        )
        .fallback(get(|headers: HeaderMap| async move {
            let upgrade = headers.get("upgrade").cloned();
            let mut answer = "ok".into_response();
            if let Some(upgrade) = upgrade {
                answer.headers_mut().insert("x-upgrade", upgrade);
            }
            answer
        }))
}

/// One request of the table.
#[derive(Debug, Clone)]
struct Ask {
    method: &'static str,
    target: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Option<String>,
}

fn fetch(target: &'static str) -> Ask {
    Ask {
        method: "GET",
        target,
        headers: vec![("host", "app.test")],
        body: None,
    }
}

fn with(mut ask: Ask, name: &'static str, value: &'static str) -> Ask {
    ask.headers.push((name, value));
    ask
}

fn login(email: &str, password: &str) -> Ask {
    login_body(&json!({"email": email, "password": password}).to_string())
}

fn login_body(body: &str) -> Ask {
    Ask {
        method: "POST",
        target: "/login",
        headers: vec![("host", "app.test"), ("content-type", "application/json")],
        body: Some(body.to_owned()),
    }
}

impl Ask {
    fn request(&self) -> Request<Body> {
        let mut request = Request::builder().method(self.method).uri(self.target);
        for (name, value) in &self.headers {
            request = request.header(*name, *value);
        }
        let body = self.body.clone().map_or_else(Body::empty, Body::from);
        request.body(body).unwrap()
    }

    /// This request as a WebSocket handshake (RFC 6455 4.1).
    fn websocket(&self) -> Request<Body> {
        assert!(
            self.method == "GET" && self.body.is_none(),
            "a handshake is a GET"
        );
        let mut request = self.request();
        for (name, value) in [
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ] {
            request
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        request
    }

    /// This request in HTTP/2: its host as `:authority` (an absolute target), no Host.
    fn http2(&self) -> Request<Body> {
        let host = self.headers.iter().find(|(name, _)| *name == "host");
        let authority = host.map_or("localhost", |(_, value)| *value);
        let mut request = Request::builder()
            .method(self.method)
            .uri(format!("http://{authority}{}", self.target));
        for (name, value) in self.headers.iter().filter(|(name, _)| *name != "host") {
            request = request.header(*name, *value);
        }
        let body = self.body.clone().map_or_else(Body::empty, Body::from);
        request.body(body).unwrap()
    }

    /// The subrequest a proxy (Traefik, Caddy) sends the forward-auth door for this
    /// request: the client's headers, the original request in `X-Forwarded-*`, from
    /// the proxy's address.
    fn forward_auth(&self) -> Request<Body> {
        let host = self.headers.iter().find(|(name, _)| *name == "host");
        let mut request = Request::get("/v1/auth")
            .header("host", "weir-auth.internal")
            .header("x-forwarded-method", self.method)
            .header("x-forwarded-proto", "http")
            .header("x-forwarded-host", host.map_or("", |(_, value)| *value))
            .header("x-forwarded-uri", self.target)
            .header("x-forwarded-for", PEER);
        for (name, value) in self.headers.iter().filter(|(name, _)| *name != "host") {
            request = request.header(*name, *value);
        }
        let proxy: SocketAddr = PROXY.parse().unwrap();
        request
            .extension(ConnectInfo(proxy))
            .body(Body::empty())
            .unwrap()
    }

    /// The facts `/v1/decide` is sent for this request.
    fn facts(&self) -> Value {
        let mut headers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, value) in self.headers.iter().filter(|(name, _)| *name != "host") {
            headers.entry(name).or_default().push(value);
        }
        let host = self.headers.iter().find(|(name, _)| *name == "host");
        json!({
            "method": self.method,
            "path": self.target,
            "host": host.map(|(_, value)| value),
            "headers": headers,
            "client_ip": PEER,
            "body": self.body,
        })
    }
}

/// What a door answered, as far as a client can tell the doors apart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reply {
    status: u16,
    /// The RateLimit, `Retry-After` and shadow fields.
    fields: BTreeMap<&'static str, String>,
    /// The problem type of weir's own problem+json answers.
    problem: Option<String>,
}

const FIELDS: [&str; 4] = [
    "ratelimit",
    "ratelimit-policy",
    "retry-after",
    "weir-shadow-limited",
];

async fn reply(response: axum::response::Response) -> Reply {
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    Reply::of(parts.status, &parts.headers, &bytes)
}

impl Reply {
    fn of(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Self {
        let fields = FIELDS
            .iter()
            .filter_map(|name| Some((*name, headers.get(*name)?.to_str().unwrap().to_owned())))
            .collect();
        let problem_json = headers
            .get("content-type")
            .is_some_and(|v| v == "application/problem+json");
        let problem = problem_json
            .then(|| serde_json::from_slice::<Value>(body).unwrap()["type"].to_string());
        Self {
            status: status.as_u16(),
            fields,
            problem,
        }
    }
}

/// A door under test, on an engine of its own.
enum Door {
    Gateway(Instance),
    Layer(Instance, weir::WeirService<Router>),
    Decide(Instance),
    /// The gateway's listener (`serve_main`) on loopback, one HTTP/2 connection.
    Http2(Instance, hyper::client::conn::http2::SendRequest<Body>),
    /// The gateway, each request asked as a WebSocket handshake.
    WebSocket(Instance),
    /// `/v1/auth`, asked as Traefik or Caddy ask it (`convention: forwarded`).
    Auth(Instance, Router),
}

fn peer() -> SocketAddr {
    SocketAddr::new(PEER.parse().unwrap(), 40000)
}

impl Door {
    fn name(&self) -> &'static str {
        match self {
            Door::Gateway(_) => "gateway",
            Door::Layer(..) => "layer",
            Door::Decide(_) => "/v1/decide",
            Door::Http2(..) => "gateway over HTTP/2",
            Door::WebSocket(_) => "gateway, a WebSocket handshake",
            Door::Auth(..) => "/v1/auth",
        }
    }

    fn service(&self) -> &Instance {
        match self {
            Door::Gateway(service)
            | Door::Layer(service, _)
            | Door::Decide(service)
            | Door::Http2(service, _)
            | Door::WebSocket(service)
            | Door::Auth(service, _) => service,
        }
    }

    /// The six doors, each on a service of its own built by `service` from `config`
    /// (the gateway's upstream, the layer's inner service and the decide caller's app
    /// are one app; the forward-auth door's proxy has none). The four that see bodies
    /// come first; then the WebSocket handshake, and the forward-auth door last.
    async fn all(config: &Config, service: impl AsyncFn(&Config) -> Instance) -> [Door; 6] {
        let gateway = Door::Gateway(service(config).await);
        let layered = service(config).await;
        let layer = WeirLayer::new(config, layered.engine.clone()).layer(app());
        let http2 = service(config).await;
        let h2c = serve_http2(&http2).await;
        let authed = service(config).await;
        let auth = weir::default_auth_router(config, &authed);
        [
            gateway,
            Door::Layer(layered, layer),
            Door::Decide(service(config).await),
            Door::Http2(http2, h2c),
            Door::WebSocket(service(config).await),
            Door::Auth(authed, auth),
        ]
    }

    async fn send(&self, ask: &Ask) -> Reply {
        match self {
            Door::Gateway(service) => {
                let gateway = service.gateway.clone().unwrap();
                reply(gateway.call(ask.request(), peer()).await).await
            }
            Door::Layer(_, layer) => {
                let mut request = ask.request();
                request.extensions_mut().insert(ConnectInfo(peer()));
                reply(layer.clone().oneshot(request).await.unwrap()).await
            }
            Door::Decide(service) => decide(service, ask).await,
            Door::Http2(_, send) => {
                let mut send = send.clone();
                send.ready().await.unwrap();
                let response = send.send_request(ask.http2()).await.unwrap();
                reply(response.map(Body::new)).await
            }
            Door::WebSocket(service) => {
                let gateway = service.gateway.clone().unwrap();
                let response = gateway.call(ask.websocket(), peer()).await;
                if response.status() == StatusCode::OK {
                    // It took the WebSocket path: the upstream was asked to upgrade.
                    assert_eq!(response.headers()["x-upgrade"], "websocket", "{ask:?}");
                }
                reply(response).await
            }
            Door::Auth(_, router) => {
                let response = router.clone().oneshot(ask.forward_auth()).await.unwrap();
                reply(response).await
            }
        }
    }

    /// The decision and refusal counts, as `/metrics` shows them.
    async fn counts(&self) -> Vec<String> {
        let request = Request::get("/metrics").body(Body::empty()).unwrap();
        let router = decision_router(self.service());
        let response = router.oneshot(request).await.unwrap();
        let text = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(text.to_vec())
            .unwrap()
            .lines()
            .filter(|line| {
                ["weir_decisions_total{", "weir_refused_requests_total{"]
                    .iter()
                    .any(|family| line.starts_with(family))
            })
            .map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

/// A service calling `/v1/decide` for `ask`: weir's answer when it stops the request,
/// else the app's with the fields weir listed, settled with the app's status.
async fn decide(service: &Instance, ask: &Ask) -> Reply {
    let api = decision_router(service);
    let post = |path: &str, body: Value| {
        Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let response = api
        .clone()
        .oneshot(post("/v1/decide", ask.facts()))
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    if parts.status != StatusCode::OK {
        return Reply::of(parts.status, &parts.headers, &bytes);
    }
    let verdict: Value = serde_json::from_slice(&bytes).unwrap();
    let answer = app().oneshot(ask.request()).await.unwrap();
    let status = answer.status();
    if let Some(id) = verdict["settlement"].as_str() {
        let settle = post(
            "/v1/settle",
            json!({"settlement": id, "status": status.as_u16()}),
        );
        let settled = api.oneshot(settle).await.unwrap();
        assert_eq!(settled.status(), StatusCode::NO_CONTENT);
    }
    let mut headers = HeaderMap::new();
    for (name, value) in verdict["headers"].as_object().unwrap() {
        let name = axum::http::HeaderName::try_from(name.as_str()).unwrap();
        headers.insert(name, value.as_str().unwrap().parse().unwrap());
    }
    Reply::of(status, &headers, b"")
}

/// Runs `table` through every door and checks that they agree, row by row and in
/// their counts; returns the gateway's replies.
async fn agree(doors: &[Door], table: &[(&str, Ask)]) -> Vec<Reply> {
    let mut replies: Vec<Vec<Reply>> = Vec::new();
    for door in doors {
        let mut answered = Vec::new();
        for (_, ask) in table {
            answered.push(door.send(ask).await);
        }
        replies.push(answered);
    }
    for (door, answered) in doors.iter().zip(&replies).skip(1) {
        for ((row, _), (theirs, gateway)) in table.iter().zip(answered.iter().zip(&replies[0])) {
            let mut gateway = gateway.clone();
            if matches!(door, Door::Decide(_)) && theirs.status == 429 {
                // A service answers a denial in its own words: `/v1/decide` gives it the
                // status and the fields, not a body.
                gateway.problem = None;
            }
            assert_eq!(
                *theirs,
                gateway,
                "{row}: {} answers otherwise than the gateway",
                door.name()
            );
        }
    }
    let gateway_counts = doors[0].counts().await;
    for door in &doors[1..] {
        assert_eq!(
            door.counts().await,
            gateway_counts,
            "{} counts otherwise than the gateway",
            door.name()
        );
    }
    replies.swap_remove(0)
}

fn memory_service(config: &Config) -> Instance {
    let clock = Arc::new(ManualClock::new(MIDNIGHT));
    let store = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    Instance::with_store(config, store, clock)
}

/// `service`'s gateway served as `weir serve` serves its main listener, on loopback,
/// and an HTTP/2 (h2c) connection to it.
async fn serve_http2(service: &Instance) -> hyper::client::conn::http2::SendRequest<Body> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(weir::serve_main(
        listener,
        service.gateway.clone().unwrap(),
        weir::ConnectionLimits::default(),
        None,
        weir::ConnectionSlots::new("main", 16),
        std::future::pending(),
    ));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    send
}

async fn upstream() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app()).await.unwrap() });
    addr
}

#[tokio::test]
async fn every_door_reaches_the_same_verdict_for_one_request() {
    let text = format!("upstream:\n  url: http://{}\n{RULES}", upstream().await);
    let config = Config::parse(&text, Path::new("doors.yaml")).unwrap();
    let doors = Door::all(&config, async |config| memory_service(config)).await;
    let table = [
        ("ordinary", fetch("/books")),
        ("ordinary, another spelling", fetch("//books/./")),
        ("limited", fetch("/books")),
        ("limited again", fetch("/books")),
        ("under no rule", fetch("/health")),
        ("unreadable target", fetch("/books/%2F")),
        ("unreadable target, NUL", fetch("/books/%00")),
        ("traversal", fetch("/books/..;/admin")),
        ("shadow, allowed", fetch("/preview")),
        ("shadow, over its limit", fetch("/preview")),
        ("banned: allowed", fetch("/guarded")),
        ("banned: denied once", fetch("/guarded")),
        ("banned: denied twice, the ban starts", fetch("/guarded")),
        ("banned: refused as banned", fetch("/guarded")),
        ("on a rule's deny list", fetch("/closed")),
        ("in flight: one at a time", fetch("/inflight")),
        ("in flight: released when it ended", fetch("/inflight")),
        ("keyed", with(fetch("/keyed"), "x-api-key", "k1")),
        (
            "bad identity: the key sent twice",
            with(with(fetch("/keyed"), "x-api-key", "k1"), "x-api-key", "k2"),
        ),
        (
            "keyed by a query parameter",
            fetch("/reports?tenant=t1&format=csv"),
        ),
        (
            "the parameter respelled: the same budget",
            fetch("/reports?TENANT=t%31&format=c%73v"),
        ),
        (
            "a parameter sent twice",
            fetch("/reports?tenant=t2&format=csv&tenant=t1"),
        ),
        (
            "keyed by a cookie, matched by a header",
            with(
                with(fetch("/session"), "x-tier", "beta-1"),
                "cookie",
                "sid=s1",
            ),
        ),
        (
            "the cookie quoted: the same budget",
            with(
                with(fetch("/session"), "x-tier", "beta-1"),
                "cookie",
                "sid=\"s1\"",
            ),
        ),
        (
            "a cookie sent twice",
            with(
                with(fetch("/session"), "x-tier", "beta-1"),
                "cookie",
                "sid=s2; SID=s1",
            ),
        ),
        (
            "another header value: not the rule's",
            with(with(fetch("/session"), "x-tier", "pro"), "cookie", "sid=s1"),
        ),
        ("counted by outcome: a failure", login("ana@x.io", "wrong")),
        ("counted by outcome: a success", login("ANA@x.io", "right")),
        (
            "counted by outcome: a second failure",
            login("ana@x.io", "no"),
        ),
        ("counted by outcome: locked", login("ana@x.io", "right")),
        (
            "an unreadable body field: two emails",
            login_body("{\"email\":\"a@x.io\",\"email\":\"b@x.io\"}"),
        ),
    ];
    // The WebSocket and forward-auth doors answer the rows without a body alike; the
    // forward-auth door refuses the others (it never sees a body), and a handshake has
    // none.
    let (heads, bodies): (Vec<_>, Vec<_>) = table
        .iter()
        .cloned()
        .partition(|(_, ask)| ask.body.is_none());
    let mut replies = agree(&doors, &heads).await;
    replies.extend(agree(&doors[..4], &bodies).await);
    for (row, ask) in &bodies {
        let refused = doors[5].send(ask).await;
        assert_eq!(refused.status, 500, "{row}");
        assert_eq!(
            refused.problem.as_deref(),
            Some("\"/problems/body-not-seen\""),
            "{row}"
        );
    }
    // The table means what its rows say (on the gateway; every door agreed).
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            200, 200, 429, 429, 200, 400, 400, 400, 200, 200, 200, 429, 429, 429, 403, 200, 200,
            200, 400, 200, 429, 400, 200, 429, 400, 200, 401, 200, 401, 429, 400
        ]
    );
    // The second denial started the ban: the next request is refused as banned, to
    // the ban's end, at every door; a rule's deny list refuses before anything counts.
    assert_eq!(
        replies[12].problem.as_deref(),
        Some("\"/problems/rate-limited\"")
    );
    assert_eq!(replies[13].problem.as_deref(), Some("\"/problems/banned\""));
    assert_eq!(replies[13].fields["retry-after"], "900");
    assert_eq!(replies[14].problem.as_deref(), Some("\"/problems/denied\""));
    assert_eq!(replies[2].fields["retry-after"], "30");
    assert_eq!(
        replies[8].fields.get("weir-shadow-limited"),
        None,
        "within its limit"
    );
    assert_eq!(replies[9].fields["weir-shadow-limited"], "preview");
    assert_eq!(replies[29].fields["ratelimit"], "\"login\";r=0;t=900");
    // Each door released the slot when its request ended: the next one took it.
    for reply in &replies[15..17] {
        assert_eq!(reply.fields["ratelimit"], "\"reports\";r=0;t=0");
        assert_eq!(reply.fields["ratelimit-policy"], "\"reports\";q=1");
    }
}

#[tokio::test]
async fn every_door_applies_the_failure_policy_alike_when_the_store_is_down() {
    let mut redis = RedisServer::start();
    let rule = |name: &str, limit: u64, failure: &str| {
        format!(
            "  - name: {name}\n    match: {{ path_prefix: /{name} }}\n    algorithm: gcra\n    limit: {limit}\n    period: 1h\n    failure: {failure}\n"
        )
    };
    let text = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 100ms\nupstream:\n  url: http://{}\nrules:\n{}{}{}",
        redis.url(),
        upstream().await,
        rule("open", 1_000_000, "open"),
        rule("closed", 1_000_000, "closed"),
        rule("tight", 2, "open"),
    );
    let config = Config::parse(&text, Path::new("doors.yaml")).unwrap();
    let doors = Door::all(&config, async |config| {
        weir::instance(config).await.unwrap()
    })
    .await;
    // Lost: every door decides on its own fallback, or refuses.
    redis.kill();
    let table = [
        ("fail-open rule", fetch("/open")),
        ("fail-closed rule", fetch("/closed")),
        ("fail-open, on the fallback", fetch("/tight")),
        ("fail-open, the fallback's last unit", fetch("/tight")),
        ("fail-open, limited on the fallback", fetch("/tight")),
        ("under no rule", fetch("/health")),
    ];
    let replies = agree(&doors, &table).await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 503, 200, 200, 429, 200]);
    assert_eq!(
        replies[1].problem.as_deref(),
        Some("\"/problems/store-unavailable\"")
    );
}

/// The method calls in the sources of `dir` (under `src/`), by name.
fn method_calls(dir: &str) -> Vec<String> {
    struct Calls(Vec<String>);
    impl<'ast> syn::visit::Visit<'ast> for Calls {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            self.0.push(call.method.to_string());
            syn::visit::visit_expr_method_call(self, call);
        }

        fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
            let test = item.attrs.iter().any(|a| {
                a.path().is_ident("cfg")
                    && a.parse_args::<syn::Meta>()
                        .is_ok_and(|m| m.path().is_ident("test"))
            });
            if !test {
                syn::visit::visit_item_mod(self, item);
            }
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut calls = Calls(Vec::new());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let file = syn::parse_file(&std::fs::read_to_string(&path).unwrap()).unwrap();
        syn::visit::Visit::visit_file(&mut calls, &file);
    }
    calls.0
}

/// The table above cannot reach every branch of a door (a request step copied into a
/// door drifts first where no test looks), so the doors that pass requests on are
/// held to the one step by their sources too: they take requests through it, and never
/// read a head or ask for a verdict themselves.
#[test]
fn the_doors_that_pass_requests_on_take_the_one_request_step() {
    for door in ["gateway", "layer", "auth"] {
        let calls = method_calls(door);
        assert!(
            calls.iter().any(|m| m == "run"),
            "{door} does not take requests through the request step"
        );
        for own in [
            "read",
            "decide",
            "facts",
            "respelled",
            "reads_body",
            "admit",
        ] {
            assert!(
                !calls.iter().any(|m| m == own),
                "{door} calls `{own}`: the request step's work, written again"
            );
        }
    }
}

/// A plan looked up by a body field (a plans file keyed by the account in the body) is
/// read at every door that sees bodies, though no rule keys on the body: without it
/// every caller would be anonymous, and the rules for plans would not count them. (The
/// forward-auth door sees no body: `check-config` refuses such plans with an `auth`
/// section.)
#[tokio::test]
async fn a_plan_looked_up_by_a_body_field_is_read_at_every_door_that_sees_bodies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("accounts.yaml"), "keys:\n  ana@x.io: pro\n").unwrap();
    let text = format!(
        "upstream:\n  url: http://{}\nidentities:\n  email: {{ body_field: email }}\nplans:\n  file: accounts.yaml\n  identity: email\n  default: free\nrules:\n  - name: pro\n    match: {{ path_prefix: /login }}\n    plans: [pro]\n    algorithm: gcra\n    limit: 1\n    period: 1h\n",
        upstream().await
    );
    let config = Config::parse(&text, &dir.path().join("weir.yaml")).unwrap();
    let doors = Door::all(&config, async |config| memory_service(config)).await;
    let table = [
        ("a pro account", login("ana@x.io", "right")),
        (
            "a pro account, over its plan's limit",
            login("ana@x.io", "right"),
        ),
    ];
    let replies = agree(&doors[..4], &table).await;
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 429]);
    // The door has no body to read: refused at load with an `auth` section.
    let refused = Config::parse(
        &format!("{text}auth: {{}}\n"),
        &dir.path().join("weir.yaml"),
    )
    .unwrap_err();
    assert!(refused.to_string().contains("plans.identity"), "{refused}");
}
