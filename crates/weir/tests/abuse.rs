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
    let mut child = weir()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--header-timeout-ms",
            "300",
            "--config",
        ])
        .arg(example("basic.yaml"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let addr = line
        .trim()
        .strip_prefix("weir listening on http://")
        .unwrap()
        .to_owned();

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
    let _ = child.kill();
    let _ = child.wait();
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
