//! Costs known only when the answer ends (`cost_from`): `examples/ai-tokens.yaml` run by
//! the gateway in process in front of a real model-like upstream that reports the tokens
//! it used (in a JSON body or a header), on the memory store and on Redis; and
//! `/v1/settle` with a `cost`. The estimate is reserved up front; what was not used is
//! given back, what was used beyond is a debt the caller waits out. Time is a manual
//! clock (Redis with `clock: local`): debts are paid by moving it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::body::Bytes;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;
use weir::{Config, ConnectionLimits, Gateway, Handler, Instance, Reloadable, api_router, serve};
use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    BackingStore, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Store,
};
use weir_testkit::RedisServer;

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

/// The example's bucket: 10,000 tokens a minute, bursts of 20,000.
const BURST: u64 = 20_000;

/// A model server: answers a chat completion with the tokens the request asks it to
/// have used (`x-use-tokens`), in the JSON body's usage and in `x-tokens-used`.
struct Model {
    addr: SocketAddr,
    calls: Arc<AtomicUsize>,
}

impl Model {
    async fn start() -> Self {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let app = Router::new().fallback(move |headers: HeaderMap| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                let used = headers
                    .get("x-use-tokens")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("0")
                    .to_owned();
                if headers.contains_key("x-stream") {
                    return streamed(used);
                }
                let usage = used.parse::<u64>().map_or(json!(used), |n| json!(n));
                let pad = match headers.get("x-pad-bytes") {
                    Some(n) => "x".repeat(n.to_str().unwrap().parse().unwrap()),
                    None => String::new(),
                };
                (
                    [("x-tokens-used", used)],
                    axum::Json(json!({"usage": {"total_tokens": usage}, "pad": pad})),
                )
                    .into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, calls }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// A streamed answer (server-sent events) whose trailer states the tokens used.
fn streamed(used: String) -> Response {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-tokens-used", used.parse().unwrap());
    let frames = Frames(VecDeque::from([
        Frame::data(Bytes::from("data: {\"delta\":\"he\"}\n\n")),
        Frame::data(Bytes::from("data: {\"delta\":\"llo\"}\n\n")),
        Frame::trailers(trailers),
    ]));
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("trailer", "x-tokens-used")
        .body(Body::new(frames))
        .unwrap()
}

/// A body of frames given in advance (data, then trailers).
struct Frames(VecDeque<Frame<Bytes>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// The example in front of `model`, its `cost_from` replaced by `source`, on `store`.
struct Weir {
    gateway: Reloadable<Gateway>,
    api: Router,
    store: Arc<dyn BackingStore>,
    clock: Arc<ManualClock>,
}

impl Weir {
    async fn start(model: &Model, source: &str, redis: Option<&RedisServer>) -> Self {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ai-tokens.yaml");
        let text = std::fs::read_to_string(example)
            .unwrap()
            .replace("http://127.0.0.1:9000", &format!("http://{}", model.addr))
            .replace("json: /usage/total_tokens", source);
        let section = match redis {
            Some(redis) => format!(
                "store:\n  type: redis\n  url: {}\n  timeout: 2s\n  clock: local\n",
                redis.url()
            ),
            None => "store:\n  type: memory\n".to_owned(),
        };
        let config = Config::parse(&format!("{section}{text}"), Path::new("ai.yaml")).unwrap();
        let clock = Arc::new(ManualClock::new(MIDNIGHT));
        let store: Arc<dyn BackingStore> = match redis {
            Some(redis) => {
                let config = RedisStoreConfig {
                    target: RedisTarget::Single(redis.url()),
                    key_prefix: "weir:costs".into(),
                    timeout: Duration::from_secs(2),
                    clock: RedisClock::Local,
                    window_counters: false,
                    access: Default::default(),
                };
                Arc::new(RedisStore::connect(&config, clock.clone()).await.unwrap())
            }
            None => Arc::new(MemoryStore::new(
                MemoryStoreConfig::default(),
                clock.clone(),
            )),
        };
        let service =
            Instance::with_store(&config, Arc::clone(&store), clock.clone() as Arc<dyn Clock>);
        Self {
            gateway: service.gateway.clone().unwrap(),
            api: api_router(service.engine.clone()),
            store,
            clock,
        }
    }

    /// A chat completion by `user` that uses `tokens` (as the model will say).
    async fn chat(&self, user: &str, tokens: &str) -> Response {
        let request = Request::post("/v1/chat/completions")
            .header("host", "api.test")
            .header("x-user-id", user)
            .header("x-use-tokens", tokens)
            .body(Body::from("{}"))
            .unwrap();
        let peer: SocketAddr = "203.0.113.7:40000".parse().unwrap();
        self.gateway.call(request, peer).await
    }

    /// A streamed chat completion by `user` that uses `tokens`, read to its end; its
    /// status and trailers.
    async fn stream_to_end(&self, user: &str, tokens: &str) -> (StatusCode, Option<HeaderMap>) {
        let request = Request::post("/v1/chat/completions")
            .header("host", "api.test")
            .header("x-user-id", user)
            .header("x-use-tokens", tokens)
            .header("x-stream", "1")
            .header("te", "trailers")
            .body(Body::from("{}"))
            .unwrap();
        let peer: SocketAddr = "203.0.113.7:40000".parse().unwrap();
        let response = self.gateway.call(request, peer).await;
        let status = response.status();
        let collected = response.into_body().collect().await.unwrap();
        (status, collected.trailers().cloned())
    }

    /// A chat completion read to its end; its status.
    async fn chat_to_end(&self, user: &str, tokens: &str) -> StatusCode {
        self.padded_to_end(user, tokens, 0).await
    }

    /// A chat completion whose answer carries `pad` bytes more, read to its end; its
    /// status.
    async fn padded_to_end(&self, user: &str, tokens: &str, pad: usize) -> StatusCode {
        let request = Request::post("/v1/chat/completions")
            .header("host", "api.test")
            .header("x-user-id", user)
            .header("x-use-tokens", tokens)
            .header("x-pad-bytes", pad.to_string())
            .body(Body::from("{}"))
            .unwrap();
        let peer: SocketAddr = "203.0.113.7:40000".parse().unwrap();
        let response = self.gateway.call(request, peer).await;
        let status = response.status();
        response.into_body().collect().await.unwrap();
        status
    }

    /// Tokens left in `user`'s bucket now.
    async fn left(&self, user: &str) -> u64 {
        let policy = Policy::new(
            Algorithm::TokenBucket,
            10_000,
            Duration::from_secs(60),
            Some(BURST),
        )
        .unwrap();
        let identity = format!("user={user}");
        let key = Key {
            rule: "tokens-per-user",
            identity: &identity,
        };
        self.store.check(key, &policy, 0).await.unwrap().remaining
    }

    /// Waits (on other tasks, not on time) until `user` has `tokens` left: a body's
    /// end settles in a task of its own.
    async fn until_left(&self, user: &str, tokens: u64) {
        for _ in 0..2_000 {
            if self.left(user).await == tokens {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(self.left(user).await, tokens, "tokens left for {user}");
    }

    /// Serves the gateway over real HTTP/1, as `weir serve` does; its address.
    async fn listen(&self) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gateway = self.gateway.clone();
        let (limits, slots) = (
            ConnectionLimits::default(),
            weir::ConnectionSlots::new("main", 1_024),
        );
        tokio::spawn(async move {
            serve(listener, gateway, limits, slots, std::future::pending()).await
        });
        addr
    }

    async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = self.api.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// The reservation trued up to the tokens the JSON answer states; an overspend is a
/// debt: denied (without reaching the model) until the rate has refilled it, exactly.
async fn json_costs_settle_and_debts_are_waited_out(redis: Option<&RedisServer>) {
    let model = Model::start().await;
    let weir = Weir::start(&model, "json: /usage/total_tokens", redis).await;
    assert_eq!(weir.chat_to_end("ana", "120").await, StatusCode::OK);
    weir.until_left("ana", BURST - 120).await;
    // Used none: the whole estimate comes back.
    assert_eq!(weir.chat_to_end("ana", "0").await, StatusCode::OK);
    weir.until_left("ana", BURST - 120).await;
    // A cost that is not a number keeps the estimate (500).
    assert_eq!(weir.chat_to_end("ana", "lots").await, StatusCode::OK);
    weir.until_left("ana", BURST - 620).await;
    // Reserved 500 of the 19,380 left, then 19,500 more than that: 620 owed.
    assert_eq!(weir.chat_to_end("ana", "20000").await, StatusCode::OK);
    weir.until_left("ana", 0).await;
    let calls = model.calls();
    let denied = weir.chat("ana", "1").await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // 620 owed and 500 to reserve at 10,000 a minute: 6.72 s, whole seconds up.
    assert_eq!(denied.headers()["retry-after"], "7");
    assert_eq!(denied.headers()["retry-after-ms"], "6720");
    assert_eq!(
        model.calls(),
        calls,
        "a denied request never reaches the model"
    );
    // Others are not affected.
    assert_eq!(weir.chat_to_end("bo", "10").await, StatusCode::OK);
    weir.clock.advance(Duration::from_micros(6_719_999));
    assert_eq!(
        weir.chat("ana", "1").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    weir.clock.advance(Duration::from_micros(1));
    assert_eq!(weir.chat_to_end("ana", "500").await, StatusCode::OK);
    weir.until_left("ana", 0).await;
}

#[tokio::test]
async fn json_costs_on_the_memory_store() {
    json_costs_settle_and_debts_are_waited_out(None).await;
}

#[tokio::test]
async fn json_costs_on_redis() {
    let redis = RedisServer::start();
    json_costs_settle_and_debts_are_waited_out(Some(&redis)).await;
}

#[tokio::test]
async fn a_header_settles_before_the_answer_is_returned() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "response_header: X-Tokens-Used", None).await;
    let response = weir.chat("ana", "300").await;
    assert_eq!(response.status(), StatusCode::OK);
    // Settled already: the answer's headers held the cost.
    assert_eq!(weir.left("ana").await, BURST - 300);
    for bad in ["-5", "1.5", "", "9999999999999999999999"] {
        assert_eq!(weir.chat_to_end("ana", bad).await, StatusCode::OK);
    }
    assert_eq!(
        weir.left("ana").await,
        BURST - 300 - 4 * 500,
        "unreadable costs keep the estimate"
    );
}

/// A client that hangs up before reading anything pays what the answer states: the
/// answer is read for its cost all the same.
#[tokio::test]
async fn a_client_that_hangs_up_at_once_pays_what_the_answer_states() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "json: /usage/total_tokens", None).await;
    let response = weir.chat("ana", "5").await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    weir.until_left("ana", BURST - 5).await;
}

#[tokio::test]
async fn a_service_deciding_for_itself_settles_with_the_cost() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "response_header: X-Tokens-Used", None).await;
    let facts = json!({
        "method": "POST",
        "path": "/v1/chat/completions",
        "host": "api.test",
        "headers": {"x-user-id": "ana"},
        "client_ip": "203.0.113.7",
    });
    let (status, verdict) = weir.post("/v1/decide", &facts).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(weir.left("ana").await, BURST - 500, "the estimate reserved");
    let id = verdict["settlement"].as_str().unwrap();
    let settle = json!({"settlement": id, "status": 200, "cost": 2_345});
    assert_eq!(
        weir.post("/v1/settle", &settle).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(weir.left("ana").await, BURST - 2_345);
    let (status, problem) = weir
        .post(
            "/v1/settle",
            &json!({"settlement": id, "status": 200, "cost": -1}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
}

#[tokio::test]
async fn a_trailer_settles_when_the_stream_ends() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "trailer: X-Tokens-Used", None).await;
    let (status, trailers) = weir.stream_to_end("ana", "1234").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        trailers.and_then(|t| t.get("x-tokens-used").cloned()),
        Some("1234".parse().unwrap()),
        "the trailer reaches the client"
    );
    weir.until_left("ana", BURST - 1234).await;
}

#[tokio::test]
async fn a_json_answer_over_the_bound_keeps_the_estimate() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "json: /usage/total_tokens", None).await;
    // Within the bound (3 MiB), read; over it (5 MiB), the estimate stays.
    assert_eq!(
        weir.padded_to_end("ana", "70", 3 << 20).await,
        StatusCode::OK
    );
    weir.until_left("ana", BURST - 70).await;
    assert_eq!(
        weir.padded_to_end("bo", "70", 5 << 20).await,
        StatusCode::OK
    );
    assert_eq!(weir.chat_to_end("cy", "1").await, StatusCode::OK);
    weir.until_left("cy", BURST - 1).await;
    assert_eq!(weir.left("bo").await, BURST - 500);
}

/// One HTTP/1.1 chat completion by ana over a socket, read until the server closes it.
async fn over_http1(addr: SocketAddr, headers: &str) -> String {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: api.test\r\nx-user-id: ana\r\n{headers}content-length: 2\r\nconnection: close\r\n\r\n{{}}"
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).await.unwrap();
    answer
}

/// Over real HTTP/1 a server stops reading a body of known length at its last byte, and
/// a streamed one at its trailers: both still settle.
#[tokio::test]
async fn answers_over_http1_settle_at_their_last_byte_or_trailer() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "json: /usage/total_tokens", None).await;
    let answer = over_http1(weir.listen().await, "x-use-tokens: 20000\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("content-length"),
        "{answer}"
    );
    weir.until_left("ana", 0).await;

    let weir = Weir::start(&model, "trailer: X-Tokens-Used", None).await;
    let headers = "x-use-tokens: 1234\r\nx-stream: 1\r\nte: trailers\r\n";
    let answer = over_http1(weir.listen().await, headers).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("x-tokens-used: 1234"),
        "the trailer reaches a client that takes trailers: {answer}"
    );
    weir.until_left("ana", BURST - 1234).await;
}

/// A client that leaves after the last token, before the trailer, still pays: the rest
/// of the answer is read for its cost.
#[tokio::test]
async fn hanging_up_before_the_trailer_does_not_escape_the_cost() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "trailer: X-Tokens-Used", None).await;
    for _ in 0..3 {
        let request = Request::post("/v1/chat/completions")
            .header("host", "api.test")
            .header("x-user-id", "ana")
            .header("x-use-tokens", "3000")
            .header("x-stream", "1")
            .body(Body::from("{}"))
            .unwrap();
        let response = weir
            .gateway
            .call(request, "203.0.113.7:40000".parse().unwrap())
            .await;
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap();
        assert!(first.is_data());
        drop(body);
    }
    weir.until_left("ana", BURST - 9000).await;
}

/// A stated cost beyond one bucket is owed in full, up to the rule's `max` (16 buckets
/// by default); past it, it is forgiven.
#[tokio::test]
async fn a_debt_of_several_buckets_is_owed_up_to_max() {
    let model = Model::start().await;
    let weir = Weir::start(&model, "json: /usage/total_tokens", None).await;
    // 60,000 tokens: 500 reserved, 59,500 charged: 40,000 owed, 4 minutes of refill.
    assert_eq!(weir.chat_to_end("ana", "60000").await, StatusCode::OK);
    weir.until_left("ana", 0).await;
    let denied = weir.chat("ana", "1").await;
    assert_eq!(
        denied.headers()["retry-after-ms"],
        "243000",
        "(40,000 + 500) / 10,000 a minute"
    );
    // A claim of a billion tokens owes 16 buckets (320,000), not a lifetime.
    assert_eq!(weir.chat_to_end("bo", "1000000000").await, StatusCode::OK);
    weir.until_left("bo", 0).await;
    let denied = weir.chat("bo", "1").await;
    let owed_ms = (16 * BURST - BURST + 500) * 60_000 / 10_000;
    assert_eq!(
        denied.headers()["retry-after-ms"],
        owed_ms.to_string().as_str()
    );
}

/// An answer that streams past a reload settles on the engine that reserved it.
#[tokio::test]
async fn an_answer_streaming_past_a_reload_still_settles() {
    let model = Model::start().await;
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ai-tokens.yaml");
    let text = std::fs::read_to_string(example)
        .unwrap()
        .replace("http://127.0.0.1:9000", &format!("http://{}", model.addr))
        .replace("json: /usage/total_tokens", "trailer: X-Tokens-Used");
    let text = format!("store:\n  type: memory\n{text}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ai.yaml");
    std::fs::write(&path, &text).unwrap();
    let config = Config::load(&path).unwrap();
    let clock = Arc::new(ManualClock::new(MIDNIGHT));
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let store: Arc<dyn BackingStore> = Arc::new(memory);
    let mut service =
        Instance::with_store(&config, Arc::clone(&store), clock.clone() as Arc<dyn Clock>);
    let gateway = service.gateway.clone().unwrap();
    let request = Request::post("/v1/chat/completions")
        .header("host", "api.test")
        .header("x-user-id", "ana")
        .header("x-use-tokens", "7000")
        .header("x-stream", "1")
        .body(Body::from("{}"))
        .unwrap();
    let response = gateway
        .call(request, "203.0.113.7:40000".parse().unwrap())
        .await;
    std::fs::write(&path, format!("{text}\n# touched\n")).unwrap();
    service.reload(&path).await.unwrap();
    response.into_body().collect().await.unwrap();
    let weir = Weir {
        gateway,
        api: api_router(service.engine.clone()),
        store,
        clock,
    };
    weir.until_left("ana", BURST - 7000).await;
}
