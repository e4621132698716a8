//! The `weir` binary, run for real: `check-config` exit codes and messages, and `serve`
//! on a loopback port, answering and stopping on SIGTERM.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, weir};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

#[test]
fn check_config_accepts_the_example() {
    let out = weir()
        .arg("check-config")
        .arg(example("basic.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (6 rules)"));
}

#[test]
fn check_config_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "rules:\n  - name: api\n    algorithm: token_bucket\n    limit: 0\n    period: 1m\n",
    )
    .unwrap();
    let out = weir().arg("check-config").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "weir: {}:4:12: rules[0].limit: limit must be a whole number from 1",
        file.display()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
}

#[test]
fn serve_refuses_an_invalid_config() {
    let out = weir()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            "/nonexistent.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent.yaml: cannot read the file")
    );
}

#[test]
fn serve_answers_checks_and_stops_on_sigterm() {
    let mut server = Server::start(&example("basic.yaml"));
    assert_eq!(server.request("GET", "/healthz", "").0, "HTTP/1.1 200 OK");
    let check = r#"{"rule": "login", "key": "ana@example.com", "cost": 5}"#;
    let (status, body) = server.request("POST", "/v1/check", check);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains(r#""remaining":0"#), "{body}");
    let (status, _) = server.request("POST", "/v1/check", check);
    assert_eq!(status, "HTTP/1.1 429 Too Many Requests");

    let killed = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "weir did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_refuses_a_port_another_weir_serves() {
    // Both would set SO_REUSEPORT: without a check they would split the traffic.
    let first = Server::start(&example("basic.yaml"));
    let address = first.addr.clone();
    let out = weir()
        .args(["serve", "--listen", &address, "--config"])
        .arg(example("basic.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot listen on"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `weir` with `args` printed on standard output and error, and whether it
/// succeeded.
fn run(args: &[&str]) -> (bool, String, String) {
    let out = weir().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn weir_example_lists_prints_and_writes_every_shipped_example() {
    let (ok, list, _) = run(&["example"]);
    assert!(ok);
    // Every examples/*.yaml is built in, and printed as it ships.
    let mut shipped = 0;
    for entry in std::fs::read_dir(example("")).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .strip_suffix(".yaml")
        else {
            continue;
        };
        shipped += 1;
        assert!(
            list.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} in:\n{list}"
        );
        let (ok, yaml, _) = run(&["example", name]);
        assert!(ok);
        assert_eq!(yaml, std::fs::read_to_string(&path).unwrap(), "{name}");
    }
    assert_eq!(
        list.lines().filter(|l| !l.is_empty()).count(),
        shipped + 1,
        "{list}"
    );
    // Written with the files it names, it checks as it is.
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("mine");
    let (ok, wrote, err) = run(&["example", "public-api", "--dir", into.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(wrote.lines().count(), 2, "{wrote}");
    let plans = std::fs::read_to_string(into.join("plans/api-keys.yaml")).unwrap();
    assert_eq!(
        plans,
        std::fs::read_to_string(example("plans/api-keys.yaml")).unwrap()
    );
    let (ok, checked, err) = run(&[
        "check-config",
        into.join("public-api.yaml").to_str().unwrap(),
    ]);
    assert!(ok && checked.contains(": ok (4 rules)"), "{checked}{err}");
    // Never over a file that is there.
    let (ok, _, err) = run(&["example", "public-api", "--dir", into.to_str().unwrap()]);
    assert!(
        !ok && err.contains("public-api.yaml") && err.contains("exists"),
        "{err}"
    );
    let (ok, _, err) = run(&["example", "publicapi"]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("no example is named `publicapi`: the examples are basic, login"),
        "{err}"
    );
}

#[test]
fn weir_alone_and_its_help_describe_weir_alike_and_name_the_guide() {
    let (_, _, alone) = run(&[]);
    let (ok, help, _) = run(&["--help"]);
    assert!(ok);
    let first = |text: &str| text.lines().next().unwrap_or_default().to_owned();
    assert_eq!(first(&alone), "weir: a rate limiter for real APIs.");
    assert_eq!(first(&help), first(&alone));
    assert!(
        help.contains("docs/guide") && help.contains("weir example"),
        "{help}"
    );
    assert!(
        !help.contains("README"),
        "an installed binary has no README: {help}"
    );
}
