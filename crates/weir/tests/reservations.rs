//! Limits counted by outcome hold against concurrent guesses, clients that hang up,
//! answers that do not count, and a full store: `examples/login.yaml` run by the
//! gateway in process, on the memory store, on Redis and on a Redis Cluster, in front
//! of a real (slow) login app. Time is a manual clock (Redis with `clock: local`), so
//! lockouts are passed by moving it, never by sleeping.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use axum::response::Response;
use common::login_app::App;
use weir::Config;
use weir::Gateway;
use weir::{Handler, Instance, Reloadable};
use weir_core::{Clock, ManualClock};
use weir_store::{
    BackingStore, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget,
};
use weir_testkit::{RedisCluster, RedisServer};

/// 2026-11-30 00:00:00 UTC.
const MIDNIGHT: u64 = 1_796_083_200_000_000_000;

/// Where the gateway keeps its counts.
enum Backend {
    Memory(Option<usize>),
    Redis(RedisServer),
    Cluster(RedisCluster),
}

impl Backend {
    /// The `store:` section for the configuration.
    fn section(&self) -> String {
        match self {
            Backend::Memory(max_keys) => format!(
                "store:\n  type: memory\n  max_keys: {}\n",
                max_keys.unwrap_or(1000)
            ),
            Backend::Redis(redis) => format!(
                "store:\n  type: redis\n  url: {}\n  timeout: 2s\n  clock: local\n",
                redis.url()
            ),
            Backend::Cluster(cluster) => format!(
                "store:\n  type: redis_cluster\n  nodes: [{}]\n  timeout: 2s\n  clock: local\n",
                cluster.urls().join(", ")
            ),
        }
    }

    async fn store(&self, clock: Arc<ManualClock>) -> Arc<dyn BackingStore> {
        let redis = |target| RedisStoreConfig {
            target,
            key_prefix: "weir:test".into(),
            timeout: Duration::from_secs(2),
            clock: RedisClock::Local,
            window_counters: false,
            access: Default::default(),
        };
        match self {
            Backend::Memory(max_keys) => {
                let config = MemoryStoreConfig {
                    max_keys: max_keys.unwrap_or(1000),
                };
                Arc::new(MemoryStore::new(config, clock))
            }
            Backend::Redis(server) => Arc::new(
                RedisStore::connect(&redis(RedisTarget::Single(server.url())), clock)
                    .await
                    .unwrap(),
            ),
            Backend::Cluster(cluster) => Arc::new(
                RedisStore::connect(&redis(RedisTarget::Cluster(cluster.urls())), clock)
                    .await
                    .unwrap(),
            ),
        }
    }
}

/// The login example in front of `app`, on `backend`, in process.
struct Weir {
    gateway: Reloadable<Gateway>,
    clock: Arc<ManualClock>,
}

impl Weir {
    async fn start(backend: &Backend, app: &App) -> Self {
        Self::start_with(backend, app, "").await
    }

    /// The example with `upstream` lines added after its `url`.
    async fn start_with(backend: &Backend, app: &App, upstream: &str) -> Self {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/login.yaml");
        let text = std::fs::read_to_string(example).unwrap().replace(
            "http://127.0.0.1:9000",
            &format!("http://{}{upstream}", app.addr),
        );
        let config = Config::parse(
            &format!("{}{text}", backend.section()),
            Path::new("login.yaml"),
        )
        .unwrap();
        let clock = Arc::new(ManualClock::new(MIDNIGHT));
        let store = backend.store(clock.clone()).await;
        let service = Instance::with_store(&config, store, clock.clone() as Arc<dyn Clock>);
        Self {
            gateway: service.gateway.clone().unwrap(),
            clock,
        }
    }

    /// A login attempt for ana@example.com from the attacker's IP; returns the status.
    async fn ana(&self, password: &str) -> u16 {
        let (status, _) = self
            .attempt("203.0.113.7", "ana@example.com", password)
            .await;
        status
    }

    /// A login attempt from `ip`; returns the status and the headers.
    async fn attempt(&self, ip: &str, email: &str, password: &str) -> (u16, HeaderMap) {
        let response = self.call(ip, email, password).await;
        (response.status().as_u16(), response.headers().clone())
    }

    fn call(
        &self,
        ip: &str,
        email: &str,
        password: &str,
    ) -> impl Future<Output = Response> + Send + 'static {
        let body = format!(r#"{{"email":"{email}","password":"{password}"}}"#);
        let request = Request::post("/login")
            .header("host", "app.test")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let peer = SocketAddr::new(ip.parse::<IpAddr>().unwrap(), 40000);
        self.gateway.call(request, peer)
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

/// Waits (on other tasks, not on time) until `done` holds.
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the condition never held");
}

/// `n` attempts at once; returns their statuses once the app lets them all through.
async fn at_once(weir: &Weir, app: &App, n: usize, ip: impl Fn(usize) -> String) -> Vec<u16> {
    app.hold();
    let attempts: Vec<_> = (0..n)
        .map(|i| tokio::spawn(weir.call(&ip(i), "ana@example.com", "guess")))
        .collect();
    // Every attempt is either at the app or answered by weir before the app answers.
    until(|| app.arrived() + attempts.iter().filter(|a| a.is_finished()).count() == n).await;
    app.release();
    let mut statuses = Vec::new();
    for attempt in attempts {
        statuses.push(attempt.await.unwrap().status().as_u16());
    }
    statuses
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|&&s| s == status).count()
}

/// 40 wrong passwords for one account from one IP, all in flight at once against an
/// app that answers slowly, reach it exactly 5 times; then the pair is locked out, and
/// the lockouts grow.
async fn concurrent_guesses_from_one_ip(backend: &Backend) {
    let app = App::start().await;
    let weir = Weir::start(backend, &app).await;
    let statuses = at_once(&weir, &app, 40, |_| "203.0.113.7".into()).await;
    assert_eq!(app.arrived(), 5, "attempts that reached the app");
    assert_eq!(count(&statuses, 401), 5, "{statuses:?}");
    assert_eq!(count(&statuses, 429), 35, "{statuses:?}");

    // The fifth failure locked the pair out for the rule's period.
    let (status, headers) = weir
        .attempt("203.0.113.7", "ana@example.com", "right")
        .await;
    assert_eq!(status, 429, "even the right password waits out a lockout");
    assert_eq!(headers["retry-after"], "900");
    // The owner, from another IP, is not locked out.
    let (status, _) = weir
        .attempt("198.51.100.1", "ana@example.com", "right")
        .await;
    assert_eq!(status, 200);
    assert_eq!(app.arrived(), 6);

    // 15 minutes later the failures and the lockout have passed; five more failures
    // lock the pair out again, for twice as long.
    weir.advance(Duration::from_secs(15 * 60 + 1));
    for _ in 0..5 {
        assert_eq!(weir.ana("guess").await, 401);
    }
    let (status, headers) = weir
        .attempt("203.0.113.7", "ana@example.com", "guess")
        .await;
    assert_eq!(
        (status, &headers["retry-after"]),
        (429, &"1800".parse().unwrap())
    );
    weir.advance(Duration::from_secs(15 * 60 + 1));
    assert_eq!(
        weir.ana("guess").await,
        429,
        "the second lockout lasts 30 minutes"
    );
    weir.advance(Duration::from_secs(15 * 60));
    assert_eq!(weir.ana("guess").await, 401, "and then ends");
}

/// A botnet: 40 wrong passwords for one account from 40 IPs at once reach the app 20
/// times (the account-wide limit), and lock no one out.
async fn concurrent_guesses_from_many_ips(backend: &Backend) {
    let app = App::start().await;
    let weir = Weir::start(backend, &app).await;
    let statuses = at_once(&weir, &app, 40, |i| format!("203.0.113.{}", i + 1)).await;
    assert_eq!(app.arrived(), 20, "attempts that reached the app");
    assert_eq!(count(&statuses, 401), 20, "{statuses:?}");
    assert_eq!(count(&statuses, 429), 20, "{statuses:?}");
    // The account is slowed, not locked: as failures age, attempts go through again.
    weir.advance(Duration::from_secs(15 * 60 + 1));
    let (status, _) = weir
        .attempt("198.51.100.1", "ana@example.com", "right")
        .await;
    assert_eq!(status, 200);
}

/// Attempts whose clients hang up while the app works on them still count.
async fn hung_up_attempts_count(backend: &Backend) {
    let app = App::start().await;
    let weir = Weir::start(backend, &app).await;
    app.hold();
    let attempts: Vec<_> = (0..5)
        .map(|_| tokio::spawn(weir.call("203.0.113.7", "ana@example.com", "guess")))
        .collect();
    until(|| app.arrived() == 5).await;
    for attempt in &attempts {
        attempt.abort();
    }
    for attempt in attempts {
        assert!(attempt.await.unwrap_err().is_cancelled());
    }
    app.release();
    let (status, headers) = weir
        .attempt("203.0.113.7", "ana@example.com", "guess")
        .await;
    assert_eq!(status, 429, "{headers:?}");
    assert_eq!(app.arrived(), 5);
}

/// Answers that are not failures give their reservation back; a success clears the
/// account's failures from that IP.
async fn outcomes_that_do_not_count_are_given_back(backend: &Backend) {
    let app = App::start().await;
    let weir = Weir::start(backend, &app).await;
    for _ in 0..5 {
        assert_eq!(weir.ana("status-503").await, 503, "the app's own answer");
    }
    for _ in 0..4 {
        assert_eq!(weir.ana("guess").await, 401);
    }
    assert_eq!(weir.ana("right").await, 200);
    for _ in 0..5 {
        assert_eq!(
            weir.ana("guess").await,
            401,
            "the success cleared the earlier failures"
        );
    }
    assert_eq!(weir.ana("guess").await, 429);
}

/// A success for an account written otherwise (`ANA@…`, which an app comparing
/// exactly may hold as another account, the attacker's) resets nothing: it cannot
/// clear the failures against `ana@…`.
async fn a_success_resets_only_an_identity_written_as_keyed(backend: &Backend) {
    let app = App::start().await;
    let weir = Weir::start(backend, &app).await;
    for _ in 0..4 {
        assert_eq!(weir.ana("guess").await, 401);
    }
    let (status, _) = weir
        .attempt("203.0.113.7", "ANA@example.com", "right")
        .await;
    assert_eq!(status, 200);
    assert_eq!(weir.ana("guess").await, 401, "the fifth failure");
    assert_eq!(
        weir.ana("guess").await,
        429,
        "the earlier failures were not cleared"
    );
}

/// weir's own 504 (the app took too long) is no answer: the attempt stays counted.
#[tokio::test]
async fn attempts_the_app_never_answered_stay_counted() {
    let app = App::start().await;
    let weir = Weir::start_with(&Backend::Memory(None), &app, "\n  timeout: 50ms").await;
    app.hold();
    for _ in 0..5 {
        assert_eq!(weir.ana("guess").await, 504);
    }
    app.release();
    assert_eq!(weir.ana("guess").await, 429);
}

/// Each scenario as a test on the memory store and on a single Redis (the cluster
/// runs them all in one test below: three servers are slow to start).
macro_rules! on_memory_and_redis {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario(&super::Backend::Memory(None)).await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let server = weir_testkit::RedisServer::start();
                    super::$scenario(&super::Backend::Redis(server)).await;
                }
            )*
        }
    };
}

on_memory_and_redis!(
    concurrent_guesses_from_one_ip,
    concurrent_guesses_from_many_ips,
    hung_up_attempts_count,
    outcomes_that_do_not_count_are_given_back,
    a_success_resets_only_an_identity_written_as_keyed,
);

/// The cluster runs every scenario on one cluster (three servers are slow to start),
/// emptied between them.
#[tokio::test]
async fn cluster_login_limits_hold() {
    let backend = Backend::Cluster(RedisCluster::start());
    let flush = |backend: &Backend| {
        if let Backend::Cluster(cluster) = backend {
            for node in cluster.nodes() {
                node.cli(&["FLUSHALL"]);
            }
        }
    };
    concurrent_guesses_from_one_ip(&backend).await;
    flush(&backend);
    concurrent_guesses_from_many_ips(&backend).await;
    flush(&backend);
    hung_up_attempts_count(&backend).await;
    flush(&backend);
    outcomes_that_do_not_count_are_given_back(&backend).await;
    flush(&backend);
    a_success_resets_only_an_identity_written_as_keyed(&backend).await;
}

/// A full memory store refuses new keys with a 503 and forwards nothing: a counted
/// rule never lets a request through uncounted.
#[tokio::test]
async fn a_full_store_forwards_nothing_uncounted() {
    let app = App::start().await;
    // Each new email from one IP needs two new keys (account+IP, account); the IP's
    // own key is shared.
    let weir = Weir::start(&Backend::Memory(Some(5)), &app).await;
    let (status, _) = weir.attempt("203.0.113.7", "a@example.com", "guess").await;
    assert_eq!(status, 401);
    let (status, _) = weir.attempt("203.0.113.7", "b@example.com", "guess").await;
    assert_eq!(status, 401);
    assert_eq!(app.arrived(), 2);
    for email in ["c@example.com", "d@example.com"] {
        let (status, headers) = weir.attempt("203.0.113.7", email, "guess").await;
        assert_eq!(status, 503, "{headers:?}");
    }
    assert_eq!(app.arrived(), 2, "nothing uncounted reached the app");
    // Known keys keep working.
    let (status, _) = weir.attempt("203.0.113.7", "a@example.com", "guess").await;
    assert_eq!(status, 401);
}
