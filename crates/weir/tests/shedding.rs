//! Load shedding by priority, end to end: weir's gateway in process (the real clock,
//! loopback) in front of an upstream that serves 4 requests at a time, 20 ms each
//! (200 a second) and queues the rest, pushed past its capacity by a sheddable route
//! while a critical route keeps a steady rate. Open loop: requests are sent on a
//! schedule, whatever the answers, as independent callers do.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Mutex, Semaphore};

/// An upstream serving `workers` requests at once, `work` each, queueing the rest.
async fn start_upstream(workers: usize, work: Duration) -> SocketAddr {
    let permits = Arc::new(Semaphore::new(workers));
    let app = axum::Router::new().fallback(move || {
        let permits = Arc::clone(&permits);
        async move {
            let _permit = permits.acquire().await.unwrap();
            tokio::time::sleep(work).await;
            "done"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The gateway in front of `upstream`, shedding or not.
async fn start_gateway(upstream: SocketAddr, shedding: bool) -> (SocketAddr, weir::Instance) {
    let shedding = if shedding {
        "shedding:\n  routes:\n    - { path_prefix: /checkout, priority: critical }\n    - { path_prefix: /analytics, priority: sheddable }\n"
    } else {
        ""
    };
    let sections = format!(
        "{shedding}rules:\n  - name: roomy\n    match: {{ path_prefix: /checkout }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1s\n"
    );
    start_gateway_with(upstream, &sections).await
}

/// The gateway in front of `upstream`, with these sections after `upstream`.
async fn start_gateway_with(upstream: SocketAddr, sections: &str) -> (SocketAddr, weir::Instance) {
    let yaml = format!("upstream:\n  url: http://{upstream}\n  timeout: 10s\n{sections}");
    let config = weir::Config::parse(&yaml, Path::new("shedding.yaml")).unwrap();
    let service = weir::instance(&config).await.unwrap();
    let gateway = service.gateway.clone().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(weir::serve(
        listener,
        gateway,
        weir::ConnectionLimits::default(),
        weir::ConnectionSlots::new("main", 1_024),
        std::future::pending(),
    ));
    (addr, service)
}

/// What one route's requests got over a phase.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    shed: u64,
    other: u64,
    latencies: Vec<Duration>,
}

impl Tally {
    fn sent(&self) -> u64 {
        self.ok + self.shed + self.other
    }

    fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        sorted
            .get((sorted.len().saturating_sub(1) * 99) / 100)
            .copied()
            .unwrap_or_default()
    }
}

/// Sends to `path` at `per_second` for `length`; counts what each request got.
async fn drive(
    gateway: SocketAddr,
    path: &'static str,
    per_second: u64,
    length: Duration,
) -> Tally {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / per_second as u32);
    let start = Instant::now();
    let mut requests = Vec::new();
    while start.elapsed() < length {
        ticks.tick().await;
        let (client, tally) = (client.clone(), Arc::clone(&tally));
        requests.push(tokio::spawn(async move {
            let request = Request::get(format!("http://{gateway}{path}"))
                .body(Body::empty())
                .unwrap();
            let sent = Instant::now();
            let answer =
                tokio::time::timeout(Duration::from_secs(10), client.request(request)).await;
            let took = sent.elapsed();
            let mut tally = tally.lock().await;
            match answer {
                Ok(Ok(response)) if response.status() == 200 => {
                    tally.ok += 1;
                    tally.latencies.push(took);
                }
                Ok(Ok(response)) if response.status() == 503 => tally.shed += 1,
                _ => tally.other += 1,
            }
        }));
    }
    for request in requests {
        request.await.unwrap();
    }
    Arc::try_unwrap(tally).unwrap().into_inner()
}

/// Critical at `critical` a second and sheddable at `sheddable` a second, together.
async fn phase(
    gateway: SocketAddr,
    (critical, sheddable): (u64, u64),
    length: Duration,
) -> (Tally, Tally) {
    tokio::join!(
        drive(gateway, "/checkout", critical, length),
        drive(gateway, "/analytics", sheddable, length)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_critical_route_keeps_its_success_and_latency_while_sheddable_goes_first() {
    // Without shedding (an upstream of its own): 440 a second into 200 a second, and
    // the queue grows.
    let upstream = start_upstream(4, Duration::from_millis(20)).await;
    let (plain, _plain) = start_gateway(upstream, false).await;
    let (critical_plain, _) = phase(plain, (40, 400), Duration::from_secs(4)).await;
    eprintln!(
        "without shedding: critical {} ok of {}, p99 {:?}",
        critical_plain.ok,
        critical_plain.sent(),
        critical_plain.p99()
    );

    let upstream = start_upstream(4, Duration::from_millis(20)).await;
    let (gateway, service) = start_gateway(upstream, true).await;
    let (critical, sheddable) = phase(gateway, (40, 400), Duration::from_secs(6)).await;
    eprintln!(
        "with shedding: critical {} ok of {} (p99 {:?}); sheddable {} ok, {} shed of {} (p99 {:?})",
        critical.ok,
        critical.sent(),
        critical.p99(),
        sheddable.ok,
        sheddable.shed,
        sheddable.sent(),
        sheddable.p99()
    );
    assert!(
        critical.ok as f64 >= 0.99 * critical.sent() as f64,
        "{critical:?}"
    );
    // Latency against the same load without shedding, in the same run (a ratio, not
    // a time: the machine may be busy).
    assert!(
        critical_plain.p99() >= critical.p99() * 3,
        "shedding made the difference: {:?} against {:?}",
        critical_plain.p99(),
        critical.p99()
    );
    assert!(
        sheddable.shed * 3 >= sheddable.sent(),
        "{} shed of {}",
        sheddable.shed,
        sheddable.sent()
    );
    assert_eq!(
        sheddable.other, 0,
        "shed at the door (503), not failed upstream"
    );
    // The metrics count each shed request by route and priority, and show the limit.
    let metrics = service.metrics.encode();
    let sample = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
    };
    let shed =
        sample(r#"weir_gateway_shed_requests_total{route="/analytics",priority="sheddable"}"#);
    assert_eq!(shed as u64, sheddable.shed);
    assert!(
        !metrics.contains(r#"priority="critical""#),
        "no critical request was shed"
    );
    let limit = sample("weir_gateway_concurrency_limit");
    assert!((4.0..=1000.0).contains(&limit), "{limit}");
    eprintln!("the limit after the overload: {limit}");

    // Load drops to a fifth of the capacity: after three seconds, nothing is shed.
    phase(gateway, (20, 20), Duration::from_secs(3)).await;
    let (critical, sheddable) = phase(gateway, (20, 20), Duration::from_secs(3)).await;
    eprintln!(
        "after the load drops: critical {} shed, sheddable {} shed of {}",
        critical.shed,
        sheddable.shed,
        sheddable.sent()
    );
    assert_eq!(
        critical.shed + sheddable.shed,
        0,
        "{critical:?} {sheddable:?}"
    );
}

/// Priorities given on the rules' own `match` shed as shedding routes' do, counted in
/// the metrics under the rule's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_match_gives_its_requests_their_priority() {
    let upstream = start_upstream(4, Duration::from_millis(20)).await;
    let rule = |name: &str, path: &str, priority: &str| {
        format!(
            "  - name: {name}\n    match: {{ path_prefix: {path}, priority: {priority} }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1s\n"
        )
    };
    let sections = format!(
        "shedding:\n  min_limit: 2\nrules:\n{}{}",
        rule("checkout", "/checkout", "critical"),
        rule("analytics", "/analytics", "sheddable")
    );
    let (gateway, service) = start_gateway_with(upstream, &sections).await;
    let (critical, sheddable) = phase(gateway, (40, 400), Duration::from_secs(4)).await;
    eprintln!(
        "by rules: critical {critical:?}; sheddable {} shed of {}",
        sheddable.shed,
        sheddable.sent()
    );
    assert!(
        critical.ok as f64 >= 0.99 * critical.sent() as f64,
        "{critical:?}"
    );
    assert!(
        sheddable.shed * 3 >= sheddable.sent(),
        "{} shed of {}",
        sheddable.shed,
        sheddable.sent()
    );
    let metrics = service.metrics.encode();
    let series = r#"weir_gateway_shed_requests_total{route="analytics",priority="sheddable"}"#;
    let shed: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {metrics}"));
    assert_eq!(shed as u64, sheddable.shed);
}

/// A rule for some plans cannot give a priority: the gateway sheds before it knows a
/// caller's plan, so every plan's requests would take it.
#[test]
fn a_rule_for_some_plans_gives_no_priority() {
    let yaml = "upstream: { url: http://127.0.0.1:9 }\nshedding: { min_limit: 2 }\nplans:\n  header: X-Plan\n  default: free\nrules:\n  - { name: gold, match: { path_prefix: /reports, priority: critical }, plans: [enterprise], algorithm: gcra, limit: 100, period: 1s }\n";
    let refused = weir::Config::parse(yaml, Path::new("shedding.yaml")).unwrap_err();
    assert!(
        refused.to_string().contains("rules[0].match.priority"),
        "{refused}"
    );
}
