//! What TLS to Redis costs per check: weir's GCRA check over TLS beside the same check
//! in cleartext, on one Redis, in one run.
//!
//! `cargo bench -p weir-store --bench redis_tls`
//!
//! One `redis-server` listens in cleartext and, with a certificate made here, for TLS
//! (TLS 1.3, as rustls and Redis agree). Two stores of weir connect to it, one each way,
//! and each round runs the same checks through both, alternating which goes first: 64,000
//! GCRA checks of 10,000 identities from 16 concurrent tasks over the store's one
//! multiplexed connection, so the checks are pipelined alike (Redis reads about 16 calls
//! at a time). For each: Redis's CPU per check (its threads' time on CPU, from
//! `/proc/<pid>/task/*/schedstat`) and this process's CPU per check (weir's client, its
//! runtime and rustls), medians of the rounds, and the ratios TLS / cleartext of each
//! round's pair. redis-server is pinned to CPU 0 and this process to CPU 1 with
//! `taskset`, when the machine has two.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark code: a panic is a failure, with its message"
)]

#[path = "measure/mod.rs"]
mod measure;

use measure::{cpu_ns, median};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Policy};
use weir_store::{
    Key, RedisAccess, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, RedisTls, Store,
    SystemClock,
};
use weir_testkit::{RedisServer, TestCerts, TlsSetup};

const ROUNDS: usize = 7;
const CHECKS: usize = 64_000;
const TASKS: usize = 16;
const IDENTITIES: usize = 10_000;

/// One round's figures for one way of connecting.
#[derive(Debug, Clone, Copy)]
struct Sample {
    redis_cpu_us: f64,
    client_cpu_us: f64,
    checks_per_s: f64,
}

/// Runs `CHECKS` checks through `store` from `TASKS` tasks.
async fn drive(store: &Arc<RedisStore>, policy: Policy) {
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in (t..CHECKS).step_by(TASKS) {
                    let identity = format!("user-{}", i % IDENTITIES);
                    let key = Key {
                        rule: "api",
                        identity: &identity,
                    };
                    let decision = store.check(key, &policy, 1).await.unwrap();
                    assert!(decision.allowed, "the limit is out of reach");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

async fn round(store: &Arc<RedisStore>, server: &RedisServer, policy: Policy) -> Sample {
    let redis = server.pid().expect("redis-server is running");
    let me = std::process::id();
    let (redis_before, me_before, start) = (cpu_ns(redis), cpu_ns(me), Instant::now());
    drive(store, policy).await;
    let elapsed = start.elapsed();
    let per_check = |ns: u64| ns as f64 / 1e3 / CHECKS as f64;
    Sample {
        redis_cpu_us: per_check(cpu_ns(redis) - redis_before),
        client_cpu_us: per_check(cpu_ns(me) - me_before),
        checks_per_s: CHECKS as f64 / elapsed.as_secs_f64(),
    }
}

fn main() {
    let certs = TestCerts::new();
    let setup = TlsSetup {
        ca: &certs.ca,
        server: &certs.server,
        mutual: false,
    };
    let server = RedisServer::start_tls(&setup, &[]);
    measure::run_pinned(
        server.pid().expect("redis-server is running"),
        run(&server, &certs),
    );
}

async fn run(server: &RedisServer, certs: &TestCerts) {
    let connect = |url: String, tls: Option<RedisTls>| async move {
        let config = RedisStoreConfig {
            target: RedisTarget::Single(url),
            key_prefix: "weir".into(),
            timeout: Duration::from_secs(10),
            clock: RedisClock::Server,
            window_counters: false,
            access: RedisAccess {
                tls,
                ..Default::default()
            },
        };
        Arc::new(
            RedisStore::connect(&config, Arc::new(SystemClock::new()))
                .await
                .unwrap(),
        )
    };
    let tls = RedisTls {
        ca: Some(std::fs::read(&certs.ca).unwrap()),
        ..Default::default()
    };
    let ways = [
        ("cleartext", connect(server.url(), None).await),
        ("TLS", connect(server.tls_url(), Some(tls)).await),
    ];
    let policy = Policy::new(Algorithm::Gcra, 1_000_000, Duration::from_secs(1), None).unwrap();
    // A warm-up round: every key exists, the library is loaded, both connections open.
    for (_, store) in &ways {
        round(store, server, policy).await;
    }
    let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    for r in 0..ROUNDS {
        for k in 0..2 {
            let i = (r + k) % 2;
            samples[i].push(round(&ways[i].1, server, policy).await);
        }
    }
    println!(
        "{ROUNDS} rounds of {CHECKS} GCRA checks each, {TASKS} tasks on one connection, {IDENTITIES} identities; medians:"
    );
    println!(
        "  {:<10} {:>16} {:>17} {:>12}",
        "", "Redis CPU/check", "client CPU/check", "checks/s"
    );
    for ((name, _), s) in ways.iter().zip(&samples) {
        println!(
            "  {name:<10} {:>13.2} us {:>14.2} us {:>12.0}",
            median(s.iter().map(|s| s.redis_cpu_us).collect()),
            median(s.iter().map(|s| s.client_cpu_us).collect()),
            median(s.iter().map(|s| s.checks_per_s).collect()),
        );
    }
    // The median of each round's ratio: both sides measured seconds apart.
    let ratio = |f: fn(&Sample) -> f64| {
        median(
            samples[1]
                .iter()
                .zip(&samples[0])
                .map(|(tls, clear)| f(tls) / f(clear))
                .collect(),
        )
    };
    println!(
        "  TLS / cleartext: Redis CPU {:.2}x, client CPU {:.2}x, checks/s {:.2}x",
        ratio(|s| s.redis_cpu_us),
        ratio(|s| s.client_cpu_us),
        ratio(|s| s.checks_per_s)
    );
}
