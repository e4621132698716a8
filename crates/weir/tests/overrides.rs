//! Overrides set at runtime, on the real binary: set through one instance's admin API
//! (or `weir override`) and applied by the other within a second on Redis and a Redis
//! Cluster, kept across a restart (the Redis table, the memory store's file), applied
//! through the gateway and `/v1/decide` alike, a key's state read under the new limit,
//! bad input refused with nothing stored, the order (override > plans file custom
//! limit > plan > rule), and each change's audit line and place on the status page.
//!
//! Expiry at `expires_at` is asserted on an injected clock in the engine's unit tests
//! (`engine/overrides/tests.rs`): the binary reads the system clock.
#![allow(clippy::unwrap_used, reason = "test")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Server, weir};
use weir_testkit::{RedisCluster, RedisServer};

/// The admin token of the configurations under test.
const TOKEN: &str = "overrides-test-admin-token-0123456789";

/// The time within which every instance applies an override (see DESIGN.md).
const WITHIN: Duration = Duration::from_secs(1);

/// A configuration with the admin API, `store` (YAML lines under `store:`, or none),
/// `more` top-level lines, and the rule `api`: 2 requests an hour per client address.
fn config(dir: &Path, name: &str, store: &str, more: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let store = if store.is_empty() {
        String::new()
    } else {
        format!("store:\n{store}")
    };
    let text = format!(
        "{store}{more}admin:\n  token_file: token\nrules:\n  - name: api\n    match: {{ path_prefix: / }}\n    key: [client_ip]\n    algorithm: fixed_window\n    limit: 2\n    period: 1h\n  - name: logins\n    algorithm: sliding_log\n    limit: 3\n    period: 15m\n  - name: bucket\n    algorithm: token_bucket\n    limit: 100\n    period: 1h\n  - name: slots\n    match: {{ path_prefix: /slots }}\n    algorithm: concurrency\n    limit: 3\n"
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

/// The overrides `server` lists.
fn listed(server: &Server) -> serde_json::Value {
    let (status, body) = call(admin(server), "GET", "/admin/api/overrides", "", true);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Waits until `server` lists `count` overrides; returns how long it took.
fn applied_within(server: &Server, count: usize) -> Duration {
    let start = Instant::now();
    while listed(server).as_array().unwrap().len() != count {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "not applied: {}",
            listed(server)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// `/v1/decide` for a GET of `/` from 127.0.0.1 on the listener at `addr`: whether it
/// is allowed, and the `api` rule's limit in force.
fn decide(addr: &str) -> (bool, u64) {
    let (status, body) = call(
        addr,
        "POST",
        "/v1/decide",
        r#"{"method": "GET", "path": "/", "client_ip": "127.0.0.1"}"#,
        false,
    );
    assert!(status == 200 || status == 429, "{status} {body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["allowed"].as_bool().unwrap(), status == 200);
    let limit = answer["quotas"][0]["limit"].as_u64().unwrap();
    (answer["allowed"].as_bool().unwrap(), limit)
}

const KEY: &str = "/admin/api/overrides/api/client_ip=127.0.0.1";
const FIVE: &str = r#"{"limit": 5, "reason": "trial"}"#;

#[test]
fn on_redis_an_override_set_on_one_instance_applies_on_the_other_within_a_second() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("  type: redis\n  url: {}\n", redis.url());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(common::echo::start());
    let gateway = config(
        dir.path(),
        "gateway.yaml",
        &store,
        &format!("upstream:\n  url: http://{upstream}\n"),
    );
    let decision = config(dir.path(), "decision.yaml", &store, "");
    let a = Server::start(&gateway);
    let b = Server::start(&decision);

    let (status, body) = call(admin(&b), "PUT", KEY, FIVE, true);
    assert_eq!(status, 200, "{body}");
    let took = applied_within(&a, 1);
    assert!(
        took < WITHIN,
        "applied by the other instance after {took:?}"
    );
    // One budget of 5 on the shared store, whichever door and instance counts it.
    for _ in 0..3 {
        assert_eq!(a.request("GET", "/", "").0, "HTTP/1.1 200 OK");
    }
    assert_eq!(decide(&b.addr), (true, 5));
    assert_eq!(decide(admin(&a)), (true, 5));
    assert_eq!(decide(&b.addr), (false, 5));
    assert_eq!(
        a.request("GET", "/", "").0,
        "HTTP/1.1 429 Too Many Requests"
    );

    // Deleted on the gateway, gone from the other within a second: the rule's 2 again.
    let (status, body) = call(admin(&a), "DELETE", KEY, "", true);
    assert_eq!(status, 200, "{body}");
    let took = applied_within(&b, 0);
    assert!(
        took < WITHIN,
        "deleted on the other instance after {took:?}"
    );
    assert_eq!(decide(&b.addr), (false, 2));

    // Kept in Redis across restarts.
    let (status, body) = call(admin(&a), "PUT", KEY, FIVE, true);
    assert_eq!(status, 200, "{body}");
    drop((a, b));
    let c = Server::start(&decision);
    assert_eq!(listed(&c)[0]["limit"], 5);
    assert_eq!(decide(&c.addr).1, 5);
}

#[test]
fn on_memory_an_override_set_by_the_cli_is_kept_in_the_file_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("state")).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(common::echo::start());
    let path = config(
        dir.path(),
        "weir.yaml",
        "",
        &format!("upstream:\n  url: http://{upstream}\noverrides:\n  file: state/overrides.json\n"),
    );
    let server = Server::start(&path);
    let set = weir()
        .args([
            "override",
            "set",
            "api",
            "client_ip=127.0.0.1",
            "--limit",
            "4",
        ])
        .args([
            "--reason",
            "load test",
            "--expires-at",
            "2099-01-01T00:00:00Z",
        ])
        .args(["--admin", &format!("http://{}", admin(&server))])
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&set.stdout).unwrap();
    assert_eq!(answer["before"]["limit"], 2);
    assert_eq!(answer["after"]["limit"], 4);
    assert_eq!(answer["override"]["expires_at"], "2099-01-01T00:00:00Z");
    // Through the gateway and /v1/decide, one budget of 4.
    for _ in 0..3 {
        assert_eq!(server.request("GET", "/", "").0, "HTTP/1.1 200 OK");
    }
    assert_eq!(decide(admin(&server)), (true, 4));
    assert_eq!(
        server.request("GET", "/", "").0,
        "HTTP/1.1 429 Too Many Requests"
    );
    let file = std::fs::read_to_string(dir.path().join("state/overrides.json")).unwrap();
    assert!(file.contains("\"load test\""), "{file}");
    // It outlives a reload (the file changed, and read again).
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("period: 1h", "period: 2h")).unwrap();
    let start = Instant::now();
    while !call(admin(&server), "GET", "/metrics", "", false)
        .1
        .contains("weir_config_reloads_total{result=\"ok\"} 1")
    {
        assert!(start.elapsed() < Duration::from_secs(10), "not reloaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listed(&server)[0]["limit"], 4);
    assert_eq!(decide(admin(&server)).1, 4);

    drop(server);
    let server = Server::start(&path);
    let listed = listed(&server);
    assert_eq!(listed[0]["key"], "client_ip=127.0.0.1");
    assert_eq!(listed[0]["reason"], "load test");
    assert_eq!(decide(admin(&server)), (true, 4));

    let list = weir()
        .args(["override", "list", "--rule", "api"])
        .args(["--admin", &format!("http://{}", admin(&server))])
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(list.status.success());
    assert!(String::from_utf8_lossy(&list.stdout).contains("load test"));
    // A refusal is exit 1 with the problem's detail.
    let refused = weir()
        .args(["override", "delete", "nope", "k"])
        .args(["--admin", &format!("http://{}", admin(&server))])
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no rule is named `nope`"));
    // The help says where the token comes from and which limit wins.
    let help = weir().args(["override", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for says in [
        "WEIR_ADMIN_TOKEN",
        "WEIR_ADMIN_URL",
        "override > plans file custom limit > plan > rule",
    ] {
        assert!(help.contains(says), "{help}");
    }
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
    let put = |path: &str, body: &str| call(admin(&server), "PUT", path, body, true);
    let cases: &[(&str, &str, u16, &str)] = &[
        (
            "/admin/api/overrides/nope/client_ip=127.0.0.1",
            FIVE,
            404,
            "no rule is named `nope`",
        ),
        (
            "/admin/api/overrides/api/client_ip=300.0.0.1",
            FIVE,
            400,
            "`key`",
        ),
        ("/admin/api/overrides/api/user=1", FIVE, 400, "`key`"),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 0}"#,
            400,
            "`limit`",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 1000000001}"#,
            400,
            "`limit`",
        ),
        (
            "/admin/api/overrides/logins/ana",
            r#"{"limit": 10001}"#,
            400,
            "sliding_log",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 5, "burst": 9}"#,
            400,
            "`burst`",
        ),
        (
            "/admin/api/overrides/slots/client_ip=127.0.0.1",
            r#"{"limit": 10001}"#,
            400,
            "from 1 to 10000",
        ),
        (
            "/admin/api/overrides/slots/client_ip=127.0.0.1",
            r#"{"limit": 5, "period": "1h"}"#,
            400,
            "`period`",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            "{\"limit\": 5, \"reason\": \"trial \u{202e}lairt\"}",
            400,
            "`reason`",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 5, "period": "0s"}"#,
            400,
            "`period`",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 5, "expires_at": "2001-01-01T00:00:00Z"}"#,
            400,
            "`expires_at`",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 5, "expires_at": "tomorrow"}"#,
            400,
            "`expires_at`",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 5, "limit": 6}"#,
            400,
            "limit",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": 5, "extra": 1}"#,
            400,
            "extra",
        ),
        (
            "/admin/api/overrides/api/client_ip=127.0.0.1",
            r#"{"limit": "#,
            400,
            "",
        ),
    ];
    for (path, body, status, says) in cases {
        let (got, answer) = put(path, body);
        assert_eq!(got, *status, "{path} {body}: {answer}");
        assert!(answer.contains(says), "{path} {body}: {answer}");
    }
    let (status, _) = call(admin(&server), "PUT", KEY, FIVE, false);
    assert_eq!(status, 401);
    let (status, _) = call(admin(&server), "GET", "/admin/api/overrides", "", false);
    assert_eq!(status, 401);
    let (status, _) = call(
        admin(&server),
        "GET",
        "/admin/api/overrides?rule=nope",
        "",
        true,
    );
    assert_eq!(status, 404);
    assert_eq!(listed(&server), serde_json::json!([]));
    assert!(!dir.path().join("overrides.json").exists());
    assert_eq!(decide(&server.addr).1, 2);

    // An IPv4-mapped address is the IPv4 key; the answer gives the key as stored.
    let (status, body) = put("/admin/api/overrides/api/client_ip=::ffff:127.0.0.1", FIVE);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""key":"client_ip=127.0.0.1""#), "{body}");
    assert_eq!(decide(&server.addr).1, 5);
    let metrics = call(&server.addr, "GET", "/metrics", "", false).1;
    assert!(
        metrics.contains("weir_overrides_in_force{rule=\"api\"} 1"),
        "{metrics}"
    );
}

/// How many of `n` `/v1/check`s of `key` under `rule` are allowed.
fn allowed(server: &Server, rule: &str, key: &str, n: usize) -> usize {
    let body = format!(r#"{{"rule": "{rule}", "key": "{key}"}}"#);
    (0..n)
        .filter(|_| call(&server.addr, "POST", "/v1/check", &body, false).0 == 200)
        .count()
}

#[test]
fn a_key_keeps_its_state_under_a_new_limit_and_never_gets_more_than_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), "weir.yaml", "", ""));
    let set = |rule: &str, key: &str, limit: u64| {
        let body = format!(r#"{{"limit": {limit}}}"#);
        let path = format!("/admin/api/overrides/{rule}/{key}");
        let (status, answer) = call(admin(&server), "PUT", &path, &body, true);
        assert_eq!(status, 200, "{answer}");
    };
    // A bucket with 98 tokens left, lowered to 5: it holds 5, not 98.
    assert_eq!(allowed(&server, "bucket", "k", 2), 2);
    set("bucket", "k", 5);
    assert_eq!(allowed(&server, "bucket", "k", 10), 5);
    // A log that counted 2, lowered to 1: denied until they leave it; raised to 10:
    // 8 more, exactly.
    assert_eq!(allowed(&server, "logins", "ana", 2), 2);
    set("logins", "ana", 1);
    assert_eq!(allowed(&server, "logins", "ana", 3), 0);
    set("logins", "ana", 10);
    assert_eq!(allowed(&server, "logins", "ana", 20), 8);
    // Other keys keep the rule's limit.
    assert_eq!(allowed(&server, "logins", "bo", 5), 3);
}

#[test]
fn check_config_refuses_an_overrides_file_it_cannot_keep() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "  type: redis\n  url: redis://127.0.0.1:1\n",
            "overrides:\n  file: o.json\n",
            "overrides.file: on a shared store",
        ),
        (
            "",
            "overrides:\n  file: nowhere/o.json\n",
            "overrides.file: the directory",
        ),
        ("", "overrides:\n  file: token\n", "overrides.file: "),
    ];
    for (store, more, says) in cases {
        let path = config(dir.path(), "weir.yaml", store, more);
        let out = weir().arg("check-config").arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{says}: {err}");
    }
}

#[test]
fn on_a_redis_cluster_an_override_applies_on_every_instance_within_a_second() {
    let cluster = RedisCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster.urls().join(", ");
    let store = format!("  type: redis_cluster\n  nodes: [{nodes}]\n");
    let path = config(dir.path(), "weir.yaml", &store, "");
    let (a, b) = (Server::start(&path), Server::start(&path));
    let (status, body) = call(admin(&a), "PUT", KEY, FIVE, true);
    assert_eq!(status, 200, "{body}");
    let took = applied_within(&b, 1);
    assert!(
        took < WITHIN,
        "applied by the other instance after {took:?}"
    );
    assert_eq!(decide(&b.addr), (true, 5));
}

/// A decision API with plans from a file: the rule `pro` (10 an hour, for the `pro`
/// plan) and the rule `free` (2 an hour, the default plan), keyed on the API key;
/// `k-pro` is on `pro`, `k-custom` on `pro` with a custom limit of 20.
fn plans_config(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    std::fs::write(
        dir.join("plans.yaml"),
        "keys:\n  k-pro: pro\n  k-custom: { plan: pro, limit: 20 }\n",
    )
    .unwrap();
    let text = "admin:\n  token_file: token\nidentities:\n  api_key:\n    header: X-Api-Key\nplans:\n  file: plans.yaml\n  identity: api_key\n  default: free\nrules:\n  - name: pro\n    match: { path_prefix: / }\n    plans: [pro]\n    key: [api_key]\n    algorithm: fixed_window\n    limit: 10\n    period: 1h\n  - name: free\n    match: { path_prefix: / }\n    plans: [free]\n    key: [api_key]\n    algorithm: fixed_window\n    limit: 2\n    period: 1h\n";
    let path = dir.join("weir.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `/v1/decide` for a GET of `/` with the API key `key`: whether it is allowed, and
/// the name and limit of every rule that applied.
fn decide_key(server: &Server, key: &str) -> (bool, Vec<(String, u64)>) {
    let body = format!(
        r#"{{"method": "GET", "path": "/", "client_ip": "127.0.0.1", "headers": {{"x-api-key": "{key}"}}}}"#
    );
    let (status, answer) = call(&server.addr, "POST", "/v1/decide", &body, false);
    assert!(status == 200 || status == 429, "{status} {answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let quotas = answer["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            let rule = q["rule"]
                .as_str()
                .unwrap_or_else(|| panic!("{q}"))
                .to_owned();
            (rule, q["limit"].as_u64().unwrap())
        })
        .collect();
    (status == 200, quotas)
}

fn pro(limit: u64) -> Vec<(String, u64)> {
    vec![("pro".to_owned(), limit)]
}

#[test]
fn an_override_wins_over_a_custom_limit_which_wins_over_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&plans_config(dir.path()));
    let set = |key: &str, limit: u64| {
        let path = format!("/admin/api/overrides/pro/api_key={key}");
        let body = format!(r#"{{"limit": {limit}}}"#);
        let (status, answer) = call(admin(&server), "PUT", &path, &body, true);
        assert_eq!(status, 200, "{answer}");
        answer
    };
    // The plan's rule, and the plans file's custom limit over it.
    assert_eq!(decide_key(&server, "k-pro"), (true, pro(10)));
    assert_eq!(decide_key(&server, "k-custom"), (true, pro(20)));
    assert_eq!(
        decide_key(&server, "k-other"),
        (true, vec![("free".to_owned(), 2)])
    );

    // An override over the custom limit: exactly 5 in the hour (1 spent already). The
    // answer says what the key had before, and where it came from.
    let answer: serde_json::Value = serde_json::from_str(&set("k-custom", 5)).unwrap();
    assert_eq!(answer["before"]["limit"], 20, "{answer}");
    assert_eq!(answer["before"]["from"], "plans file", "{answer}");
    assert_eq!(answer["after"]["from"], "override", "{answer}");
    for _ in 0..4 {
        assert_eq!(decide_key(&server, "k-custom"), (true, pro(5)));
    }
    assert_eq!(decide_key(&server, "k-custom"), (false, pro(5)));
    // An override over the plan's limit; the other key of the plan keeps its own.
    let answer: serde_json::Value = serde_json::from_str(&set("k-pro", 7)).unwrap();
    assert_eq!(answer["before"]["limit"], 10, "{answer}");
    assert_eq!(answer["before"]["from"], "rule", "{answer}");
    assert_eq!(decide_key(&server, "k-pro"), (true, pro(7)));
    assert_eq!(decide_key(&server, "k-custom"), (false, pro(5)));

    // Deleted: the custom limit again (5 counted of 20), and the plan's for the other.
    let (status, body) = call(
        admin(&server),
        "DELETE",
        "/admin/api/overrides/pro/api_key=k-custom",
        "",
        true,
    );
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["after"]["limit"], 20, "{answer}");
    assert_eq!(answer["after"]["from"], "plans file", "{answer}");
    assert_eq!(decide_key(&server, "k-custom"), (true, pro(20)));
    assert_eq!(decide_key(&server, "k-pro"), (true, pro(7)));

    // An override never makes a rule apply: a free key stays on the free rule.
    set("k-other", 50);
    assert_eq!(
        decide_key(&server, "k-other"),
        (true, vec![("free".to_owned(), 2)])
    );
    assert_eq!(
        decide_key(&server, "k-other"),
        (false, vec![("free".to_owned(), 2)])
    );
}

#[test]
fn a_change_is_an_audit_line_and_the_status_page_shows_the_override() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "weir.yaml", "", "");
    let log = dir.path().join("weir.log");
    let server = Server::start_with(
        &path,
        &["--log-format", "json"],
        std::fs::File::create(&log).unwrap().into(),
    );
    let body = r#"{"limit": 5, "period": "1m", "reason": "partner \"batch\"", "expires_at": "2099-01-01T00:00:00Z"}"#;
    let (status, answer) = call(admin(&server), "PUT", KEY, body, true);
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = call(admin(&server), "DELETE", KEY, "", true);
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = call(admin(&server), "PUT", KEY, FIVE, true);
    assert_eq!(status, 200, "{answer}");

    // Three audit lines, in order, each naming the rule, key, both limits and the
    // reason; written before the answer.
    let audits: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["target"] == "weir::audit")
        .map(|line| line["fields"].clone())
        .collect();
    assert_eq!(audits.len(), 3, "{audits:#?}");
    let rule = "2 per 3600s, capacity 2 (rule)";
    let expected = [
        (
            "admin: override set",
            rule,
            "5 per 60s, capacity 5 (override)",
            "partner \\\"batch\\\"",
            "2099-01-01T00:00:00Z",
        ),
        (
            "admin: override deleted",
            "5 per 60s, capacity 5 (override)",
            rule,
            "partner \\\"batch\\\"",
            "2099-01-01T00:00:00Z",
        ),
        (
            "admin: override set",
            rule,
            "5 per 3600s, capacity 5 (override)",
            "trial",
            "never",
        ),
    ];
    for (audit, (message, old, new, reason, expires)) in audits.iter().zip(expected) {
        assert_eq!(audit["message"], message, "{audit}");
        assert_eq!(audit["rule"], "api", "{audit}");
        assert_eq!(audit["key"], "client_ip=127.0.0.1", "{audit}");
        assert_eq!(audit["old_limit"], old, "{audit}");
        assert_eq!(audit["new_limit"], new, "{audit}");
        assert_eq!(audit["reason"], reason, "{audit}");
        assert_eq!(audit["expires_at"], expires, "{audit}");
        assert!(
            audit["by"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{audit}"
        );
        assert!(audit["at"].as_str().unwrap().ends_with('Z'), "{audit}");
    }

    // The status page has the table its script fills from the overrides in force.
    let (status, page) = call(admin(&server), "GET", "/admin/", "", false);
    assert_eq!(status, 200);
    assert!(page.contains("<table id=\"overrides\">"), "{page}");
    let (status, script) = call(admin(&server), "GET", "/admin/page.js", "", false);
    assert_eq!(status, 200);
    assert!(script.contains("renderOverrides(await api(\"overrides\"))"));
    let shown = listed(&server);
    assert_eq!(shown.as_array().unwrap().len(), 1, "{shown}");
    assert_eq!(shown[0]["rule"], "api");
    assert_eq!(shown[0]["key"], "client_ip=127.0.0.1");
    assert_eq!(shown[0]["limit"], 5);
    assert_eq!(shown[0]["reason"], "trial");
    assert_eq!(shown[0]["expires_at"], serde_json::Value::Null);
    assert_eq!(shown[0]["period_seconds"], serde_json::Value::Null);
}
