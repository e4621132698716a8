//! Bytes per key in Redis for each algorithm's state, beside the floor Redis itself sets.
//!
//! `cargo bench -p weir-store --bench redis_memory`
//!
//! For each algorithm, a fresh `redis-server` takes 100,000 keys through weir's script
//! (one check each, so every key holds one state and its expiry), and `INFO memory`'s
//! `used_memory` before and after gives the bytes per key. The floor is the same number
//! of keys, with names of the same length, each holding one integer with an expiry
//! (`SET name 1796032800000000 PX 3600000`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Policy};
use weir_store::{Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store, SystemClock};
use weir_testkit::RedisServer;

const KEYS: usize = 100_000;
const TASKS: usize = 32;

fn used_memory(server: &RedisServer) -> f64 {
    let info = server.cli(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

async fn fill(server: &RedisServer, policy: Policy, clock: RedisClock) -> f64 {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir".into(),
        timeout: Duration::from_secs(5),
        clock,
        // Used only on the instances' clock.
        window_counters: true,
        access: Default::default(),
    };
    let store = Arc::new(
        RedisStore::connect(&config, Arc::new(SystemClock::new()))
            .await
            .unwrap(),
    );
    let before = used_memory(server);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in (t..KEYS).step_by(TASKS) {
                    let identity = format!("user-{i:06}");
                    let key = Key {
                        rule: "api",
                        identity: &identity,
                    };
                    store.check(key, &policy, 1).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (used_memory(server) - before) / KEYS as f64
}

fn floor(server: &RedisServer) -> f64 {
    let before = used_memory(server);
    // Names as long as weir's: "weir:{user-000001}:api".
    let commands: String = (0..KEYS)
        .map(|i| format!("SET weir:[user-{i:06}]:api 1796032800000000 PX 3600000\n"))
        .collect();
    let path = server.dir().join("floor.txt");
    std::fs::write(&path, commands).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "redis-cli -p {} --pipe < {}",
            server.port(),
            path.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success());
    (used_memory(server) - before) / KEYS as f64
}

#[tokio::main]
async fn main() {
    let server = RedisServer::start();
    let floor = floor(&server);
    println!(
        "Redis bytes per key, {KEYS} keys (redis-server {}):",
        server
            .cli(&["INFO", "server"])
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
    );
    println!("  floor: one integer with an expiry        {floor:>6.1}");
    let hour = Duration::from_secs(3600);
    let cases = [
        (
            "gcra, 100/1h (one integer)",
            Policy::new(Algorithm::Gcra, 100, hour, None),
            RedisClock::Server,
        ),
        (
            "gcra, 7/1h (integer:remainder)",
            Policy::new(Algorithm::Gcra, 7, hour, None),
            RedisClock::Server,
        ),
        (
            "leaky_bucket, 100/1h",
            Policy::new(Algorithm::LeakyBucket, 100, hour, None),
            RedisClock::Server,
        ),
        (
            "token_bucket, 100/1h",
            Policy::new(Algorithm::TokenBucket, 100, hour, None),
            RedisClock::Server,
        ),
        (
            "fixed_window, 100/1h",
            Policy::new(Algorithm::FixedWindow, 100, hour, None),
            RedisClock::Server,
        ),
        (
            "fixed_window, 100/1h, window counters",
            Policy::new(Algorithm::FixedWindow, 100, hour, None),
            RedisClock::Local,
        ),
        (
            "sliding_window, 100/1h",
            Policy::new(Algorithm::SlidingWindow, 100, hour, None),
            RedisClock::Server,
        ),
        (
            "sliding_log, 100/1h (one entry)",
            Policy::new(Algorithm::SlidingLog, 100, hour, None),
            RedisClock::Server,
        ),
    ];
    for (name, policy, clock) in cases {
        server.cli(&["FLUSHALL"]);
        let bytes = fill(&server, policy.unwrap(), clock).await;
        println!("  {name:<40} {bytes:>6.1}  ({:.2}x floor)", bytes / floor);
    }
}
