//! Checks per second on one Redis core, and the latency of a check, beside Redis's own
//! ceiling for plain `INCR` on the same server in the same run.
//!
//! `cargo bench -p weir-store --bench redis_throughput`
//!
//! 1. `redis-benchmark -t incr` with 64 clients, unpipelined and pipelined 16 deep: what
//!    the server does with the simplest write.
//! 2. weir's Redis store (GCRA, 10,000 identities) from 256 concurrent tasks over one
//!    multiplexed connection, for 5 s: checks per second, and latency percentiles.
//! 3. The same store paced at half of (2)'s rate, from 32 tasks (enough to carry that
//!    rate without queueing in the client): latency percentiles at half load.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Policy};
use weir_store::{Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store, SystemClock};
use weir_testkit::RedisServer;

const TASKS: usize = 256;
const PACED_TASKS: usize = 32;
const RUN: Duration = Duration::from_secs(5);

fn redis_benchmark(server: &RedisServer, pipeline: u32) -> f64 {
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-p",
            &server.port().to_string(),
            "-t",
            "incr",
            "-n",
            "400000",
            "-c",
            "64",
            "-q",
        ])
        .args(["-P", &pipeline.to_string()])
        .output()
        .expect("redis-benchmark (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    // Progress lines end in \r; the result reads "INCR: 123456.79 requests per second, ...".
    text.split(['\r', '\n'])
        .find(|line| line.contains("requests per second"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot read redis-benchmark's output: {text}"))
}

struct Run {
    per_second: f64,
    latencies: Vec<Duration>,
}

/// Runs checks from `tasks` tasks for `RUN`; each task waits `pace` between checks.
async fn run(store: Arc<RedisStore>, tasks: usize, pace: Option<Duration>) -> Run {
    let policy = Policy::new(Algorithm::Gcra, 1_000_000, Duration::from_secs(1), None).unwrap();
    let started = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = t;
                // Tasks start staggered over one pace, so paced load arrives evenly.
                let mut next =
                    Instant::now() + pace.map_or(Duration::ZERO, |p| p * t as u32 / tasks as u32);
                while started.elapsed() < RUN {
                    if let Some(pace) = pace {
                        next += pace;
                        tokio::time::sleep_until(next.into()).await;
                    }
                    let identity = format!("user-{}", i % 10_000);
                    let begun = Instant::now();
                    store
                        .check(
                            Key {
                                rule: "api",
                                identity: &identity,
                            },
                            &policy,
                            1,
                        )
                        .await
                        .unwrap();
                    latencies.push(begun.elapsed());
                    i += tasks;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Run {
        per_second: latencies.len() as f64 / elapsed,
        latencies,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn report(name: &str, run: &Run) {
    let l = &run.latencies;
    println!(
        "  {name:<44} {:>9.0} checks/s   p50 {:>7.3} ms   p99 {:>7.3} ms   p999 {:>7.3} ms",
        run.per_second,
        percentile(l, 0.50).as_secs_f64() * 1e3,
        percentile(l, 0.99).as_secs_f64() * 1e3,
        percentile(l, 0.999).as_secs_f64() * 1e3,
    );
}

#[tokio::main]
async fn main() {
    let server = RedisServer::start();
    let incr = redis_benchmark(&server, 1);
    let incr_pipelined = redis_benchmark(&server, 16);
    println!("Redis ceiling (redis-benchmark -t incr -c 64):");
    println!("  INCR, one command per round trip           {incr:>9.0} ops/s");
    println!("  INCR, pipelined 16 deep                     {incr_pipelined:>9.0} ops/s");
    server.cli(&["FLUSHALL"]);

    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir".into(),
        timeout: Duration::from_secs(5),
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    };
    let store = Arc::new(
        RedisStore::connect(&config, Arc::new(SystemClock::new()))
            .await
            .unwrap(),
    );
    println!("weir's Redis store, GCRA, {TASKS} concurrent tasks, one multiplexed connection:");
    let full = run(store.clone(), TASKS, None).await;
    report("flat out", &full);
    let half_rate = full.per_second / 2.0;
    let pace = Duration::from_secs_f64(PACED_TASKS as f64 / half_rate);
    let half = run(store, PACED_TASKS, Some(pace)).await;
    report(
        &format!("paced at half of that, {PACED_TASKS} tasks"),
        &half,
    );
    let stats = server.cli(&["INFO", "commandstats"]);
    // FCALL on Redis 7, EVALSHA where Redis has no Functions.
    let total = |field: &str| -> f64 {
        ["cmdstat_fcall:", "cmdstat_evalsha:"]
            .iter()
            .filter_map(|c| stats.lines().find_map(|l| l.strip_prefix(c)))
            .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix(field)))
            .filter_map(|v| v.parse::<f64>().ok())
            .sum()
    };
    let usec = total("usec=") / total("calls=");
    println!(
        "  Redis CPU per check (usec_per_call of FCALL/EVALSHA): {usec:.2} us, so one Redis core can run {:.0} checks/s",
        1e6 / usec
    );
    println!(
        "  weir checks / plain INCR: {:.2} (unpipelined INCR), {:.2} (pipelined INCR)",
        full.per_second / incr,
        full.per_second / incr_pipelined
    );
}
