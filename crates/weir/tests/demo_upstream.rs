//! `weir demo-upstream`, the app the gateway examples run in front of as they ship: its
//! answers, and `examples/login.yaml` counting its failed logins through the gateway.
#![allow(clippy::unwrap_used, reason = "test")]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use common::{Process, Server, weir, workspace};

/// Starts `weir demo-upstream` on a free port; returns it and its address.
fn demo() -> (Process, String) {
    let mut child = weir()
        .args(["demo-upstream", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("weir demo-upstream listening on http://")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    (Process(child), addr)
}

/// One request; the status and the body.
fn send(addr: &str, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: demo\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

#[test]
fn the_demo_answers_what_the_examples_need() {
    let (_demo, addr) = demo();
    let right = r#"{"email": "ana@example.com", "password": "correct horse battery staple"}"#;
    let wrong = r#"{"email": "ana@example.com", "password": "guess"}"#;
    assert_eq!(send(&addr, "POST", "/login", JSON, right).0, 200);
    assert_eq!(send(&addr, "POST", "/login", JSON, wrong).0, 401);
    assert_eq!(send(&addr, "POST", "/login", JSON, "not json").0, 401);
    let form = "email=ana%40example.com&password=correct+horse+battery+staple";
    assert_eq!(send(&addr, "POST", "/login", FORM, form).0, 200);
    assert_eq!(send(&addr, "POST", "/login", FORM, "password=guess").0, 401);
    let (status, body) = send(
        &addr,
        "POST",
        "/v1/chat/completions",
        JSON,
        r#"{"max_tokens": 1234}"#,
    );
    assert_eq!(status, 200);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["usage"]["total_tokens"], 1234);
    let (status, body) = send(&addr, "GET", "/api/books", JSON, "");
    assert_eq!(status, 200);
    assert!(body.contains(r#""path":"/api/books""#), "{body}");
}

#[test]
fn the_login_example_counts_the_demos_failed_logins() {
    let (_demo, addr) = demo();
    // The example as it ships, its upstream moved to the demo's free port.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(workspace().join("examples/login.yaml")).unwrap();
    assert!(text.contains("url: http://127.0.0.1:9000"));
    let config = dir.path().join("login.yaml");
    std::fs::write(&config, text.replace("127.0.0.1:9000", &addr)).unwrap();
    let gateway = Server::start(&config);
    let wrong = r#"{"email": "ana@example.com", "password": "guess"}"#;
    let right = r#"{"email": "ana@example.com", "password": "correct horse battery staple"}"#;
    // A success is given back: it never counts.
    assert_eq!(send(&gateway.addr, "POST", "/login", JSON, right).0, 200);
    let statuses: Vec<u16> = (0..6)
        .map(|_| send(&gateway.addr, "POST", "/login", JSON, wrong).0)
        .collect();
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429]);
}
