//! Bans and lists on the real binary: a ban started on one `weir serve` is enforced by
//! another sharing its Redis, listed by both, and lifted through either's admin API
//! (the other follows within its cache's half second); allow and deny lists (and the
//! API keys file) reloaded without a restart, a forwarding header from an untrusted
//! peer never moving a client on or off a list.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Server;
use serde_json::Value;
use weir_testkit::{RedisCluster, RedisServer};

const TOKEN: &str = "test-admin-token-0123456789";

/// One HTTP/1.1 request to `addr` with `headers`; the status, the head and the body.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// The problem type of an answer (empty when it is not problem+json).
fn kind(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn admin(server: &Server, method: &str, path: &str) -> (u16, Value) {
    let auth = format!("Bearer {TOKEN}");
    let (status, _, body) = http(
        server.admin.as_deref().unwrap(),
        method,
        path,
        &[("authorization", &auth)],
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// Writes `text` to `path` beside, then renames: a reader never sees half a file.
fn write(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

/// An upstream answering 200 to everything, on its own thread and runtime.
fn upstream() -> std::net::SocketAddr {
    let (sent, addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            sent.send(common::echo::start().await).unwrap();
            std::future::pending::<()>().await;
        });
    });
    addr.recv().unwrap()
}

#[test]
fn a_ban_is_shared_across_instances_and_lifted_through_the_admin_api() {
    let redis = RedisServer::start();
    redis.grant_bans_and_concurrency();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("weir.yaml");
    // A store timeout a loaded host never reaches: a check that timed out would be
    // decided on the fail-open fallback, which knows no ban started on Redis.
    let text = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 2s\nupstream:\n  url: http://{}\nadmin:\n  token_file: token\nrules:\n  - name: api\n    match: {{ path_prefix: /api }}\n    algorithm: gcra\n    limit: 2\n    period: 1m\n    on_limited: {{ ban: 15m, after: 3, within: 10m }}\n",
        redis.url(),
        upstream()
    );
    std::fs::write(&config, text).unwrap();
    let a = Server::start(&config);
    let b = Server::start(&config);
    let on = |server: &Server| http(&server.addr, "GET", "/api/x", &[]);

    assert_eq!(on(&a).0, 200);
    assert_eq!(on(&b).0, 200);
    for server in [&a, &b, &a] {
        let (status, _, body) = on(server);
        assert_eq!(
            (status, kind(&body)),
            (429, "/problems/rate-limited".into())
        );
    }
    // The third denial (on A) started the ban; B enforces it on its next request.
    let (status, head, body) = on(&b);
    assert_eq!(
        (status, kind(&body)),
        (429, "/problems/banned".into()),
        "{body}"
    );
    let retry: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!((899..=900).contains(&retry), "retry-after {retry}");
    assert!(
        head.contains(&format!("ratelimit: \"api\";r=0;t={retry}")),
        "{head}"
    );
    for server in [&a, &b] {
        let (status, listed) = admin(server, "GET", "/admin/api/bans?rule=api");
        assert_eq!(status, 200);
        assert_eq!(listed["bans"][0]["key"], "client_ip=127.0.0.1", "{listed}");
    }

    // Lifted on B: B decides by the budget at once (empty: a plain denial)...
    let (status, lifted) = admin(&b, "DELETE", "/admin/api/bans/api/client_ip%3D127.0.0.1");
    assert_eq!((status, &lifted["lifted"]), (200, &Value::Bool(true)));
    assert_eq!(kind(&on(&b).2), "/problems/rate-limited");
    // ...and A within its cache's half second.
    let lifted_at = Instant::now();
    loop {
        let kind = kind(&on(&a).2);
        if kind == "/problems/rate-limited" {
            break;
        }
        assert_eq!(kind, "/problems/banned");
        assert!(
            lifted_at.elapsed() < Duration::from_millis(900),
            "A still bans"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, listed) = admin(&a, "GET", "/admin/api/bans");
    assert_eq!(listed["bans"], serde_json::json!([]));
    let metrics = http(a.admin.as_deref().unwrap(), "GET", "/metrics", &[]).2;
    assert!(
        metrics.contains("weir_bans_started_total{rule=\"api\"} 1"),
        "{metrics}"
    );
}

/// One admin request with a JSON body.
fn admin_json(server: &Server, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(server.admin.as_deref().unwrap()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: admin.test\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn a_ban_tripped_on_one_instance_is_listed_and_lifted_by_another_that_never_met_it() {
    let redis = RedisServer::start();
    redis.grant_bans_and_concurrency();
    listed_and_lifted_by_another(&format!("  type: redis\n  url: {}\n", redis.url()));
}

#[test]
fn on_a_redis_cluster_a_ban_is_listed_and_lifted_by_another_instance() {
    let cluster = RedisCluster::start();
    cluster.grant_bans_and_concurrency();
    let nodes = cluster.urls().join(", ");
    listed_and_lifted_by_another(&format!("  type: redis_cluster\n  nodes: [{nodes}]\n"));
}

/// Two instances on the store `store` (a `store:` section's body): a ban tripped on A
/// is listed by B, which never met the key, lifted through B, and A serves it again.
fn listed_and_lifted_by_another(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("weir.yaml");
    let text = format!(
        "store:\n{store}upstream:\n  url: http://{}\nadmin:\n  token_file: token\nrules:\n  - name: api\n    match: {{ path_prefix: /api }}\n    algorithm: gcra\n    limit: 2\n    period: 1m\n    on_limited: {{ ban: 15m, after: 3, within: 10m }}\n  - name: other\n    match: {{ path_prefix: /other }}\n    algorithm: gcra\n    limit: 2\n    period: 1m\n    on_limited: {{ ban: 1m, after: 1, within: 1m }}\n",
        upstream()
    );
    std::fs::write(&config, text).unwrap();
    let a = Server::start(&config);
    let b = Server::start(&config);
    let on_a = || kind(&http(&a.addr, "GET", "/api/x", &[]).2);

    // Every request on A: B never meets the key.
    for expected in ["", "", "/problems/rate-limited", "/problems/rate-limited"] {
        assert_eq!(on_a(), expected);
    }
    assert_eq!(on_a(), "/problems/rate-limited", "the ban's third denial");
    assert_eq!(on_a(), "/problems/banned");

    let (status, listed) = admin(&b, "GET", "/admin/api/bans");
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        (listed["total"].as_u64(), listed["truncated"].as_bool()),
        (Some(1), Some(false)),
        "{listed}"
    );
    let ban = &listed["bans"][0];
    assert_eq!(
        (ban["rule"].as_str(), ban["key"].as_str()),
        (Some("api"), Some("client_ip=127.0.0.1"))
    );
    let ends_in = ban["ends_in_ms"].as_u64().unwrap();
    assert!(
        (890_000..=900_000).contains(&ends_in),
        "ends in {ends_in} ms"
    );
    let (_, other) = admin(&b, "GET", "/admin/api/bans?rule=other");
    assert_eq!(
        (other["bans"].clone(), other["total"].as_u64()),
        (serde_json::json!([]), Some(0))
    );

    // Lifted through B, the budget given back through B: A serves the key again
    // within its cache's half second.
    let (status, lifted) = admin(&b, "DELETE", "/admin/api/bans/api/client_ip%3D127.0.0.1");
    assert_eq!((status, &lifted["lifted"]), (200, &Value::Bool(true)));
    let (status, _) = admin_json(
        &b,
        "POST",
        "/admin/api/reset",
        r#"{"rule":"api","key":"client_ip=127.0.0.1"}"#,
    );
    assert_eq!(status, 200);
    for server in [&a, &b] {
        let (_, listed) = admin(server, "GET", "/admin/api/bans?rule=api");
        assert_eq!(
            (listed["bans"].clone(), listed["total"].as_u64()),
            (serde_json::json!([]), Some(0))
        );
    }
    let lifted_at = Instant::now();
    loop {
        let (status, _, body) = http(&a.addr, "GET", "/api/x", &[]);
        if status == 200 {
            break;
        }
        assert_eq!(kind(&body), "/problems/banned");
        assert!(
            lifted_at.elapsed() < Duration::from_millis(900),
            "A still bans"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn hangup(server: &Server) {
    let status = Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// How many reloads with `result` the weir has counted.
fn reloads(server: &Server, result: &str) -> u64 {
    let text = http(server.admin.as_deref().unwrap(), "GET", "/metrics", &[]).2;
    let series = format!("weir_config_reloads_total{{result=\"{result}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series)?.parse().ok())
        .unwrap_or(0)
}

fn reload(server: &Server) {
    let before = reloads(server, "ok");
    hangup(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    while reloads(server, "ok") <= before {
        assert!(Instant::now() < deadline, "no reload was counted");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn lists_are_reloaded_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keys.txt"), "other-key\n").unwrap();
    let config = dir.path().join("weir.yaml");
    let upstream = upstream();
    let text = |lists: &str| {
        format!(
            "upstream:\n  url: http://{upstream}\nidentities:\n  api_key: {{ header: x-api-key }}\n{lists}rules:\n  - name: api\n    match: {{ path_prefix: /api }}\n    algorithm: fixed_window\n    limit: 1\n    period: 1h\n"
        )
    };
    write(&config, &text(""));
    let weir = Server::start(&config);
    let get = |headers: &[(&str, &str)]| {
        let (status, _, body) = http(&weir.addr, "GET", "/api/x", headers);
        (status, kind(&body))
    };
    assert_eq!(get(&[]).0, 200);
    assert_eq!(get(&[]).0, 429);

    // Denied: the client's own address, not the one it claims.
    write(
        &config,
        &text("lists:\n  deny: { client_ip: ['::ffff:127.0.0.0/104'] }\n"),
    );
    reload(&weir);
    for claimed in [&[][..], &[("x-forwarded-for", "192.0.2.1")][..]] {
        assert_eq!(get(claimed), (403, "/problems/denied".into()));
    }
    // Unrouted paths too, for a global deny list.
    assert_eq!(http(&weir.addr, "GET", "/elsewhere", &[]).0, 403);

    // Allowed by API key: the keys file is read again on reload.
    write(
        &config,
        &text("lists:\n  allow: { api_keys_file: keys.txt }\n"),
    );
    reload(&weir);
    assert_eq!(get(&[("x-api-key", "internal")]).0, 429);
    write(&dir.path().join("keys.txt"), "other-key\ninternal\n");
    reload(&weir);
    let (status, head, _) = http(&weir.addr, "GET", "/api/x", &[("x-api-key", "internal")]);
    assert_eq!(status, 200);
    assert!(head.contains("weir-shadow-limited: api"), "{head}");
    assert_eq!(get(&[]).0, 429);

    // A list that does not load keeps the last good one.
    write(
        &config,
        &text("lists:\n  allow: { client_ip: [127.0.0.1/40] }\n"),
    );
    let refused = reloads(&weir, "refused");
    hangup(&weir);
    let deadline = Instant::now() + Duration::from_secs(5);
    while reloads(&weir, "refused") <= refused {
        assert!(Instant::now() < deadline, "the bad list was not refused");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(get(&[("x-api-key", "internal")]).0, 200);
}
