//! Two `weir serve` instances sharing one Redis (and one Redis Cluster, and the primary
//! Redis Sentinel names): together they
//! admit exactly the limit, for every algorithm, under concurrent clients.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::Path;

use common::Server;
use weir_core::Algorithm;
use weir_testkit::{RedisCluster, RedisSentinels, RedisServer};

const LIMIT: u64 = 30;
const CLIENTS: usize = 32;
const REQUESTS_PER_CLIENT: usize = 4;

fn config(dir: &Path, store: &str) -> std::path::PathBuf {
    let mut yaml = format!("store:\n{store}  timeout: 2s\nrules:\n");
    for algorithm in Algorithm::ALL {
        yaml.push_str(&format!(
            "  - name: {algorithm}\n    algorithm: {algorithm}\n    limit: {LIMIT}\n    period: 1h\n"
        ));
    }
    let path = dir.join("weir.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Sends `CLIENTS` × `REQUESTS_PER_CLIENT` checks of one key to the two instances,
/// alternating, all at once; returns how many were allowed.
fn admitted(instances: &[Server; 2], rule: &str) -> u64 {
    let body = format!(r#"{{"rule": "{rule}", "key": "one-shared-key"}}"#);
    std::thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let body = &body;
                s.spawn(move || {
                    let mut allowed = 0;
                    for r in 0..REQUESTS_PER_CLIENT {
                        let (status, reply) =
                            instances[(c + r) % 2].request("POST", "/v1/check", body);
                        match status.as_str() {
                            "HTTP/1.1 200 OK" => allowed += 1,
                            "HTTP/1.1 429 Too Many Requests" => {}
                            other => panic!("{other}: {reply}"),
                        }
                    }
                    allowed
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    })
}

fn exactly_the_limit_across_instances(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    exactly_the_limit_across_instances_in(dir.path(), store);
}

fn exactly_the_limit_across_instances_in(dir: &Path, store: &str) {
    let config = config(dir, store);
    let instances = [Server::start(&config), Server::start(&config)];
    for algorithm in Algorithm::ALL {
        assert_eq!(admitted(&instances, algorithm.name()), LIMIT, "{algorithm}");
    }
}

#[test]
fn two_instances_on_one_redis_admit_exactly_the_limit() {
    let redis = RedisServer::start();
    exactly_the_limit_across_instances(&format!("  type: redis\n  url: {}\n", redis.url()));
}

#[test]
fn two_instances_on_a_redis_cluster_admit_exactly_the_limit() {
    let cluster = RedisCluster::start();
    let nodes = cluster.urls().join(", ");
    exactly_the_limit_across_instances(&format!("  type: redis_cluster\n  nodes: [{nodes}]\n"));
}

#[test]
fn two_instances_through_redis_sentinel_admit_exactly_the_limit() {
    let sentinels = RedisSentinels::start();
    let dir = tempfile::tempdir().unwrap();
    let store = common::sentinel_store(&sentinels, dir.path());
    exactly_the_limit_across_instances_in(dir.path(), &store);
}

#[test]
fn serve_starts_degraded_while_redis_is_down_and_recovers_by_itself() {
    // Held (connections refused) until the server takes it, so nothing else can.
    let reserved = RedisServer::reserve_port();
    let url = reserved.url();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    std::fs::write(
        &path,
        format!("store:\n  type: redis\n  url: {url}\n  timeout: 100ms\nrules:\n  - name: api\n    algorithm: gcra\n    limit: 10\n    period: 1m\n"),
    )
    .unwrap();
    let weir = Server::start(&path);
    let body = r#"{"rule": "api", "key": "k"}"#;
    let (status, reply) = weir.request("GET", "/readyz", "");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable", "{reply}");
    assert!(reply.contains("degraded"), "{reply}");
    let (status, reply) = weir.request("POST", "/v1/check", body);
    assert_eq!(
        status, "HTTP/1.1 503 Service Unavailable",
        "a store failure, never a denial: {reply}"
    );
    let _redis = RedisServer::start_on(reserved);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while weir.request("GET", "/readyz", "").0 != "HTTP/1.1 200 OK" {
        assert!(
            std::time::Instant::now() < deadline,
            "weir did not reconnect"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(weir.request("POST", "/v1/check", body).0, "HTTP/1.1 200 OK");
}

/// `weir serve` on `redis` with a 100 ms timeout and one rule, `api` (GCRA, 10 a
/// minute, and `more` of its lines); the directory holding its file goes with it.
fn on_redis_with_timeout(redis: &RedisServer, more: &str) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.yaml");
    let text = format!(
        "store:\n  type: redis\n  url: {}\n  timeout: 100ms\nrules:\n  - name: api\n    algorithm: gcra\n    limit: 10\n    period: 1m\n{more}",
        redis.url()
    );
    std::fs::write(&path, text).unwrap();
    (Server::start(&path), dir)
}

#[test]
fn a_dead_redis_is_a_503_within_the_timeout_never_a_denial() {
    let mut redis = RedisServer::start();
    let (weir, _dir) = on_redis_with_timeout(&redis, "");
    let body = r#"{"rule": "api", "key": "k"}"#;
    assert_eq!(weir.request("POST", "/v1/check", body).0, "HTTP/1.1 200 OK");
    redis.kill();
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let (status, reply) = weir.request("POST", "/v1/check", body);
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable", "{reply}");
        assert!(reply.contains("/problems/store-unavailable"), "{reply}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
}

/// A store failure is answered alike at every door, with a fixed detail: the Redis
/// client's own error (addresses, versions, "Connection refused") stays in weir's log
/// and metrics, never in a public answer.
#[test]
fn a_store_failure_tells_callers_nothing_of_the_store() {
    let mut redis = RedisServer::start();
    let (weir, _dir) = on_redis_with_timeout(
        &redis,
        "    match: { path_prefix: / }\n    failure: closed\n",
    );
    let check = r#"{"rule": "api", "key": "k"}"#;
    let decide = r#"{"method": "GET", "path": "/books", "client_ip": "192.0.2.1"}"#;
    assert_eq!(
        weir.request("POST", "/v1/check", check).0,
        "HTTP/1.1 200 OK"
    );
    assert_eq!(
        weir.request("POST", "/v1/decide", decide).0,
        "HTTP/1.1 200 OK"
    );
    redis.kill();
    for (door, body) in [("/v1/check", check), ("/v1/decide", decide)] {
        for _ in 0..3 {
            let (status, reply) = weir.request("POST", door, body);
            assert_eq!(
                status, "HTTP/1.1 503 Service Unavailable",
                "{door}: {reply}"
            );
            let problem: serde_json::Value = serde_json::from_str(&reply).unwrap();
            assert_eq!(problem["type"], "/problems/store-unavailable", "{door}");
            assert_eq!(
                problem["detail"],
                "the rate limit store cannot decide right now; try again shortly",
                "{door}: {reply}"
            );
            let port = redis.url().rsplit(':').next().unwrap().to_owned();
            for leak in [
                "redis",
                "refused",
                "timed out",
                "127.0.0.1",
                port.as_str(),
                weir_testkit::acl::PASSWORD,
            ] {
                assert!(
                    !reply.to_lowercase().contains(leak),
                    "{door} says {leak:?}: {reply}"
                );
            }
        }
    }
}
