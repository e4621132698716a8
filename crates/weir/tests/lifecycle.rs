//! A running weir's life: reloading the configuration under load (on SIGHUP and when
//! the file changes; an invalid file is refused and the old configuration keeps
//! serving; requests in flight are not dropped), and stopping on SIGTERM after the
//! requests in flight.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use common::Server;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

/// An upstream whose `/slow` answers 2 s after it arrives; each arrival is announced on
/// the returned channel, so that a test knows a request is in flight.
async fn start_upstream() -> (std::net::SocketAddr, mpsc::UnboundedReceiver<()>) {
    let (arrived, arrivals) = mpsc::unbounded_channel();
    let app = Router::new()
        .route(
            "/slow",
            get(move || async move {
                let _ = arrived.send(());
                tokio::time::sleep(Duration::from_secs(2)).await;
                "late"
            }),
        )
        .fallback(|| async { "ok" });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, arrivals)
}

/// How many reloads with `result` the weir at `admin` has counted (`/metrics`).
async fn reloads(admin: &str, result: &str) -> u64 {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let request = axum::http::Request::get(format!("http://{admin}/metrics"))
        .body(Body::empty())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let body = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20)
        .await
        .unwrap();
    let series = format!("weir_config_reloads_total{{result=\"{result}\"}} ");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|line| line.strip_prefix(&series)?.parse().ok())
        .unwrap_or(0)
}

/// Waits until the weir at `admin` has counted more than `before` reloads with
/// `result`.
async fn wait_for_reload(admin: &str, result: &str, before: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while reloads(admin, result).await <= before {
        assert!(Instant::now() < deadline, "no {result} reload was counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn write_config(path: &Path, upstream: std::net::SocketAddr, limit: u64) {
    let text = format!(
        "upstream:\n  url: http://{upstream}\nrules:\n  - name: api\n    match: {{ path_prefix: / }}\n    algorithm: gcra\n    limit: {limit}\n    period: 1m\n"
    );
    // Write beside, then rename: a reader never sees half a file.
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

/// GET `path`; the status and the RateLimit-Policy field.
async fn get_path(addr: &str, path: &str) -> Result<(u16, String), String> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let request = axum::http::Request::get(format!("http://{addr}{path}"))
        .body(Body::empty())
        .unwrap();
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    let policy = response
        .headers()
        .get("ratelimit-policy")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    Ok((response.status().as_u16(), policy))
}

async fn wait_for_policy(addr: &str, want: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let (_, policy) = get_path(addr, "/x").await.unwrap();
        if policy == want {
            return;
        }
        assert!(Instant::now() < deadline, "still {policy}, wanted {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hangup(server: &Server) {
    let status = Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_without_dropping_requests() {
    let (upstream, _arrivals) = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    write_config(&path, upstream, 100_000);
    let weir = Server::start(&path);
    let addr = weir.addr.clone();
    let admin = weir.admin.clone().unwrap();

    // Steady load from 8 clients, each recording anything that is not a 200 or 429.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let load: Vec<_> = (0..8)
        .map(|_| {
            let (addr, stop, sent) = (addr.clone(), stop.clone(), sent.clone());
            tokio::spawn(async move {
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match get_path(&addr, "/x").await {
                        Ok((200 | 429, _)) => {}
                        other => failures.push(format!("{other:?}")),
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                failures
            })
        })
        .collect();
    // A slow request in flight across every reload.
    let slow = tokio::spawn({
        let addr = addr.clone();
        async move { get_path(&addr, "/slow").await }
    });

    wait_for_policy(&addr, "\"api\";q=100000;w=60", Duration::from_secs(5)).await;
    // SIGHUP.
    write_config(&path, upstream, 200_000);
    hangup(&weir);
    wait_for_policy(&addr, "\"api\";q=200000;w=60", Duration::from_secs(5)).await;
    // An invalid file is refused; the old configuration keeps serving.
    let refused = reloads(&admin, "refused").await;
    std::fs::write(&path, "rules:\n  - name: api\n    limit: 0\n").unwrap();
    hangup(&weir);
    // Once the refusal is counted, the reload has been tried and refused.
    wait_for_reload(&admin, "refused", refused, Duration::from_secs(5)).await;
    assert_eq!(
        get_path(&addr, "/x").await.unwrap().1,
        "\"api\";q=200000;w=60"
    );
    // A changed file is picked up without a signal.
    write_config(&path, upstream, 300_000);
    wait_for_policy(&addr, "\"api\";q=300000;w=60", Duration::from_secs(5)).await;

    stop.store(true, Ordering::Relaxed);
    for task in load {
        let failures = task.await.unwrap();
        assert!(failures.is_empty(), "{failures:?}");
    }
    assert!(sent.load(Ordering::Relaxed) > 100, "the load ran");
    assert_eq!(
        slow.await.unwrap(),
        Ok((200, "\"api\";q=100000;w=60".to_owned())),
        "the request in flight finished on the configuration it started with"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_requests_in_flight_then_exits() {
    let (upstream, mut arrivals) = start_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    write_config(&path, upstream, 1_000);
    let mut weir = Server::start(&path);
    let addr = weir.addr.clone();
    let slow = tokio::spawn(async move { get_path(&addr, "/slow").await });
    // In flight once the upstream has it.
    arrivals.recv().await.unwrap();
    let status = Command::new("kill")
        .args(["-TERM", &weir.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // New connections are refused soon after...
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(&weir.addr).is_ok() {
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ... while the request in flight completes, and then the process exits cleanly.
    assert_eq!(slow.await.unwrap().map(|(status, _)| status), Ok(200));
    wait_for_clean_exit(&mut weir).await;
}

/// Waits up to 10 s for `server` to exit, and asserts that it exited cleanly (not
/// killed by a signal).
async fn wait_for_clean_exit(server: &mut Server) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return;
        }
        assert!(Instant::now() < deadline, "weir did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Once weir says that it listens, it may have requests in flight: a SIGTERM from then
/// on stops it gracefully, never by the signal's default action (which killed it, with
/// the requests it was answering, when it came before weir listened for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_as_soon_as_weir_listens_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    // No upstream needs to be there: weir only starts and stops.
    write_config(&path, "127.0.0.1:9".parse().unwrap(), 1_000);
    for _ in 0..20 {
        let mut weir = Server::start(&path);
        let status = Command::new("kill")
            .args(["-TERM", &weir.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        wait_for_clean_exit(&mut weir).await;
    }
}

/// Likewise, a SIGHUP as soon as weir says that it listens reloads the configuration
/// rather than killing the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_as_soon_as_weir_listens_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    write_config(&path, "127.0.0.1:9".parse().unwrap(), 1_000);
    for _ in 0..50 {
        let weir = Server::start(&path);
        hangup(&weir);
        let admin = weir.admin.clone().unwrap();
        wait_for_reload(&admin, "ok", 0, Duration::from_secs(5)).await;
    }
}
