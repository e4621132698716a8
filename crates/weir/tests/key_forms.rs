//! A long key is kept as `#` and its SHA-256; a caller who sends that text itself as a
//! key must get a budget of its own, on the memory store and on a real Redis.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::path::Path;

use common::Server;
use sha2::{Digest, Sha256};
use weir_testkit::RedisServer;

/// One request per hour per key.
fn config(dir: &Path, store: &str) -> std::path::PathBuf {
    let path = dir.join("weir.yaml");
    let yaml = format!(
        "{store}rules:\n  - name: once\n    algorithm: fixed_window\n    limit: 1\n    period: 1h\n"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The status line of a check of `key` under `once`.
fn check(server: &Server, key: &str) -> String {
    let body = serde_json::json!({"rule": "once", "key": key}).to_string();
    server.request("POST", "/v1/check", &body).0
}

fn a_hash_sent_as_a_key_is_not_the_long_key(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), store));
    let long = "k".repeat(200);
    let hash: String = Sha256::digest(long.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(check(&server, &long), "HTTP/1.1 200 OK");
    assert_eq!(check(&server, &long), "HTTP/1.1 429 Too Many Requests");
    // The long key's stored form, sent literally: another key, with its own budget.
    let named = format!("#{hash}");
    assert_eq!(check(&server, &named), "HTTP/1.1 200 OK");
    assert_eq!(check(&server, &named), "HTTP/1.1 429 Too Many Requests");
    // And `##...` (how that literal is kept) is a third.
    assert_eq!(check(&server, &format!("##{hash}")), "HTTP/1.1 200 OK");
}

#[test]
fn on_the_memory_store_a_long_keys_hash_is_not_its_budget() {
    a_hash_sent_as_a_key_is_not_the_long_key("");
}

#[test]
fn on_redis_a_long_keys_hash_is_not_its_budget() {
    let redis = RedisServer::start();
    a_hash_sent_as_a_key_is_not_the_long_key(&format!(
        "store:\n  type: redis\n  url: {}\n",
        redis.url()
    ));
}
