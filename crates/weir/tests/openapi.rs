//! The OpenAPI document (`GET /openapi.json`) against a live `weir serve`: it is a
//! valid OpenAPI 3.1 document by a real validator (openapi-spec-validator), it names
//! what each listener serves, and a property-based API fuzzer from the OpenAPI world
//! (schemathesis) finds no answer that breaks it: every status, header, content type
//! and body as documented, no 5xx, no panic, the process alive at the end.
//!
//! The tools come from `WEIR_OPENAPI_VENV` (a Python venv holding schemathesis and
//! openapi-spec-validator), else scripts/test's `target/openapi-venv`.
#![allow(clippy::unwrap_used, reason = "test")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Server, workspace};

/// The admin token of the configuration under test.
const TOKEN: &str = "openapi-test-admin-token-0123456789";

/// A rule named as the document's examples name one (`api`), so the fuzzer's examples
/// reach a decision (200, then 429) rather than an unknown rule; a login rule counted
/// by outcome, so `/v1/decide` hands out settlements, with bans, so the bans' examples
/// (`login`) reach a rule that has them; the admin API and the forward-auth door.
const CONFIG: &str = "\
auth:
  convention: forwarded
  trusted_proxies: [127.0.0.1/32]
  reservations: app
admin:
  token_file: token
rules:
  - name: api
    match: { path_prefix: / }
    key: [client_ip]
    algorithm: gcra
    limit: 50
    period: 1m
  - name: login
    match: { methods: [POST], path: /v1/login }
    algorithm: sliding_log
    limit: 3
    period: 15m
    count_statuses: [401]
    on_limited: { ban: 1m, after: 3, within: 15m }
";

fn venv() -> PathBuf {
    match std::env::var_os("WEIR_OPENAPI_VENV") {
        Some(dir) => PathBuf::from(dir),
        None => workspace().join("target/openapi-venv"),
    }
}

fn tool(name: &str) -> PathBuf {
    let path = venv().join("bin").join(name);
    assert!(
        path.exists(),
        "no {}: run scripts/test (it installs schemathesis and openapi-spec-validator into \
         target/openapi-venv), or set WEIR_OPENAPI_VENV to a venv holding them",
        path.display()
    );
    path
}

fn start(dir: &Path) -> Server {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let config = dir.join("weir.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    Server::start_with(
        &config,
        &["--auth-listen", "127.0.0.1:0"],
        Stdio::from(std::fs::File::create(dir.join("weir.log")).unwrap()),
    )
}

fn document(addr: &str) -> serde_json::Value {
    let (status, body) = get(addr, "/openapi.json");
    assert!(status.contains(" 200 "), "{status}");
    serde_json::from_str(&body).unwrap()
}

fn get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// The document's paths, sorted.
fn paths(document: &serde_json::Value) -> Vec<&str> {
    let mut paths: Vec<&str> = document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    paths.sort_unstable();
    paths
}

#[test]
fn each_listener_serves_a_valid_document_of_what_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let admin = server.admin.as_deref().unwrap();
    let decision = document(&server.addr);
    let on_admin = document(admin);
    assert_eq!(decision["openapi"], "3.1.0");
    assert_eq!(
        paths(&decision),
        [
            "/healthz",
            "/metrics",
            "/readyz",
            "/v1/auth",
            "/v1/check",
            "/v1/decide",
            "/v1/settle"
        ]
    );
    assert_eq!(
        paths(&on_admin),
        [
            "/admin/api/bans",
            "/admin/api/bans/{rule}/{key}",
            "/admin/api/doors",
            "/admin/api/key",
            "/admin/api/lists",
            "/admin/api/lists/{list}/{kind}/{entry}",
            "/admin/api/overrides",
            "/admin/api/overrides/{rule}/{key}",
            "/admin/api/reset",
            "/admin/api/rules",
            "/admin/api/top",
            "/healthz",
            "/metrics",
            "/readyz",
            "/v1/auth",
            "/v1/check",
            "/v1/decide",
            "/v1/settle",
        ]
    );
    // The admin operations need the bearer token, and say so.
    assert_eq!(
        on_admin["components"]["securitySchemes"]["admin_token"]["scheme"],
        "bearer"
    );
    assert_eq!(
        on_admin["paths"]["/admin/api/reset"]["post"]["security"][0]["admin_token"],
        serde_json::json!([])
    );
    // The door is on its own listener.
    assert_eq!(
        decision["paths"]["/v1/auth"]["post"]["servers"][0]["variables"]["auth_listen"]["default"],
        "127.0.0.1:8082"
    );
    for (name, document) in [("decision", &decision), ("admin", &on_admin)] {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, document.to_string()).unwrap();
        let checked = Command::new(tool("python"))
            .args([
                "-c",
                "import json, sys\n\
                 from openapi_spec_validator import validate\n\
                 validate(json.load(open(sys.argv[1])))",
            ])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "the {name} listener's document is not valid OpenAPI:\n{}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

/// Runs schemathesis against `base` with the document served at `schema`, on the
/// paths `only`: every check but `positive_data_acceptance` (weir refuses some
/// schema-valid requests on purpose: a key over 1,024 bytes of UTF-8, a host no rule
/// names, a number written `1.0`, which JSON Schema cannot tell apart) and `skip`.
/// Returns how many cases it tried.
fn fuzz(
    schema: &str,
    base: &str,
    only: &[&str],
    skip: &[&str],
    headers: &[&str],
    dir: &Path,
) -> u64 {
    let report = dir.join(format!("fuzz-{}.json", base.replace([':', '/', '.'], "_")));
    let mut command = Command::new(tool("schemathesis"));
    command
        .args(["run", schema, "--url", base, "--checks", "all"])
        .args(["--exclude-checks", "positive_data_acceptance"])
        .args([
            "--max-examples",
            "60",
            "--seed",
            "20261206",
            "--workers",
            "2",
        ])
        .args(["--generation-database", "none", "--no-color"])
        .args(["--report", "json", "--report-json-path"])
        .arg(&report)
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(dir);
    for path in only {
        command.args(["--include-path", path]);
    }
    for header in headers {
        command.args(["-H", header]);
    }
    for check in skip {
        command.args(["--exclude-checks", check]);
    }
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis found answers that break the document:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // "Test cases:\n  480 generated, 480 passed"
    let tried = text
        .lines()
        .find_map(|line| line.trim().split_once(" generated, ")?.0.parse().ok())
        .unwrap_or_else(|| panic!("no count of test cases in:\n{text}"));
    println!("schemathesis tried {tried} cases on {base} ({only:?})");
    tried
}

#[test]
fn the_fuzzer_finds_no_answer_that_breaks_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let admin = server.admin.clone().unwrap();
    let auth = server.auth.clone().unwrap();
    let schema = format!("http://{}/openapi.json", server.addr);
    let admin_schema = format!("http://{admin}/openapi.json");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let mut tried = 0;
    // The decision API on its listener.
    tried += fuzz(
        &schema,
        &format!("http://{}", server.addr),
        &[
            "/v1/check",
            "/v1/decide",
            "/v1/settle",
            "/healthz",
            "/readyz",
            "/metrics",
        ],
        &[],
        &[],
        dir.path(),
    );
    // The admin API, with the token (schemathesis also calls it without, and checks
    // each such call is refused).
    tried += fuzz(
        &admin_schema,
        &format!("http://{admin}"),
        &[
            "/admin/api/rules",
            "/admin/api/key",
            "/admin/api/reset",
            "/admin/api/top",
            "/admin/api/overrides",
            "/admin/api/overrides/{rule}/{key}",
            "/admin/api/lists",
            "/admin/api/lists/{list}/{kind}/{entry}",
        ],
        &[],
        &[&bearer],
        dir.path(),
    );
    // The forward-auth door on its own listener. It answers every method, those
    // OpenAPI 3.1 cannot list (`QUERY`, extensions) too: Envoy's ext_authz asks with
    // the client's own method.
    tried += fuzz(
        &schema,
        &format!("http://{auth}"),
        &["/v1/auth"],
        &["unsupported_method"],
        &[],
        dir.path(),
    );
    assert!(tried >= 500, "only {tried} cases");
    println!("schemathesis tried {tried} cases in all");
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "weir exited under the fuzzer"
    );
    let log = std::fs::read_to_string(dir.path().join("weir.log")).unwrap();
    assert!(!log.contains("panicked"), "weir panicked:\n{log}");
}
