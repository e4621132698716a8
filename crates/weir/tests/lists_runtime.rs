//! Allow and deny list entries set at runtime, on the real binary: added through one
//! instance's admin API and applied by the other within a second on Redis, removed
//! (allowed again) likewise, kept across a restart (the Redis table, the memory
//! store's overrides file), read canonically (an IPv4-mapped address is its IPv4
//! address, two spellings of a block are one entry), through `weir lists`, refusing
//! requests no rule routes, a change refused (503) while Redis is down, and bad input
//! refused with the field and nothing stored.
//!
//! Expiry at `expires_at` is asserted on an injected clock in the engine's unit tests
//! (`engine/overrides/entries.rs`): the binary reads the system clock.
#![allow(clippy::unwrap_used, reason = "test")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Server, weir};
use weir_testkit::RedisServer;

/// The admin token of the configurations under test.
const TOKEN: &str = "lists-test-admin-token-0123456789";

/// The time within which every instance applies a change (see DESIGN.md).
const WITHIN: Duration = Duration::from_secs(1);

/// A configuration with the admin API, `store` (YAML lines under `store:`, or none),
/// `more` top-level lines, the identity `api_key` (`x-api-key`), a configured global
/// deny list (198.51.100.0/24), and the rule `api`: 2 GETs an hour per address (other
/// methods are routed by no rule).
fn config(dir: &Path, name: &str, store: &str, more: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let store = if store.is_empty() {
        String::new()
    } else {
        format!("store:\n{store}")
    };
    let text = format!(
        "{store}{more}admin:\n  token_file: token\nidentities:\n  api_key: {{ header: x-api-key }}\nlists:\n  deny: {{ client_ip: [198.51.100.0/24] }}\nrules:\n  - name: api\n    match: {{ path_prefix: /, methods: [GET] }}\n    key: [client_ip]\n    algorithm: fixed_window\n    limit: 2\n    period: 1h\n"
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// One request to `addr`, with the admin token unless `token` is false: the status
/// code and the body.
fn call(addr: &str, method: &str, path: &str, body: &str, token: bool) -> (u16, String) {
    common::call_with_token(addr, method, path, body, token.then_some(TOKEN))
}

fn admin(server: &Server) -> &str {
    server.admin.as_deref().unwrap()
}

/// The runtime entries `server` lists.
fn listed(server: &Server) -> serde_json::Value {
    let (status, body) = call(admin(server), "GET", "/admin/api/lists", "", true);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// `/v1/decide`'s status for a GET of `/` from `client` with the API key `key`, on
/// the listener at `addr` (403: a deny list refused it).
fn decide(addr: &str, client: &str, key: &str) -> u16 {
    let body = format!(
        r#"{{"method": "GET", "path": "/", "client_ip": "{client}", "headers": {{"x-api-key": "{key}"}}}}"#
    );
    let (status, answer) = call(addr, "POST", "/v1/decide", &body, false);
    assert!(matches!(status, 200 | 403 | 429), "{status} {answer}");
    status
}

/// Waits until `decide` refuses `client` on `addr` with a 403 (`denied`), or stops
/// refusing it (a 200, or a 429 once its budget is spent); returns how long it took.
fn denied_within(addr: &str, client: &str, denied: bool) -> Duration {
    let start = Instant::now();
    while (decide(addr, client, "none") == 403) != denied {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{client}: not denied = {denied}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

const BLOCK: &str = "/admin/api/lists/deny/client_ip/203.0.113.0%2F24";

#[test]
fn on_redis_an_entry_added_on_one_instance_applies_on_the_other_within_a_second() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("  type: redis\n  url: {}\n", redis.url());
    let path = config(dir.path(), "weir.yaml", &store, "");
    let (a, b) = (Server::start(&path), Server::start(&path));
    assert_eq!(decide(&a.addr, "203.0.113.7", "none"), 200);

    let (status, body) = call(admin(&b), "PUT", BLOCK, r#"{"reason": "scraping"}"#, true);
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["after"]["entry"], "203.0.113.0/24");
    assert_eq!(answer["before"], serde_json::Value::Null);
    let took = denied_within(&a.addr, "203.0.113.7", true);
    assert!(
        took < WITHIN,
        "applied by the other instance after {took:?}"
    );
    // An IPv4-mapped spelling of an address in the block is refused alike.
    assert_eq!(decide(&a.addr, "::ffff:203.0.113.7", "none"), 403);
    assert_eq!(decide(&a.addr, "203.0.114.1", "none"), 200);
    // The configuration's own deny list still applies beside it (the union).
    assert_eq!(decide(&a.addr, "198.51.100.9", "none"), 403);

    // Removed through the other instance, by another spelling of the block: allowed
    // again on both within a second.
    let (status, body) = call(
        admin(&a),
        "DELETE",
        "/admin/api/lists/deny/client_ip/::ffff:203.0.113.99%2F120",
        "",
        true,
    );
    assert_eq!(status, 200, "{body}");
    let took = denied_within(&b.addr, "203.0.113.7", false);
    assert!(
        took < WITHIN,
        "removed on the other instance after {took:?}"
    );
    assert_eq!(listed(&a), serde_json::json!([]));

    // An API key on the deny list, kept in Redis across restarts.
    let (status, body) = call(
        admin(&a),
        "PUT",
        "/admin/api/lists/deny/api_key/k-bad",
        "null",
        true,
    );
    assert_eq!(status, 200, "{body}");
    drop((a, b));
    let c = Server::start(&path);
    assert_eq!(listed(&c)[0]["entry"], "k-bad");
    assert_eq!(decide(&c.addr, "192.0.2.1", "k-bad"), 403);
    assert_eq!(decide(&c.addr, "192.0.2.1", "k-good"), 200);

    // Redis gone: a change is refused (503), the entries last read still apply.
    drop(redis);
    let (status, body) = call(admin(&c), "PUT", BLOCK, "", true);
    assert_eq!(status, 503, "{body}");
    assert_eq!(decide(&c.addr, "192.0.2.1", "k-bad"), 403);
    assert_eq!(listed(&c).as_array().unwrap().len(), 1);
}

#[test]
fn on_memory_entries_set_by_the_cli_are_kept_in_the_overrides_file_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(common::echo::start());
    let path = config(
        dir.path(),
        "weir.yaml",
        "",
        &format!("upstream:\n  url: http://{upstream}\noverrides:\n  file: overrides.json\n"),
    );
    let lists = |server: &Server, args: &[&str]| {
        weir()
            .arg("lists")
            .args(args)
            .args(["--admin", &format!("http://{}", admin(server))])
            .env("WEIR_ADMIN_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let server = Server::start(&path);
    // The gateway's client is 127.0.0.1: allowed past its budget of 2.
    let added = lists(
        &server,
        &[
            "add",
            "allow",
            "client_ip",
            "127.0.0.0/8",
            "--reason",
            "office",
        ],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    for _ in 0..4 {
        assert_eq!(server.request("GET", "/", "").0, "HTTP/1.1 200 OK");
    }
    drop(server);

    let server = Server::start(&path);
    for _ in 0..2 {
        assert_eq!(server.request("GET", "/", "").0, "HTTP/1.1 200 OK");
    }
    let file = std::fs::read_to_string(dir.path().join("overrides.json")).unwrap();
    assert!(file.contains("\"office\""), "{file}");
    let list = lists(&server, &["list", "--list", "allow"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("127.0.0.0/8"));
    // Removed: the budget (spent) applies again; still removed after a restart.
    let removed = lists(&server, &["remove", "allow", "client_ip", "127.0.0.1/8"]);
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    assert_eq!(
        server.request("GET", "/", "").0,
        "HTTP/1.1 429 Too Many Requests"
    );
    drop(server);
    let server = Server::start(&path);
    assert_eq!(listed(&server), serde_json::json!([]));

    // A deny entry refuses the gateway's client with a 403, whatever its budget.
    assert_eq!(server.request("POST", "/", "").0, "HTTP/1.1 200 OK");
    let denied = lists(&server, &["add", "deny", "client_ip", "::ffff:127.0.0.1"]);
    assert!(denied.status.success());
    assert_eq!(server.request("GET", "/", "").0, "HTTP/1.1 403 Forbidden");
    // A request no rule routes is refused too, as the global deny list refuses it.
    assert_eq!(server.request("POST", "/", "").0, "HTTP/1.1 403 Forbidden");
    // A refusal is exit 1 with the problem's detail; the help says where the token
    // comes from.
    let refused = lists(&server, &["remove", "deny", "client_ip", "198.51.100.0/24"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("in the configuration"));
    let help = weir().args(["lists", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("WEIR_ADMIN_TOKEN"), "{help}");
}

#[test]
fn bad_input_is_refused_with_the_field_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(
        dir.path(),
        "weir.yaml",
        "",
        "overrides:\n  file: overrides.json\n",
    );
    let server = Server::start(&path);
    let long = "k".repeat(513);
    let cases: Vec<(&str, String, &str, u16, &str)> = vec![
        (
            "PUT",
            "/admin/api/lists/maybe/client_ip/10.0.0.1".into(),
            "",
            400,
            "`list`",
        ),
        (
            "PUT",
            "/admin/api/lists/deny/cookie/x".into(),
            "",
            400,
            "`kind`",
        ),
        (
            "PUT",
            "/admin/api/lists/deny/client_ip/10.0.0.300".into(),
            "",
            400,
            "`entry`",
        ),
        (
            "PUT",
            "/admin/api/lists/deny/client_ip/10.0.0.0%2F33".into(),
            "",
            400,
            "`entry`",
        ),
        (
            "PUT",
            format!("/admin/api/lists/deny/api_key/{long}"),
            "",
            400,
            "`entry`",
        ),
        (
            "PUT",
            "/admin/api/lists/deny/api_key/a%0Ab".into(),
            "",
            400,
            "`entry`",
        ),
        (
            "PUT",
            "/admin/api/lists/deny/api_key/a%E2%80%AEb".into(),
            "",
            400,
            "`entry`",
        ),
        (
            "PUT",
            BLOCK.into(),
            "{\"reason\": \"a\\u202eb\"}",
            400,
            "`reason`",
        ),
        (
            "PUT",
            "/admin/api/lists/deny/client_ip/%ff".into(),
            "",
            400,
            "`entry`",
        ),
        (
            "PUT",
            BLOCK.into(),
            r#"{"expires_at": "2001-01-01T00:00:00Z"}"#,
            400,
            "`expires_at`",
        ),
        (
            "PUT",
            BLOCK.into(),
            r#"{"expires_at": "tomorrow"}"#,
            400,
            "`expires_at`",
        ),
        (
            "PUT",
            BLOCK.into(),
            r#"{"reasons": "typo"}"#,
            400,
            "reasons",
        ),
        (
            "PUT",
            BLOCK.into(),
            r#"{"reason": "a", "reason": "b"}"#,
            400,
            "reason",
        ),
        (
            "DELETE",
            "/admin/api/lists/deny/client_ip/198.51.100.0%2F24".into(),
            "",
            409,
            "in the configuration",
        ),
        ("DELETE", BLOCK.into(), "", 404, "set at runtime"),
        (
            "GET",
            "/admin/api/lists?list=grey".into(),
            "",
            400,
            "`list`",
        ),
    ];
    for (method, path, body, status, says) in &cases {
        let (got, answer) = call(admin(&server), method, path, body, true);
        assert_eq!(
            (got, answer.contains(says)),
            (*status, true),
            "{method} {path}: {answer}"
        );
    }
    let (status, _) = call(admin(&server), "PUT", BLOCK, "", false);
    assert_eq!(status, 401);
    assert_eq!(listed(&server), serde_json::json!([]));
    assert!(!dir.path().join("overrides.json").exists());

    // Two spellings of one block are one entry: the second replaces the first.
    for spelling in ["203.0.113.9%2F24", "::ffff:203.0.113.0%2F120"] {
        let path = format!("/admin/api/lists/deny/client_ip/{spelling}");
        assert_eq!(call(admin(&server), "PUT", &path, "", true).0, 200);
    }
    let entries = listed(&server);
    assert_eq!(entries.as_array().unwrap().len(), 1, "{entries}");
    assert_eq!(entries[0]["entry"], "203.0.113.0/24");
}
