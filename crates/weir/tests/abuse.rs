//! Abusive clients: slow headers (slowloris), oversized headers, a body that never
//! finishes; each gets a bounded, clear answer and nothing else is affected.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Server, weir};

fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Reads until the server closes the connection; returns what it sent and when.
fn read_until_closed(mut stream: TcpStream, started: Instant) -> (String, Duration) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    (
        String::from_utf8_lossy(&all).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let weir = Server::start_with(
        &example("basic.yaml"),
        &["--header-timeout-ms", "300"],
        std::process::Stdio::null(),
    );
    let addr = weir.addr.clone();

    let mut slow = TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    slow.write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let (_, after) = read_until_closed(slow, started);
    assert!(
        after >= Duration::from_millis(250) && after < Duration::from_secs(3),
        "closed after {after:?}"
    );

    // Meanwhile a well-behaved client is served.
    let mut ok = TcpStream::connect(&addr).unwrap();
    let body = r#"{"rule": "api", "key": "k"}"#;
    write!(ok, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let (reply, _) = read_until_closed(ok, Instant::now());
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

/// The header timeout counts from a keep-alive connection's last answer: a client that
/// asks again within it is served for as long as it likes, and one that goes quiet is
/// closed once it has passed.
#[test]
fn a_keep_alive_connection_has_the_header_timeout_from_each_answer() {
    let weir = Server::start_with(
        &example("basic.yaml"),
        &["--header-timeout-ms", "300"],
        std::process::Stdio::null(),
    );
    let mut stream = TcpStream::connect(&weir.addr).unwrap();
    let opened = Instant::now();
    // A request every 150 ms, for twice the header timeout and more.
    for i in 0..5 {
        send_check(&mut stream, &format!("k{i}"));
        let reply = first_bytes(&mut stream, Duration::from_secs(10)).expect("answered");
        assert!(
            reply.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(opened.elapsed() >= Duration::from_millis(600));
    // Quiet from now on: closed about 300 ms after the last answer.
    let (rest, after) = read_until_closed(stream, Instant::now());
    assert_eq!(rest, "", "nothing more is sent");
    assert!(after < Duration::from_secs(3), "closed after {after:?}");
}

#[test]
fn oversized_headers_are_refused() {
    let server = Server::start(&example("basic.yaml"));
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let huge = "a".repeat(300 * 1024);
    let _ = write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: {huge}\r\nConnection: close\r\n\r\n"
    );
    let (reply, _) = read_until_closed(stream, Instant::now());
    assert!(
        reply.starts_with("HTTP/1.1 431"),
        "{}",
        &reply[..reply.len().min(80)]
    );
    assert_eq!(
        server.request("GET", "/healthz", "").0,
        "HTTP/1.1 200 OK",
        "the server is unaffected"
    );
}

#[test]
fn a_login_body_that_never_arrives_gets_a_408() {
    // An upstream is needed for the gateway; it is never reached here.
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(example("login.yaml"))
        .unwrap()
        .replace(
            "http://127.0.0.1:9000",
            &format!(
                "http://{}\n  body_timeout: 300ms",
                upstream.local_addr().unwrap()
            ),
        );
    let path = dir.path().join("login.yaml");
    std::fs::write(&path, text).unwrap();
    let server = Server::start(&path);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let started = Instant::now();
    stream
        .write_all(b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"email\":")
        .unwrap();
    let (reply, after) = read_until_closed(stream, started);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("/problems/body-timeout"), "{reply}");
    assert!(after < Duration::from_secs(3), "{after:?}");
}

/// Sends an HTTP/1.1 `/v1/check` for `key` on `stream` (kept alive).
fn send_check(stream: &mut TcpStream, key: &str) {
    let body = format!(r#"{{"rule": "api", "key": "{key}"}}"#);
    write!(
        stream,
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
}

/// The first bytes `stream` receives within `wait`, or `None`.
fn first_bytes(stream: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buffer = [0; 512];
    match stream.read(&mut buffer) {
        Ok(n) if n > 0 => Some(buffer[..n].to_vec()),
        Ok(_) => panic!("the connection was closed"),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Opens an HTTP/2 connection to the gRPC door (the client's preface and SETTINGS).
fn h2_connect(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    stream
}

/// Whether `bytes` begin with an HTTP/2 SETTINGS frame: the server's preface, its
/// first answer to a connection it serves.
fn is_settings(bytes: &[u8]) -> bool {
    bytes.len() >= 9 && bytes[3] == 4
}

/// A client that holds every connection slot (`--max-connections`) delays only new
/// connections: those held are served as before, the next is served as soon as one
/// closes, each listener has slots of its own, and the metrics show them.
#[test]
fn connections_past_the_cap_wait_for_a_free_slot() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rl")).unwrap();
    std::fs::write(
        dir.path().join("rl/api.yaml"),
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("weir.yaml"),
        "envoy:\n  config_dir: rl\nrules:\n  - { name: api, algorithm: gcra, limit: 100, period: 1m }\n",
    )
    .unwrap();
    let weir = Server::start_with(
        &dir.path().join("weir.yaml"),
        &["--grpc-listen", "127.0.0.1:0", "--max-connections", "2"],
        std::process::Stdio::null(),
    );
    let (http, grpc) = (weir.addr.clone(), weir.grpc.clone().unwrap());
    let answered = Duration::from_secs(10);
    let unanswered = Duration::from_millis(500);

    // Two keep-alive connections take the main listener's two slots.
    let mut held: Vec<TcpStream> = (0..2)
        .map(|i| {
            let mut stream = TcpStream::connect(&http).unwrap();
            send_check(&mut stream, &format!("held-{i}"));
            let reply = first_bytes(&mut stream, answered).expect("served");
            assert!(
                reply.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&reply)
            );
            stream
        })
        .collect();
    let mut waiting = TcpStream::connect(&http).unwrap();
    send_check(&mut waiting, "waiting");
    assert_eq!(
        first_bytes(&mut waiting, unanswered),
        None,
        "a third connection is not served"
    );
    // Those held are served as before.
    send_check(&mut held[1], "held-1");
    assert!(
        first_bytes(&mut held[1], answered)
            .unwrap()
            .starts_with(b"HTTP/1.1 200")
    );
    // The gRPC door's slots are its own: it serves while the main listener is full.
    let (mut first, mut second) = (h2_connect(&grpc), h2_connect(&grpc));
    assert!(is_settings(&first_bytes(&mut first, answered).unwrap()));
    assert!(is_settings(&first_bytes(&mut second, answered).unwrap()));

    // A connection closed gives its slot to the one waiting.
    drop(held.remove(0));
    let reply = first_bytes(&mut waiting, answered).expect("served once a slot is free");
    assert!(
        reply.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&reply)
    );

    // The same on the gRPC door.
    let mut third = h2_connect(&grpc);
    assert_eq!(
        first_bytes(&mut third, unanswered),
        None,
        "a third connection is not served"
    );
    drop(first);
    assert!(is_settings(
        &first_bytes(&mut third, answered).expect("served once a slot is free")
    ));

    // The metrics show each listener's connections: a scrape's own connection takes
    // the slot `waiting` gives back, beside the one still held.
    drop(waiting);
    let mut scrape = TcpStream::connect(&http).unwrap();
    write!(
        scrape,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let (metrics, _) = read_until_closed(scrape, Instant::now());
    for series in [
        r#"weir_connections{listener="main"} 2"#,
        r#"weir_connections{listener="grpc"} 2"#,
        r#"weir_connections_max{listener="main"} 2"#,
        r#"weir_connections_max{listener="grpc"} 2"#,
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
}

#[test]
fn max_connections_must_be_at_least_one() {
    let out = weir()
        .args(["serve", "--max-connections", "0", "--config"])
        .arg(example("basic.yaml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(error.contains("--max-connections"), "{error}");
}

/// A client that pipelines requests and never reads the answers cannot hold its
/// connection (and its slot) forever: once weir's writes have waited
/// `--send-timeout-ms` without progress, the connection is closed, and the next client
/// takes the slot.
#[test]
fn a_client_that_never_reads_is_closed_after_the_send_timeout() {
    let weir = Server::start_with(
        &example("basic.yaml"),
        &[
            "--max-connections",
            "1",
            "--send-timeout-ms",
            "300",
            // Far past the wait below: a request cut short by the deaf client's last
            // write must not be what closes its connection.
            "--header-timeout-ms",
            "600000",
        ],
        std::process::Stdio::null(),
    );
    let addr = weir.addr.clone();

    // The answers (a few hundred bytes each) fill the socket buffers long before the
    // requests run out; the writer stops when its connection is closed.
    // A small receive buffer, so that they fill it soon.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4 * 1024).unwrap();
    socket
        .connect(&addr.parse::<std::net::SocketAddr>().unwrap().into())
        .unwrap();
    let mut deaf: TcpStream = socket.into();
    deaf.set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let writer = std::thread::spawn(move || {
        let body = r#"{"rule": "api", "key": "deaf"}"#;
        let request = format!(
            "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut sent = 0;
        while sent < 100_000 && deaf.write_all(request.as_bytes()).is_ok() {
            sent += 1;
        }
        deaf
    });

    // The one slot is the deaf client's until its connection is closed: about 1.5 s
    // here, up to 15 s when the kernel lets the answers trickle into the deaf
    // client's full buffer (each trickle is progress, and starts the wait again).
    let mut next = TcpStream::connect(&addr).unwrap();
    send_check(&mut next, "next");
    let reply = first_bytes(&mut next, Duration::from_secs(60))
        .expect("served once the deaf client's connection is closed");
    assert!(
        reply.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    drop(writer.join().unwrap());
}
