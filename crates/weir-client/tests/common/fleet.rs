//! A fleet of workers against weir's real gateway, on loopback: the upstream (an axum
//! app answering every request), weir's gateway in process in front of it (the memory
//! store or a Redis, the system clock), and workers that each have `jobs` requests to get
//! answered with a 200. Used by `tests/fleet.rs` and by the measuring example
//! `examples/fleet.rs`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
use weir_client::{Policy, RetryMiddleware};

/// The gateway's rule: one account (every loopback client), a token bucket.
pub(crate) struct Limit {
    /// Requests per second.
    pub per_second: u64,
    /// The bucket's size.
    pub burst: u64,
}

/// weir's gateway in process, in front of an upstream that answers everything.
pub(crate) struct Gateway {
    /// Where the gateway listens.
    pub addr: std::net::SocketAddr,
    /// Kept alive while the fleet runs.
    _service: weir::Instance,
}

/// Starts the upstream and the gateway, on free loopback ports, deciding on the
/// memory store, or on the Redis at `redis` (a URL).
pub(crate) async fn start_gateway(limit: &Limit, redis: Option<&str>) -> Gateway {
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let upstream_addr = upstream.local_addr().expect("address");
    let app = axum::Router::new().fallback(|| async { "done" });
    tokio::spawn(async move { axum::serve(upstream, app).await });
    let store = redis.map_or(String::new(), |url| {
        format!("store:\n  type: redis\n  url: {url}\n")
    });
    let yaml = format!(
        "{store}upstream:\n  url: http://{upstream_addr}\nrules:\n  - name: fleet\n    match: {{ path_prefix: /jobs }}\n    algorithm: token_bucket\n    limit: {}\n    period: 1s\n    burst: {}\n",
        limit.per_second, limit.burst
    );
    let config =
        weir::Config::parse(&yaml, Path::new("fleet.yaml")).expect("a valid configuration");
    let service = weir::instance(&config).await.expect("the store");
    let gateway = service
        .gateway
        .clone()
        .expect("a gateway: the configuration has an upstream");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(weir::serve(
        listener,
        gateway,
        weir::ConnectionLimits::default(),
        weir::ConnectionSlots::new("main", 1_024),
        std::future::pending(),
    ));
    Gateway {
        addr,
        _service: service,
    }
}

/// How the workers retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A refused request is sent again at once.
    Naive,
    /// Through weir-client's middleware (default policy), one client shared by the
    /// whole fleet (a worker pool in one service).
    SharedClient,
    /// Through weir-client's middleware, a client per worker (separate processes).
    ClientPerWorker,
}

/// What a fleet's run took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    /// Jobs answered with a 200.
    pub done: u64,
    /// Requests that reached the gateway.
    pub attempts: u64,
    /// Of which refused (429).
    pub refused: u64,
    /// From the first request to the last job done.
    pub elapsed: Duration,
}

/// Counts what reaches the wire, beneath any retrying.
#[derive(Default)]
struct Wire {
    attempts: AtomicU64,
    refused: AtomicU64,
}

struct Count(Arc<Wire>);

#[async_trait::async_trait]
impl Middleware for Count {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let response = next.run(request, extensions).await;
        self.0.attempts.fetch_add(1, Ordering::Relaxed);
        if response.as_ref().is_ok_and(|r| r.status() == 429) {
            self.0.refused.fetch_add(1, Ordering::Relaxed);
        }
        response
    }
}

fn client(wire: &Arc<Wire>, retrying: bool) -> ClientWithMiddleware {
    let mut builder = ClientBuilder::new(reqwest::Client::new());
    if retrying {
        builder = builder.with(RetryMiddleware::new(Policy::default()));
    }
    builder.with(Count(Arc::clone(wire))).build()
}

/// Runs `workers` workers of `jobs` jobs each against `gateway`; stops early (with
/// fewer jobs done) after `max_attempts` requests or `deadline`, so a run is bounded.
/// A job the client gives up on (its answer a 429, or a local refusal) is sent again.
pub(crate) async fn run(
    gateway: &Gateway,
    mode: Mode,
    workers: u64,
    jobs: u64,
    max_attempts: u64,
    deadline: Duration,
) -> Outcome {
    let wire = Arc::new(Wire::default());
    let done = Arc::new(AtomicU64::new(0));
    let shared = client(&wire, mode == Mode::SharedClient);
    let url = format!("http://{}/jobs", gateway.addr);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let client = match mode {
            Mode::ClientPerWorker => client(&wire, true),
            _ => shared.clone(),
        };
        let (wire, done, url) = (Arc::clone(&wire), Arc::clone(&done), url.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..jobs {
                loop {
                    if wire.attempts.load(Ordering::Relaxed) >= max_attempts
                        || start.elapsed() >= deadline
                    {
                        return;
                    }
                    let answer = client.get(&url).send().await;
                    if answer.is_ok_and(|r| r.status() == 200) {
                        done.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("a worker panicked");
    }
    Outcome {
        done: done.load(Ordering::Relaxed),
        attempts: wire.attempts.load(Ordering::Relaxed),
        refused: wire.refused.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
    }
}
