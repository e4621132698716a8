//! `algorithm: concurrency` on the real binary: at most `limit` requests of a key in
//! flight, observed at a slow upstream; slots released when the answer has been sent
//! and when clients hang up; given back when another rule denies; and on Redis,
//! shared by two instances, a killed instance's slots free within the stated bound.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Server;
use weir_testkit::RedisServer;

/// A slow upstream: a request whose path holds `hold` waits until the gate opens;
/// it counts the requests in its hands, and the most at once.
struct Upstream {
    addr: SocketAddr,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    /// The `x-n` of each request held, in order of arrival.
    arrived: Arc<std::sync::Mutex<Vec<usize>>>,
    gate: tokio::sync::watch::Sender<bool>,
}

struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Upstream {
    fn start() -> Self {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (gate, open) = tokio::sync::watch::channel(false);
        let arrived = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (counting, highest) = (Arc::clone(&in_flight), Arc::clone(&most));
        let arrivals = Arc::clone(&arrived);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let app = axum::Router::new().fallback(
                    move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
                        let (counting, highest, mut open) =
                            (Arc::clone(&counting), Arc::clone(&highest), open.clone());
                        let arrivals = Arc::clone(&arrivals);
                        async move {
                            let now = counting.fetch_add(1, Ordering::SeqCst) + 1;
                            highest.fetch_max(now, Ordering::SeqCst);
                            let _counted = Counted(counting);
                            if uri.path().contains("hold") {
                                let n = headers
                                    .get("x-n")
                                    .and_then(|v| v.to_str().ok()?.parse().ok())
                                    .unwrap_or(usize::MAX);
                                arrivals.lock().unwrap().push(n);
                                let _ = open.wait_for(|open| *open).await;
                            }
                            "done"
                        }
                    },
                );
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self {
            addr: rx.recv().unwrap(),
            in_flight,
            most,
            arrived,
            gate,
        }
    }

    /// Waits (for at most 10 s) until `n` requests to hold have arrived; returns
    /// their `x-n`.
    fn wait_arrived(&self, n: usize) -> Vec<usize> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let arrived = self.arrived.lock().unwrap().clone();
            if arrived.len() >= n {
                return arrived;
            }
            assert!(
                Instant::now() < deadline,
                "{} requests held, not {n}",
                arrived.len()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits (for at most 10 s) until `n` requests are in its hands.
    fn wait_in_flight(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.in_flight.load(Ordering::SeqCst) != n {
            assert!(
                Instant::now() < deadline,
                "the upstream holds {} requests, not {n}",
                self.in_flight.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A request sent, its answer not read yet.
struct Sent(TcpStream);

fn send(addr: &str, path: &str, key: &str) -> Sent {
    send_n(addr, path, key, 0)
}

fn send_n(addr: &str, path: &str, key: &str, n: usize) -> Sent {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nx-api-key: {key}\r\nx-n: {n}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    Sent(stream)
}

impl Sent {
    /// The whole answer: status and the rest.
    fn answer(mut self) -> (u16, String) {
        let mut text = String::new();
        self.0.read_to_string(&mut text).unwrap();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, text.to_ascii_lowercase())
    }
}

fn get(addr: &str, path: &str, key: &str) -> (u16, String) {
    send(addr, path, key).answer()
}

fn write_config(dir: &Path, store: &str, upstream: SocketAddr) -> PathBuf {
    let path = dir.join("weir.yaml");
    let config = format!(
        "{store}upstream:\n  url: http://{upstream}\nidentities:\n  api_key: {{ header: x-api-key }}\nrules:\n\
         \x20 - name: reports-in-flight\n    match: {{ path_prefix: /reports }}\n    key: [api_key]\n    algorithm: concurrency\n    limit: 3\n\
         \x20 - name: one-in-flight\n    match: {{ path_prefix: /both }}\n    key: [api_key]\n    algorithm: concurrency\n    limit: 1\n\
         \x20 - name: once-an-hour\n    match: {{ path_prefix: /both }}\n    key: [api_key]\n    algorithm: fixed_window\n    limit: 1\n    period: 1h\n"
    );
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn twenty_requests_of_one_key_never_more_than_three_in_flight() {
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&write_config(dir.path(), "", upstream.addr));

    // 20 at once, held by the upstream: 3 reach it, 17 are refused.
    let sent: Vec<Sent> = (0..20)
        .map(|n| send_n(&weir.addr, "/reports/hold", "k1", n))
        .collect();
    let reached = upstream.wait_arrived(3);
    let mut held = Vec::new();
    for (n, request) in sent.into_iter().enumerate() {
        if reached.contains(&n) {
            held.push(request);
            continue;
        }
        let (status, text) = request.answer();
        assert_eq!(status, 429, "{text}");
        assert!(text.contains("retry-after: 1\r\n"), "{text}");
        assert!(
            text.contains("ratelimit: \"reports-in-flight\";r=0;t=1"),
            "{text}"
        );
        assert!(
            text.contains("ratelimit-policy: \"reports-in-flight\";q=3\r\n"),
            "{text}"
        );
    }
    assert_eq!(upstream.wait_arrived(3).len(), 3);
    assert_eq!(upstream.most.load(Ordering::SeqCst), 3);
    // Another key has slots of its own.
    let other = send_n(&weir.addr, "/reports/hold", "k2", 100);
    upstream.wait_arrived(4);
    assert_eq!(
        slots_held(&weir),
        4,
        "the slots this instance holds, in its metrics"
    );

    // The three clients hang up: their slots are free again, and three more pass.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // Until weir has seen the hang-ups (it reads the closed connections).
        let (status, _) = get(&weir.addr, "/reports/quick", "k1");
        if status == 200 {
            break;
        }
        assert_eq!(status, 429);
        assert!(
            Instant::now() < deadline,
            "no slot came free after the hang-ups"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let again: Vec<Sent> = (0..3)
        .map(|n| send_n(&weir.addr, "/reports/hold", "k1", 200 + n))
        .collect();
    upstream.wait_arrived(7);
    // Three held again: the fourth is refused.
    let (status, text) = get(&weir.addr, "/reports/quick", "k1");
    assert_eq!(status, 429, "{text}");

    // The upstream answers: once each answer has been sent, its slot is free.
    upstream.gate.send(true).unwrap();
    for request in again {
        assert_eq!(request.answer().0, 200);
    }
    assert_eq!(other.answer().0, 200);
    for _ in 0..5 {
        let (status, text) = get(&weir.addr, "/reports/quick", "k1");
        assert_eq!(status, 200, "{text}");
        assert!(
            text.contains("ratelimit: \"reports-in-flight\";r=2;t=0"),
            "{text}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while slots_held(&weir) != 0 {
        assert!(Instant::now() < deadline, "slots still counted held");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `weir_slots_held` of `reports-in-flight`, from the admin listener's /metrics.
fn slots_held(weir: &Server) -> i64 {
    let mut stream = TcpStream::connect(weir.admin.as_deref().unwrap()).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("weir_slots_held{rule=\"reports-in-flight\"} "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[test]
fn a_request_another_rule_denies_gives_its_slot_back() {
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&write_config(dir.path(), "", upstream.addr));
    assert_eq!(get(&weir.addr, "/both", "k").0, 200);
    // Denied by the hourly window: the slot taken first is given back, so the
    // concurrency rule (1 in flight) never denies, however many are refused.
    for _ in 0..3 {
        let (status, text) = get(&weir.addr, "/both", "k");
        assert_eq!(status, 429, "{text}");
        assert!(text.contains("\"once-an-hour\""), "{text}");
        assert!(!text.contains("\"violated\":[\"one-in-flight\""), "{text}");
        assert!(text.contains("\"one-in-flight\";r=1;t=0"), "{text}");
    }
}

/// A request whose upstream fails (nothing listens: weir answers 502) gives its slot
/// back: a key with 3 slots asks 10 times, one after another, and is never refused
/// for want of one, and no slot is held after.
#[test]
fn a_request_the_upstream_fails_gives_its_slot_back() {
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = nowhere.local_addr().unwrap();
    drop(nowhere);
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start(&write_config(dir.path(), "", closed));
    for _ in 0..10 {
        let (status, text) = get(&weir.addr, "/reports/slow", "k");
        assert_eq!(status, 502, "{text}");
        assert!(text.contains("\"reports-in-flight\";r=2"), "{text}");
    }
    assert_eq!(slots_held(&weir), 0);
}

/// Waits until `weir` answers `path` for `key` with `status`, for at most `within`;
/// returns how long it took.
fn until_status(weir: &Server, path: &str, key: &str, status: u16, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if get(&weir.addr, path, key).0 == status {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{path} never answered {status} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_instances_share_the_slots_and_a_killed_ones_expire_within_the_lease() {
    let redis = RedisServer::start();
    redis.grant_bans_and_concurrency();
    let upstream = Upstream::start();
    let dir = tempfile::tempdir().unwrap();
    let lease = Duration::from_millis(600);
    let store = format!(
        "store:\n  type: redis\n  url: {}\n  slot_lease: 600ms\n",
        redis.url()
    );
    let config = write_config(dir.path(), &store, upstream.addr);
    let mut first = Server::start(&config);
    let second = Server::start(&config);

    let held: Vec<Sent> = (0..3)
        .map(|_| send(&first.addr, "/reports/hold", "k"))
        .collect();
    upstream.wait_in_flight(3);
    assert_eq!(get(&second.addr, "/reports/quick", "k").0, 429);
    // Held past several leases: renewed while the requests last.
    std::thread::sleep(lease * 3);
    assert_eq!(get(&second.addr, "/reports/quick", "k").0, 429);

    // The instance holding them dies: its slots are free within a lease of its last
    // renewal (renewed every third of it), so within the lease from now.
    first.child.kill().unwrap();
    let killed = Instant::now();
    let freed = until_status(&second, "/reports/quick", "k", 200, Duration::from_secs(5));
    assert!(
        freed <= lease + Duration::from_millis(250),
        "freed after {freed:?}"
    );
    assert!(
        killed.elapsed() >= lease / 2,
        "freed too early: {:?}",
        killed.elapsed()
    );
    drop(held);

    // The survivor's own slots are released as its answers end.
    for _ in 0..5 {
        assert_eq!(get(&second.addr, "/reports/quick", "k").0, 200);
    }
    upstream.gate.send(true).unwrap();
}
