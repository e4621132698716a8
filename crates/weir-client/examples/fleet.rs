//! Run: cargo run --release -p weir-client --example fleet [-- WORKERS JOBS PER_SECOND BURST]
//!
//! Measures a fleet of workers against weir's real gateway (in process, on loopback,
//! in front of an upstream that answers everything): naive immediate retries, then
//! weir-client with one client shared by the fleet, then a client per worker. Prints
//! the jobs done, the requests sent, the 429s and the time taken; first on weir's
//! memory store, then on a Redis (a `redis-server` started on a free loopback port,
//! as weir's tests start it), with the scripts Redis ran and its time in them.
//! Defaults: 20 workers of 10 jobs each, against a token bucket of 20 a second,
//! bursts of 5.

#![allow(clippy::expect_used, reason = "an example: a panic says what failed")]

#[path = "../tests/common/fleet.rs"]
mod fleet;

use std::time::Duration;

use fleet::{Limit, Mode};

#[tokio::main]
async fn main() {
    let arguments: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("whole numbers: WORKERS JOBS PER_SECOND BURST")
        })
        .collect();
    let argument = |i: usize, default: u64| arguments.get(i).copied().unwrap_or(default);
    let (workers, jobs) = (argument(0, 20), argument(1, 10));
    let limit = Limit {
        per_second: argument(2, 20),
        burst: argument(3, 5),
    };
    println!(
        "{workers} workers x {jobs} jobs against a token bucket of {}/s, burst {}",
        limit.per_second, limit.burst
    );
    let redis = weir_testkit::RedisServer::start();
    // weir decides a request by one script call: FCALL on Redis 7, else EVALSHA.
    let commands = ["fcall", "evalsha", "eval"];
    let scripts = || commands.map(|c| redis.calls(c)).iter().sum::<u64>();
    let cpu = || commands.map(|c| redis.usec(c)).iter().sum::<u64>();
    println!(
        "{:<6} {:<18} {:>5} {:>9} {:>7} {:>8} {:>13} {:>12}",
        "store", "clients", "done", "requests", "429s", "seconds", "redis scripts", "redis cpu ms"
    );
    for url in [None, Some(redis.url())] {
        for mode in [Mode::Naive, Mode::SharedClient, Mode::ClientPerWorker] {
            let (scripts_before, cpu_before) = (scripts(), cpu());
            // A fresh gateway each time; on Redis, an empty one: a full bucket.
            redis.cli(&["FLUSHALL"]);
            let gateway = fleet::start_gateway(&limit, url.as_deref()).await;
            let outcome = fleet::run(
                &gateway,
                mode,
                workers,
                jobs,
                2_000_000,
                Duration::from_secs(300),
            )
            .await;
            let name = match mode {
                Mode::Naive => "naive",
                Mode::SharedClient => "weir-client shared",
                Mode::ClientPerWorker => "weir-client each",
            };
            let (store, scripts, cpu) = match url {
                None => ("memory", "-".to_owned(), "-".to_owned()),
                Some(_) => (
                    "redis",
                    (scripts() - scripts_before).to_string(),
                    ((cpu() - cpu_before) / 1000).to_string(),
                ),
            };
            println!(
                "{store:<6} {name:<18} {:>5} {:>9} {:>7} {:>8.2} {scripts:>13} {cpu:>12}",
                outcome.done,
                outcome.attempts,
                outcome.refused,
                outcome.elapsed.as_secs_f64()
            );
        }
    }
}
