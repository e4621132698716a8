//! What token leases save Redis, and what a leased check costs in process.
//!
//! `cargo bench -p weir-store --bench leasing`
//!
//! 1. Redis calls and Redis CPU per request: one hot key of a token bucket at 1,000,
//!    20,000 and 200,000 a minute, offered twice its limit by 4 instances (each its
//!    own `LeasingStore` and connection) on a virtual clock (`clock: local`), for
//!    `MINUTES` minutes; with `lease: auto`, and with the plain check every request
//!    makes without it. Calls and `usec` are Redis's own (`INFO commandstats`: every
//!    script call, checks, takes and give-backs alike).
//! 2. The time a check takes in process: a leased check spent from a lease held,
//!    against the memory store's check of the same policy, one thread, `LOCAL_CHECKS`
//!    each, in alternating rounds (medians).
//!
//! redis-server is pinned to CPU 0 and this process to CPU 1 when the machine has two.
//! `-- local` runs the second part only.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "bench code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    Batch, Key, LeasePlan, LeaseStore, LeasingStore, MemoryStore, MemoryStoreConfig, RedisClock,
    RedisStore, RedisStoreConfig, RedisTarget, Store,
};
use weir_testkit::RedisServer;

/// 2026-11-30 10:00:00 UTC, in nanoseconds.
const START: u64 = 1_796_032_800_000_000_000;
const MINUTES: u64 = 2;
const INSTANCES: usize = 4;
const LOCAL_CHECKS: u32 = 1_000_000;
const ROUNDS: usize = 5;

fn pin(cpu: usize) {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus >= 2 {
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", &cpu.to_string(), &pid])
            .output();
    }
}

fn stat(server: &RedisServer) -> (u64, u64) {
    ["fcall", "evalsha", "eval"]
        .iter()
        .fold((0, 0), |(calls, usec), c| {
            (calls + server.calls(c), usec + server.usec(c))
        })
}

async fn redis(
    server: &RedisServer,
    clock: &Arc<ManualClock>,
    prefix: &str,
) -> Arc<dyn LeaseStore> {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: format!("weir:{prefix}"),
        timeout: Duration::from_secs(5),
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    Arc::new(RedisStore::connect(&config, clock.clone()).await.unwrap())
}

/// Offers twice `per_minute` for `MINUTES` virtual minutes over 4 instances; returns
/// requests, admitted, Redis calls and Redis µs.
async fn run(server: &RedisServer, per_minute: u64, leased: bool) -> (u64, u64, u64, u64) {
    let clock = Arc::new(ManualClock::new(START));
    let prefix = format!("bench{per_minute}{leased}");
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..INSTANCES {
        let inner = redis(server, &clock, &prefix).await;
        stores.push(if leased {
            let rules = [("hot".to_owned(), LeasePlan::auto(), 0)];
            LeasingStore::new(inner, rules, clock.clone(), Arc::new(()))
        } else {
            inner
        });
    }
    let policy = Policy::new(
        Algorithm::TokenBucket,
        per_minute,
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    // Eight requests a step, as many steps as twice the limit needs.
    let per_step = 8;
    let steps = 2 * per_minute * MINUTES / per_step;
    let step = Duration::from_nanos(MINUTES * 60_000_000_000 / steps);
    let before = stat(server);
    let (mut requests, mut admitted) = (0, 0);
    let mut turn = 0;
    for _ in 0..steps {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..per_step {
            let store = stores[turn % INSTANCES].clone();
            turn += 1;
            tasks.spawn(async move {
                let key = Key {
                    rule: "hot",
                    identity: "partner",
                };
                store.check(key, &policy, 1).await.unwrap().allowed
            });
        }
        while let Some(allowed) = tasks.join_next().await {
            requests += 1;
            admitted += u64::from(allowed.unwrap());
        }
        clock.advance(step);
    }
    let after = stat(server);
    (requests, admitted, after.0 - before.0, after.1 - before.1)
}

/// Median ns per check of `store` on a hot key, one thread.
fn local_ns(runtime: &tokio::runtime::Runtime, store: &Arc<dyn Store>, policy: &Policy) -> f64 {
    let key = Key {
        rule: "hot",
        identity: "partner",
    };
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..LOCAL_CHECKS {
            std::hint::black_box(store.check(key, policy, 1).await.unwrap());
        }
        started.elapsed().as_nanos() as f64 / f64::from(LOCAL_CHECKS)
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let server = RedisServer::start();
    if let Some(pid) = server.pid() {
        let _ = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", "0", &pid.to_string()])
            .output();
    }
    pin(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let local_only = std::env::args().any(|a| a == "local");
    println!(
        "| limit a minute | lease | requests | admitted | Redis calls | calls per request | Redis µs per request | calls saved |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let limits: &[u64] = if local_only {
        &[]
    } else {
        &[1_000, 20_000, 200_000]
    };
    for &per_minute in limits {
        let plain = runtime.block_on(run(&server, per_minute, false));
        let leased = runtime.block_on(run(&server, per_minute, true));
        for (name, (requests, admitted, calls, usec)) in [("none", plain), ("auto", leased)] {
            println!(
                "| {per_minute} | {name} | {requests} | {admitted} | {calls} | {:.4} | {:.3} | {:.0}x |",
                calls as f64 / requests as f64,
                usec as f64 / requests as f64,
                (plain.2 as f64 / plain.0 as f64) / (calls as f64 / requests as f64),
            );
        }
    }

    // In process: a lease of a million units held for an hour, against the memory
    // store; the Redis store behind the lease is asked once.
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let clock = Arc::new(ManualClock::new(START));
    let policy = Policy::new(
        Algorithm::TokenBucket,
        1_000_000_000,
        Duration::from_secs(1),
        None,
    )
    .unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(1_000_000_000),
        hold: Duration::from_secs(600),
    };
    let leased: Arc<dyn Store> = local.block_on(async {
        let inner = redis(&server, &clock, "local").await;
        let rules = [("hot".to_owned(), plan, 0)];
        LeasingStore::new(inner, rules, clock.clone(), Arc::new(()))
    });
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone() as Arc<dyn Clock>,
    ));
    let (mut with_lease, mut in_memory) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        with_lease.push(local_ns(&local, &leased, &policy));
        in_memory.push(local_ns(&local, &memory, &policy));
    }
    let (l, m) = (median(with_lease), median(in_memory));
    println!();
    println!("| check, in process, one thread | ns per check (median of {ROUNDS}) |");
    println!("|---|---|");
    println!("| leased (spent from a lease held) | {l:.1} |");
    println!("| memory store | {m:.1} |");
    println!("| ratio leased / memory | {:.2}x |", l / m);
}
