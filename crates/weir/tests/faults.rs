//! Faults under load (real processes, loopback, bounded in time): Redis killed and
//! restarted, Redis frozen with SIGSTOP and thawed, with a fail-open and a fail-closed
//! rule side by side behind the gateway.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use common::Server;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use weir_testkit::{RedisCluster, RedisServer};

/// The store's per-check timeout in this test.
const TIMEOUT: Duration = Duration::from_millis(100);
/// What a request may take beyond the timeout on this shared, loaded machine.
const MARGIN: Duration = Duration::from_millis(900);

/// One request: its status and how long it took.
async fn timed(addr: &str, path: &str) -> (u16, Duration) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let started = Instant::now();
    let request = axum::http::Request::get(format!("http://{addr}{path}"))
        .body(Body::empty())
        .unwrap();
    let status = match tokio::time::timeout(Duration::from_secs(10), client.request(request)).await
    {
        Ok(Ok(response)) => response.status().as_u16(),
        Ok(Err(_)) => 0,
        Err(_) => 1,
    };
    (status, started.elapsed())
}

/// The value of `weir_store_slots_lost` on the admin listener's `/metrics`.
async fn slots_lost(admin: &str) -> u64 {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let request = axum::http::Request::get(format!("http://{admin}/metrics"))
        .body(Body::empty())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("weir_store_slots_lost{"))
        .and_then(|rest| rest.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no weir_store_slots_lost in\n{text}"))
}

/// Waits until `slots_lost` satisfies `wanted`, for at most 5 s; the last value.
async fn until_slots_lost(admin: &str, wanted: impl Fn(u64) -> bool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lost = slots_lost(admin).await;
        if wanted(lost) || Instant::now() > deadline {
            return lost;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Requests to `path` from 4 clients for `during`; every (status, latency).
async fn load(addr: &str, path: &'static str, during: Duration) -> Vec<(u16, Duration)> {
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (addr, stop) = (addr.to_owned(), stop.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    seen.push(timed(&addr, path).await);
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(during).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for client in clients {
        all.extend(client.await.unwrap());
    }
    all
}

fn statuses(seen: &[(u16, Duration)]) -> std::collections::BTreeMap<u16, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for (status, _) in seen {
        *counts.entry(*status).or_default() += 1;
    }
    counts
}

fn slowest(seen: &[(u16, Duration)]) -> Duration {
    seen.iter().map(|(_, d)| *d).max().unwrap_or_default()
}

async fn wait_until_shared(addr: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if timed(addr, "/closed").await.0 == 200 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "limits were not shared again within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_or_frozen_fails_open_and_closed_as_configured_and_recovers() {
    let upstream = common::echo::start().await;
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    let config = common::failure_policies(&redis.url(), upstream, 5, "open");
    std::fs::write(&path, config).unwrap();
    let weir = Server::start(&path);
    let addr = weir.addr.clone();
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", weir.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Healthy: everything through, and the tight rule's shared count starts.
    for path in ["/open", "/closed"] {
        assert_eq!(
            statuses(&load(&addr, path, Duration::from_millis(300)).await)
                .keys()
                .collect::<Vec<_>>(),
            [&200],
            "{path}"
        );
    }
    assert_eq!(timed(&addr, "/tight").await.0, 200);
    let rss_before = rss();
    let open_files =
        || std::fs::read_dir(format!("/proc/{}/fd", weir.child.id())).map_or(0, |d| d.count());
    let files_before = open_files();

    // Redis killed.
    redis.kill();
    under_fault(&addr, "killed").await;
    // Fail open still limits, with the local fallback (this instance's full share: 5).
    let tight: Vec<u16> = futures_statuses(&addr, "/tight", 7).await;
    assert_eq!(
        tight,
        [200, 200, 200, 200, 200, 429, 429],
        "the fallback limits"
    );

    // Redis back: limits are shared again within seconds.
    redis.restart();
    let recovered = wait_until_shared(&addr, Duration::from_secs(10)).await;
    assert_eq!(
        timed(&addr, "/tight").await.0,
        200,
        "the shared count (1 of 5) is used again"
    );

    // Redis frozen (it hangs instead of refusing): bounded waits, the same policies.
    redis.pause();
    under_fault(&addr, "frozen").await;
    redis.resume();
    let thawed = wait_until_shared(&addr, Duration::from_secs(10)).await;
    eprintln!("recovered after restart in {recovered:?}, after thaw in {thawed:?}");
    let rss_after = rss();
    eprintln!("weir RSS: {rss_before} kB before the faults, {rss_after} kB after");
    // Connections made during the faults are closed again (a few may be pooled).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let files_after = open_files();
    eprintln!("weir open files: {files_before} before the faults, {files_after} after");
    assert!(
        files_after <= files_before + 16,
        "file descriptors grew from {files_before} to {files_after}"
    );
    assert!(
        rss_after < rss_before + 16 * 1024,
        "memory grew from {rss_before} to {rss_after} kB"
    );
    let (status, _) = timed(weir.admin.as_deref().unwrap(), "/readyz").await;
    assert_eq!(status, 200);
}

/// Load on both rules while the store is broken: fail open keeps serving, fail closed
/// answers 503 (never 429), and no request waits past the timeout and a margin.
async fn under_fault(addr: &str, phase: &str) {
    let open = load(addr, "/open", Duration::from_millis(1500)).await;
    let closed = load(addr, "/closed", Duration::from_millis(800)).await;
    assert_eq!(
        statuses(&open).keys().collect::<Vec<_>>(),
        [&200],
        "{phase}: fail open keeps serving"
    );
    assert_eq!(
        statuses(&closed).keys().collect::<Vec<_>>(),
        [&503],
        "{phase}: fail closed answers 503, never 429"
    );
    for seen in [&open, &closed] {
        assert!(
            slowest(seen) < TIMEOUT + MARGIN,
            "{phase}: slowest {:?}",
            slowest(seen)
        );
    }
    report(phase, &open, &closed);
}

/// Prints a phase's figures (for RELIABILITY.md; run with --nocapture).
fn report(phase: &str, open: &[(u16, Duration)], closed: &[(u16, Duration)]) {
    eprintln!(
        "{phase}: fail-open {} requests {:?}, slowest {:?}; fail-closed {} requests {:?}, slowest {:?}",
        open.len(),
        statuses(open),
        slowest(open),
        closed.len(),
        statuses(closed),
        slowest(closed)
    );
}

async fn futures_statuses(addr: &str, path: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(timed(addr, path).await.0);
    }
    out
}

/// A TCP proxy in front of Redis that delays every chunk by a settable number of
/// milliseconds: Redis made slow, not dead.
async fn latency_proxy(target: u16, delay_ms: Arc<std::sync::atomic::AtomicU64>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let pairs: [(
                tokio::net::tcp::OwnedReadHalf,
                tokio::net::tcp::OwnedWriteHalf,
            ); 2] = [(client_read, server_write), (server_read, client_write)];
            for (mut from, mut to) in pairs {
                let delay_ms = delay_ms.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buffer = vec![0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from.read(&mut buffer).await {
                        let delay = delay_ms.load(Ordering::Relaxed);
                        if delay > 0 {
                            tokio::time::sleep(Duration::from_millis(delay)).await;
                        }
                        if to.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_costs_at_most_the_rules_timeout_and_recovers() {
    let upstream = common::echo::start().await;
    let redis = RedisServer::start();
    let delay_ms = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let proxy = latency_proxy(redis.port(), delay_ms.clone()).await;
    let url = weir_testkit::url_on(proxy);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(
        &path,
        format!(
            "store:\n  type: redis\n  url: {url}\n  timeout: 5s\nupstream:\n  url: http://{upstream}\nrules:\n\
             \x20 - name: open\n    match: {{ path_prefix: /open }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1m\n    store_timeout: 100ms\n\
             \x20 - name: closed\n    match: {{ path_prefix: /closed }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1m\n    failure: closed\n    store_timeout: 100ms\n"
        ),
    )
    .unwrap();
    let weir = Server::start(&path);
    assert_eq!(timed(&weir.addr, "/closed").await.0, 200);

    // 1.5 s per reply: far past the rules' 100 ms (the store's own timeout is 5 s).
    delay_ms.store(1_500, Ordering::Relaxed);
    under_fault(&weir.addr, "slow").await;

    delay_ms.store(0, Ordering::Relaxed);
    let recovered = wait_until_shared(&weir.addr, Duration::from_secs(15)).await;
    eprintln!("recovered from slowness in {recovered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_primary_killed_fails_as_configured_and_recovers_when_it_rejoins() {
    let upstream = common::echo::start().await;
    let mut cluster = RedisCluster::start();
    // The other primaries go on serving their slots (else, past the node timeout,
    // they answer CLUSTERDOWN and the store is lost whole).
    for node in cluster.nodes() {
        node.cli(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
    }
    let nodes = cluster.urls().join(", ");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(
        &path,
        format!(
            "store:\n  type: redis_cluster\n  nodes: [{nodes}]\n  timeout: 100ms\nupstream:\n  url: http://{upstream}\nrules:\n\
             \x20 - name: open\n    match: {{ path_prefix: /open }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1m\n\
             \x20 - name: closed\n    match: {{ path_prefix: /closed }}\n    algorithm: gcra\n    limit: 1000000\n    period: 1m\n    failure: closed\n"
        ),
    )
    .unwrap();
    let weir = Server::start(&path);
    let admin = weir.admin.clone().unwrap();
    assert_eq!(timed(&weir.addr, "/closed").await.0, 200);
    assert_eq!(slots_lost(&admin).await, 0);

    // Kill the primary that holds this client's keys (both rules share its hash tag).
    let owner = cluster.owner_of("weir:{client_ip=127.0.0.1}:closed");
    cluster.node_mut(owner).kill();
    under_fault(&weir.addr, "cluster primary killed").await;
    // Its third of the slots, found lost while the other primaries answer; not ready.
    let lost = until_slots_lost(&admin, |n| n > 0).await;
    assert!((5000..=5600).contains(&lost), "{lost} slots lost");
    assert_eq!(timed(&admin, "/readyz").await.0, 503);

    cluster.node_mut(owner).restart();
    cluster.wait_ready(Duration::from_secs(20));
    let recovered = wait_until_shared(&weir.addr, Duration::from_secs(20)).await;
    eprintln!("recovered after the primary rejoined in {recovered:?}");
    assert_eq!(until_slots_lost(&admin, |n| n == 0).await, 0);
    assert_eq!(timed(&admin, "/readyz").await.0, 200);
}
