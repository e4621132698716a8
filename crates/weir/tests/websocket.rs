//! WebSocket through the gateway (the real binary): a real client and echo server,
//! echo both ways, the handshake decided like any request (a `concurrency` rule of 3
//! refuses the 4th open connection of a key with a 429, and lets a new one in once
//! one closes), an idle connection closed at `upstream.websocket_idle_timeout`, and on
//! Redis the open sockets of one instance counted at another, for as long as they are
//! open, and free within the slot lease once the instance holding them is killed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Server;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error, Message};
use weir_testkit::RedisServer;

/// An echo server: every message back as it came.
async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_close() {
                        break;
                    }
                    if ws.send(message).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn start(dir: &Path, upstream: SocketAddr, idle: &str) -> Server {
    Server::start(&write_config(dir, upstream, idle, ""))
}

fn write_config(dir: &Path, upstream: SocketAddr, idle: &str, store: &str) -> PathBuf {
    let path = dir.join("weir.yaml");
    std::fs::write(
        &path,
        format!(
            "{store}upstream:\n  url: http://{upstream}\n  websocket_idle_timeout: {idle}\nidentities:\n  api_key: {{ header: x-api-key }}\nrules:\n\
             \x20 - name: sockets\n    match: {{ path_prefix: /ws }}\n    key: [api_key]\n    algorithm: concurrency\n    limit: 3\n"
        ),
    )
    .unwrap();
    path
}

type Socket = WebSocketStream<TcpStream>;

/// A WebSocket handshake through weir, as `key`.
async fn open(weir: &Server, key: &str) -> Result<Socket, Error> {
    let mut request = format!("ws://{}/ws/echo", weir.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("x-api-key", key.parse().unwrap());
    let stream = TcpStream::connect(&weir.addr).await.unwrap();
    tokio_tungstenite::client_async(request, stream)
        .await
        .map(|(socket, _)| socket)
}

async fn round_trip(socket: &mut Socket, message: Message) {
    socket.send(message.clone()).await.unwrap();
    let back = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(back, message);
}

#[tokio::test]
async fn frames_pass_both_ways_and_the_fourth_socket_of_a_key_is_refused() {
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = start(dir.path(), upstream, "60s");

    let mut open_sockets = Vec::new();
    for i in 0..3 {
        let mut socket = open(&weir, "k").await.unwrap();
        round_trip(&mut socket, Message::text(format!("hello {i}"))).await;
        round_trip(&mut socket, Message::binary(vec![0u8, 1, 2, 255])).await;
        open_sockets.push(socket);
    }
    // Three open: the 4th handshake of the key gets the normal 429.
    match open(&weir, "k").await {
        Err(Error::Http(response)) => {
            assert_eq!(response.status(), 429);
            assert_eq!(response.headers()["retry-after"], "1");
            assert_eq!(response.headers()["ratelimit"], "\"sockets\";r=0;t=1");
        }
        Ok(_) => panic!("a 4th socket was let through"),
        Err(other) => panic!("{other}"),
    }
    // Another key has slots of its own.
    let mut other = open(&weir, "other").await.unwrap();
    round_trip(&mut other, Message::text("mine")).await;
    // The open ones still echo while refused handshakes come and go.
    round_trip(&mut open_sockets[1], Message::text("still here")).await;

    // One closes: a new one passes (once weir has seen it close), and then no more.
    let mut closing = open_sockets.pop().unwrap();
    closing.close(None).await.unwrap();
    while closing.next().await.is_some() {}
    drop(closing);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut fresh = loop {
        match open(&weir, "k").await {
            Ok(socket) => break socket,
            Err(Error::Http(response)) if response.status() == 429 => {
                assert!(
                    Instant::now() < deadline,
                    "the closed socket's slot never came free"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("{other}"),
        }
    };
    round_trip(&mut fresh, Message::text("in its place")).await;
    assert!(matches!(open(&weir, "k").await, Err(Error::Http(r)) if r.status() == 429));
}

/// Once answered `101`, the connection is a WebSocket's: the header timeout, which
/// closes a quiet HTTP/1.1 connection, no longer applies (the socket's own idle
/// timeout does).
#[tokio::test]
async fn a_socket_quiet_past_the_header_timeout_stays_open() {
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = Server::start_with(
        &write_config(dir.path(), upstream, "60s", ""),
        &["--header-timeout-ms", "200"],
        std::process::Stdio::null(),
    );
    let mut socket = open(&weir, "k").await.unwrap();
    round_trip(&mut socket, Message::text("before")).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    round_trip(&mut socket, Message::text("after three header timeouts")).await;
}

#[tokio::test]
async fn an_idle_socket_is_closed_at_the_idle_timeout() {
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = start(dir.path(), upstream, "400ms");
    let mut socket = open(&weir, "k").await.unwrap();
    // Traffic keeps it open past the timeout.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        round_trip(&mut socket, Message::text("tick")).await;
    }
    // Quiet: closed by weir after 400 ms, and its slot freed.
    let quiet = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = socket.next().await {}
    })
    .await;
    assert!(ended.is_ok(), "an idle socket stayed open");
    assert!(
        quiet.elapsed() >= Duration::from_millis(350),
        "{:?}",
        quiet.elapsed()
    );
    for _ in 0..3 {
        let mut again = open(&weir, "k").await.unwrap();
        round_trip(&mut again, Message::text("back")).await;
        std::mem::forget(again);
    }
}

/// Waits until a handshake of `key` at `weir` is let through, for at most `within`;
/// returns the socket and how long it took.
async fn until_open(weir: &Server, key: &str, within: Duration) -> (Socket, Duration) {
    let start = Instant::now();
    loop {
        match open(weir, key).await {
            Ok(socket) => return (socket, start.elapsed()),
            Err(Error::Http(response)) if response.status() == 429 => {
                assert!(
                    start.elapsed() < within,
                    "no slot came free within {within:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[tokio::test]
async fn on_redis_open_sockets_count_at_every_instance_and_a_killed_ones_free_within_the_lease() {
    let redis = RedisServer::start();
    redis.grant_bans_and_concurrency();
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let lease = Duration::from_millis(600);
    let store = format!(
        "store:\n  type: redis\n  url: {}\n  slot_lease: 600ms\n",
        redis.url()
    );
    let config = write_config(dir.path(), upstream, "60s", &store);
    let mut first = Server::start(&config);
    let second = Server::start(&config);

    let mut sockets = Vec::new();
    for i in 0..3 {
        let mut socket = open(&first, "k").await.unwrap();
        round_trip(&mut socket, Message::text(format!("first {i}"))).await;
        sockets.push(socket);
    }
    let refused = |weir| async move {
        matches!(open(weir, "k").await, Err(Error::Http(r)) if r.status() == 429)
    };
    assert!(
        refused(&second).await,
        "a 4th socket of the key at the other instance"
    );
    // Open past several leases: their slots are renewed while the sockets last.
    tokio::time::sleep(lease * 3).await;
    round_trip(&mut sockets[0], Message::text("still open")).await;
    assert!(refused(&second).await, "the open sockets stopped counting");

    // A socket closed at the first instance frees its slot for the second.
    let mut closing = sockets.pop().unwrap();
    closing.close(None).await.unwrap();
    while closing.next().await.is_some() {}
    drop(closing);
    let (mut other, _) = until_open(&second, "k", Duration::from_secs(5)).await;
    round_trip(&mut other, Message::text("at the second")).await;
    assert!(refused(&second).await);

    // The instance holding two of them dies: their slots are free within a lease of
    // its last renewal (every third of it), so within the lease from now.
    first.child.kill().unwrap();
    let killed = Instant::now();
    let (mut fresh, freed) = until_open(&second, "k", Duration::from_secs(5)).await;
    assert!(
        freed <= lease + Duration::from_millis(250),
        "freed after {freed:?}"
    );
    assert!(
        killed.elapsed() >= lease / 2,
        "freed too early: {:?}",
        killed.elapsed()
    );
    round_trip(&mut fresh, Message::text("after the crash")).await;
    let (_third, _) = until_open(&second, "k", Duration::from_secs(5)).await;
    // The second's own two sockets, and the one more: the limit again.
    assert!(refused(&second).await);
    drop(sockets);
}

/// The resident memory of process `pid`, in KiB (`VmRSS`).
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A client that sends and never reads its echoes is held back, not buffered for:
/// the echoes fill the sockets' buffers, the echo server stops reading, and the
/// client's own sends stall, with weir's memory flat; another client is served
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_held_back_and_others_are_served() {
    const MIB: usize = 1 << 20;
    const OFFERED: usize = 256;
    let upstream = echo().await;
    let dir = tempfile::tempdir().unwrap();
    let weir = start(dir.path(), upstream, "60s");
    let before = resident_kib(weir.child.id());
    let socket = open(&weir, "greedy").await.unwrap();
    let (mut sink, _never_read) = socket.split();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = sent.clone();
    let sender = tokio::spawn(async move {
        for _ in 0..OFFERED {
            if sink.send(Message::binary(vec![7u8; MIB])).await.is_err() {
                break;
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    // Wait until the sends stall: no MiB more in half a second (or all were taken).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = sent.load(std::sync::atomic::Ordering::Relaxed);
        if now == last || now == OFFERED || Instant::now() > deadline {
            break;
        }
        last = now;
    }
    let stalled_at = sent.load(std::sync::atomic::Ordering::Relaxed);
    // Held back (its send waits), not cut off: some went through first.
    assert!(
        !sender.is_finished(),
        "the client's sends failed instead of waiting"
    );
    assert!(
        (1..OFFERED / 2).contains(&stalled_at),
        "{stalled_at} MiB of {OFFERED} were taken from a client that reads nothing"
    );
    let grown_mib = resident_kib(weir.child.id()).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 32,
        "weir grew {grown_mib} MiB holding a stalled socket"
    );
    // Another client is served meanwhile.
    let mut other = open(&weir, "other").await.unwrap();
    round_trip(&mut other, Message::text("served")).await;
    sender.abort();
}
