//! Settlements the shared store could not take when they were made (issue 37): kept by
//! the instance, bounded, written when Redis answers again, never twice. On a real
//! `redis-server`, killed and restarted on its port, or frozen (SIGSTOP) so that a
//! settlement it writes later times out first. Through `/v1/decide` and `/v1/settle`;
//! the engine owes them, so every door does the same.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use weir::{Config, Instance, api_router};
use weir_core::{Algorithm, ManualClock, Policy};
use weir_store::{
    Breaker, BreakerConfig, Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store,
    SystemClock,
};
use weir_testkit::{RedisSentinels, RedisServer};

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

/// A day's budget, so that nothing refills while a test runs.
const TOKENS: u64 = 1_000;

/// The store's timeout.
const TIMEOUT: Duration = Duration::from_millis(200);

/// Two rules: tokens priced by the answer (`cost_from`, 100 reserved up front), and
/// failed logins counted by outcome (a 200 gives the unit back); and two never
/// limited, one on `/open` failing open, one on `/closed` failing closed.
fn config(redis: &RedisServer, max_owed: usize) -> Config {
    Config::parse(&config_text(redis, max_owed), Path::new("owed.yaml")).unwrap()
}

fn config_text(redis: &RedisServer, max_owed: usize) -> String {
    config_text_on(
        &format!("  type: redis\n  url: {}\n", redis.url()),
        max_owed,
    )
}

/// [`config_text`] on the store of `store`'s (indented) lines.
fn config_text_on(store: &str, max_owed: usize) -> String {
    format!(
        r"store:
{store}  timeout: 200ms
settlements:
  max_owed: {max_owed}
identities:
  user:
    header: X-User-Id
rules:
  - name: tokens
    match: {{ methods: [POST], path: /v1/chat }}
    key: [user]
    algorithm: token_bucket
    limit: {TOKENS}
    period: 1d
    cost: 100
    cost_from: {{ response_header: X-Tokens-Used }}
  - name: failed-logins
    match: {{ methods: [POST], path: /login }}
    key: [user]
    algorithm: token_bucket
    limit: 10
    period: 1d
    count_statuses: [401]
  - name: open
    match: {{ path: /open }}
    algorithm: gcra
    limit: 1000000
    period: 1m
    failure: open
  - name: closed
    match: {{ path: /closed }}
    algorithm: gcra
    limit: 1000000
    period: 1m
    failure: closed
"
    )
}

struct Weir {
    instance: Instance,
    api: Router,
}

impl Weir {
    async fn start(redis: &RedisServer, max_owed: usize) -> Self {
        Self::start_on(&config(redis, max_owed)).await
    }

    async fn start_on(config: &Config) -> Self {
        let instance = weir::instance(config).await.unwrap();
        let api = api_router(instance.engine.clone());
        Self { instance, api }
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

    /// Decides `user`'s request to `path`; its settlement's id.
    async fn decide(&self, path: &str, user: &str) -> String {
        let (status, verdict) = self.decision(path, user).await;
        assert_eq!(status, StatusCode::OK, "{verdict}");
        verdict["settlement"].as_str().unwrap().to_owned()
    }

    /// The answer of `/v1/decide` for `user`'s request to `path`.
    async fn decision(&self, path: &str, user: &str) -> (StatusCode, Value) {
        let facts = json!({
            "method": "POST",
            "path": path,
            "host": "api.test",
            "headers": {"x-user-id": user},
            "client_ip": "203.0.113.7",
        });
        self.post("/v1/decide", &facts).await
    }

    async fn settle(&self, settlement: &str, status: u16, cost: Option<u64>) {
        let mut body = json!({"settlement": settlement, "status": status});
        if let Some(cost) = cost {
            body["cost"] = json!(cost);
        }
        let (answer, problem) = self.post("/v1/settle", &body).await;
        assert_eq!(answer, StatusCode::NO_CONTENT, "{problem}");
    }

    /// A series' value in `/metrics` (0 when absent).
    fn metric(&self, series: &str) -> u64 {
        self.instance
            .metrics
            .encode()
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    /// Waits until weir's health loop has seen the store go (10 s at most).
    async fn until_store_down(&self) {
        self.until_store(false, "weir never saw Redis go").await;
    }

    /// Waits until weir's health loop has found the store (10 s at most).
    async fn until_store_up(&self) {
        self.until_store(true, "weir never connected").await;
    }

    async fn until_store(&self, ready: bool, never: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.instance.engine.current().store().is_ready() != ready {
            assert!(Instant::now() < deadline, "{never}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until nothing is owed (10 s at most).
    async fn until_nothing_owed(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.metric("weir_settlements_owed") > 0 {
            assert!(
                Instant::now() < deadline,
                "the owed settlements were not written after Redis came back"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What `user` has left under `rule` (`limit` a day), read from Redis itself.
async fn left(redis: &RedisServer, rule: &str, limit: u64, user: &str) -> u64 {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(redis.url()),
        key_prefix: "weir".into(),
        timeout: Duration::from_secs(2),
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    };
    let store = RedisStore::connect(&config, Arc::new(SystemClock::new()))
        .await
        .unwrap();
    let policy = Policy::new(
        Algorithm::TokenBucket,
        limit,
        Duration::from_secs(86_400),
        None,
    )
    .unwrap();
    let identity = format!("user={user}");
    let key = Key {
        rule,
        identity: &identity,
    };
    store.check(key, &policy, 0).await.unwrap().remaining
}

/// A charge (`cost_from`) and a refund (counted by outcome) settled while Redis is
/// down are written when it is back (the keys' counts prove it); past
/// `settlements.max_owed` the oldest is given up and counted; at shutdown what is
/// still owed is counted and given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_settled_while_redis_is_down_is_written_when_it_is_back() {
    // Persistent, so that the reservations made before the kill survive it.
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let port = redis.port();
    let weir = Weir::start(&redis, 2).await;
    let cy = weir.decide("/v1/chat", "cy").await;
    let ana = weir.decide("/v1/chat", "ana").await;
    let bo = weir.decide("/login", "bo").await;
    assert_eq!(left(&redis, "tokens", TOKENS, "ana").await, TOKENS - 100);
    assert_eq!(left(&redis, "failed-logins", 10, "bo").await, 9);

    redis.kill();
    // Once weir has seen Redis go (else a retry of the first may be in flight while
    // the others come, and the bound is met only when it fails again).
    weir.until_store_down().await;
    // The oldest: pushed out by the two after it (max_owed 2).
    weir.settle(&cy, 200, Some(400)).await;
    weir.settle(&ana, 200, Some(600)).await;
    weir.settle(&bo, 200, None).await;
    let everything = weir.instance.metrics.encode();
    let settlements: Vec<&str> = everything
        .lines()
        .filter(|l| l.starts_with("weir_settlements") || l.starts_with("weir_store_errors"))
        .collect();
    assert_eq!(weir.metric("weir_settlements_owed"), 2, "{settlements:#?}");
    assert_eq!(
        weir.metric(r#"weir_settlements_dropped_total{reason="full"}"#),
        1,
        "{settlements:#?}"
    );
    // A reload keeps what is owed (under a larger bound: nothing more given up).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(&path, config_text(&redis, 5)).unwrap();
    let mut weir = weir;
    weir.instance.reload(&path).await.unwrap();
    assert_eq!(weir.metric("weir_settlements_owed"), 2);

    redis.restart();
    assert_eq!(
        redis.port(),
        port,
        "redis-server did not come back on its port"
    );
    weir.until_nothing_owed().await;
    assert_eq!(
        left(&redis, "tokens", TOKENS, "ana").await,
        TOKENS - 600,
        "ana's 500 tokens beyond the estimate charged"
    );
    assert_eq!(
        left(&redis, "failed-logins", 10, "bo").await,
        10,
        "bo's login given back"
    );
    assert_eq!(
        left(&redis, "tokens", TOKENS, "cy").await,
        TOKENS - 100,
        "cy's settlement was given up: only the estimate"
    );
    assert_eq!(
        weir.metric(r#"weir_settlements_retried_total{outcome="written"}"#),
        2
    );

    // Stopping while Redis is down: tried once more, then given up and counted.
    let dee = weir.decide("/v1/chat", "dee").await;
    redis.kill();
    weir.settle(&dee, 200, Some(300)).await;
    assert_eq!(weir.metric("weir_settlements_owed"), 1);
    let engine = weir.instance.engine.current();
    assert_eq!(engine.settle_owed(Duration::from_secs(1)).await, 1);
    assert_eq!(
        weir.metric(r#"weir_settlements_dropped_total{reason="shutdown"}"#),
        1
    );
    assert_eq!(weir.metric("weir_settlements_owed"), 0);
}

/// A settlement that times out because Redis is frozen is written by Redis when it
/// thaws; sent again, it is found written and not written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_written_after_its_timeout_is_not_written_twice() {
    let redis = RedisServer::start();
    let weir = Weir::start(&redis, 100).await;
    let eve = weir.decide("/v1/chat", "eve").await;
    redis.pause();
    // Sent to the frozen server, which will run it when it thaws: no answer within
    // the store's 200 ms, so it is owed.
    weir.settle(&eve, 200, Some(600)).await;
    assert_eq!(weir.metric("weir_settlements_owed"), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.resume();
    weir.until_nothing_owed().await;
    assert_eq!(
        left(&redis, "tokens", TOKENS, "eve").await,
        TOKENS - 600,
        "eve's 500 tokens beyond the estimate charged once"
    );
    assert_eq!(
        weir.metric(r#"weir_settlements_retried_total{outcome="repeated"}"#),
        1,
        "the try that timed out had been written"
    );
    assert_eq!(
        weir.metric(r#"weir_settlements_retried_total{outcome="written"}"#),
        0
    );
}

/// `weir serve` stopped by SIGTERM while Redis is down sends what it owes once more,
/// then logs how many settlements it gives up.
#[test]
fn sigterm_logs_the_settlements_still_owed() {
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(&path, config_text(&redis, 100)).unwrap();
    let log_path = dir.path().join("weir.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut weir = common::Server::start_with(&path, &[], Stdio::from(log));
    let facts = json!({
        "method": "POST",
        "path": "/v1/chat",
        "host": "api.test",
        "headers": {"x-user-id": "fay"},
        "client_ip": "203.0.113.7",
    });
    let (status, verdict) = weir.request("POST", "/v1/decide", &facts.to_string());
    assert!(status.contains("200"), "{status}: {verdict}");
    let verdict: Value = serde_json::from_str(&verdict).unwrap();
    redis.kill();
    let settle = json!({"settlement": verdict["settlement"], "status": 200, "cost": 300});
    let (status, answer) = weir.request("POST", "/v1/settle", &settle.to_string());
    assert!(status.contains("204"), "{status}: {answer}");
    let term = Command::new("kill")
        .args(["-TERM", &weir.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(status) = weir.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "weir did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("settlements still owed") && l.contains("settlements=1")),
        "no line with the settlements given up:\n{log}"
    );
}

/// A settlement whose try may have been written longer ago than Redis remembers
/// settlements (4 minutes on the engine's clock, here a manual one) is given up, not
/// sent again: Redis wrote it itself when it thawed, and a second write could not
/// be told from the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_that_may_have_been_written_too_long_ago_is_given_up() {
    let redis = RedisServer::start();
    let config = config(&redis, 100);
    let clock = Arc::new(ManualClock::new(MIDNIGHT));
    let redis_config = RedisStoreConfig {
        target: RedisTarget::Single(redis.url()),
        key_prefix: "weir".into(),
        timeout: TIMEOUT,
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    };
    let store = RedisStore::start(&redis_config, clock.clone());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let health = store.health();
    let primary = Arc::new(Breaker::new(store, BreakerConfig::default()).following(health));
    let instance = Instance::with_store(&config, primary, clock.clone());
    let api = api_router(instance.engine.clone());
    let weir = Weir { instance, api };
    let gus = weir.decide("/v1/chat", "gus").await;
    redis.pause();
    weir.settle(&gus, 200, Some(600)).await;
    assert_eq!(weir.metric("weir_settlements_owed"), 1);
    clock.advance(Duration::from_secs(300));
    redis.resume();
    weir.until_nothing_owed().await;
    assert_eq!(
        weir.metric(r#"weir_settlements_dropped_total{reason="stale"}"#),
        1
    );
    assert_eq!(
        left(&redis, "tokens", TOKENS, "gus").await,
        TOKENS - 600,
        "written once, by Redis as it thawed"
    );
    for outcome in ["written", "repeated"] {
        let series = format!(r#"weir_settlements_retried_total{{outcome="{outcome}"}}"#);
        assert_eq!(weir.metric(&series), 0, "{outcome}");
    }
}

/// Across a Sentinel failover (the primary killed): a charge (`cost_from`) and a
/// refund (counted by outcome) settled after the kill and before the sentinels
/// promote the replica are kept, and written once on the new primary; meanwhile a
/// fail-closed rule answers 503 and a fail-open one admits, neither waiting past the
/// store's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_settled_during_a_sentinel_failover_is_written_once_on_the_new_primary() {
    let mut set = RedisSentinels::start();
    let dir = tempfile::tempdir().unwrap();
    let store = common::sentinel_store(&set, dir.path());
    let config =
        Config::parse(&config_text_on(&store, 100), &dir.path().join("owed.yaml")).unwrap();
    let weir = Weir::start_on(&config).await;
    weir.until_store_up().await;
    let old = set.primary_port();
    let ana = weir.decide("/v1/chat", "ana").await;
    let bo = weir.decide("/login", "bo").await;
    // The replica has both reservations before its primary dies.
    let acknowledged = set.server(old).cli(&["WAIT", "1", "2000"]);
    assert_eq!(acknowledged.trim(), "1", "the replica did not sync");

    set.server_on(old).kill();
    let killed = Instant::now();
    weir.until_store_down().await;
    let settled = killed.elapsed();
    weir.settle(&ana, 200, Some(600)).await;
    weir.settle(&bo, 200, None).await;
    assert_eq!(weir.metric("weir_settlements_owed"), 2);
    // No primary: each rule's failure policy, at once or within the store's timeout.
    for (path, expected) in [
        ("/closed", StatusCode::SERVICE_UNAVAILABLE),
        ("/open", StatusCode::OK),
    ] {
        let asked = Instant::now();
        let (status, verdict) = weir.decision(path, "cy").await;
        let took = asked.elapsed();
        assert_eq!(status, expected, "{path}: {verdict}");
        if status == StatusCode::OK {
            assert_eq!(verdict["allowed"], true, "{path}: {verdict}");
        }
        assert!(
            took < TIMEOUT + Duration::from_millis(300),
            "{path} took {took:?}, past the store's timeout"
        );
    }
    assert_eq!(
        set.primary_port(),
        old,
        "the sentinels promoted the replica before the settlements were made"
    );

    // The sentinels promote the replica (1.4-1.7 s after the kill); weir follows and
    // writes what it owes there.
    let deadline = Instant::now() + Duration::from_secs(15);
    while set.primary_port() == old {
        assert!(
            Instant::now() < deadline,
            "the sentinels promoted no replica"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let switched = killed.elapsed();
    weir.until_nothing_owed().await;
    eprintln!(
        "after the kill: settled at {settled:?}, the sentinels switched at {switched:?}, \
         nothing owed at {:?}",
        killed.elapsed()
    );
    let new = set.server(set.primary_port());
    assert_eq!(
        left(new, "tokens", TOKENS, "ana").await,
        TOKENS - 600,
        "ana's 500 tokens beyond the estimate charged once, on the new primary"
    );
    assert_eq!(
        left(new, "failed-logins", 10, "bo").await,
        10,
        "bo's login given back on the new primary"
    );
    assert_eq!(
        weir.metric(r#"weir_settlements_retried_total{outcome="written"}"#),
        2
    );
    assert_eq!(
        weir.metric(r#"weir_settlements_retried_total{outcome="repeated"}"#),
        0
    );
    for outcome in ["full", "stale", "shutdown"] {
        let series = format!(r#"weir_settlements_dropped_total{{reason="{outcome}"}}"#);
        assert_eq!(weir.metric(&series), 0, "{outcome}");
    }
    // The limits are shared again: the fail-closed rule decides on the new primary.
    weir.until_store_up().await;
    let (status, verdict) = weir.decision("/closed", "cy").await;
    assert_eq!(status, StatusCode::OK, "{verdict}");
}
