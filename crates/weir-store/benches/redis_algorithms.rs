//! Redis's execution per check of every algorithm at limits 10, 500 and 10,000, on an
//! empty key and on a full one, beside weir's GCRA check in the same state, measured in
//! the same run: what one rule's check costs the Redis that every rule shares (Redis
//! runs one script at a time).
//!
//! `cargo bench -p weir-store --bench redis_algorithms`
//!
//! Per workload and round: `CONFIG RESETSTAT`, `CHECKS` checks from `TASKS` concurrent
//! tasks over one multiplexed connection, then `usec` / `calls` of `FCALL` in
//! `INFO commandstats` (Redis's own timing of each call, the Lua inside included).
//! Workloads alternate across `ROUNDS` rounds; the figures are medians of the rounds,
//! the ratios medians of each round's ratio. The states:
//!
//! - empty: each check the first of its key (admitted);
//! - full: four keys at their limit (every check denied); a sliding log holds `limit`
//!   entries, one per microsecond, the most it can;
//! - for the sliding log, full and admitted: four logs of `limit` entries spread over
//!   the period, the clock moving so that each check expires about one entry and
//!   admits one; and refunds: a refund of one unit and a check of one on a full log,
//!   in turns (the figure is per call).
//!
//! Also a token bucket decided as a region's share of a global limit (issue 22; the
//! `regional` algorithm, by the general entry point), empty and full.
//!
//! Also the Redis bytes of each full sliding-log key (`MEMORY USAGE`). redis-server is
//! pinned to CPU 0 and this process to CPU 1 when the machine has two.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "measure/mod.rs"]
mod measure;

use measure::median;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use weir_core::{Algorithm, ManualClock, Policy};
use weir_store::{Check, Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store};
use weir_testkit::RedisServer;

const ROUNDS: usize = 5;
const CHECKS: usize = 4_000;
const TASKS: usize = 16;
const LIMITS: [u64; 3] = [10, 500, 10_000];
/// Keys of each full workload.
const FULL_KEYS: u64 = 4;
/// 2026-11-30 10:00:00 UTC, in nanoseconds.
const START: u64 = 1_796_032_800_000_000_000;
const HOUR: Duration = Duration::from_secs(3_600);
const SECOND: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    Full,
    /// A full sliding log whose oldest entries expire as it is checked.
    FullAdmitted,
    /// Refunds and checks in turns on a full sliding log.
    Refunds,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Empty => "empty",
            State::Full => "full, denied",
            State::FullAdmitted => "full, admitted",
            State::Refunds => "full, refund + check",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Workload {
    algorithm: Algorithm,
    limit: u64,
    state: State,
    /// A region's share of a global token bucket (`scope: global`, 3 regions, 2%
    /// floors), with no share granted: decided by the `regional` algorithm.
    regional: bool,
}

impl Workload {
    fn policy(self) -> Policy {
        let period = if self.state == State::FullAdmitted {
            SECOND
        } else {
            HOUR
        };
        let policy = Policy::new(self.algorithm, self.limit, period, None).unwrap();
        match self.regional {
            true => {
                let floor = weir_store::region_floor(self.limit, 3, 0.02).unwrap();
                policy.regional(floor, 3).unwrap()
            }
            false => policy,
        }
    }

    fn rule(self) -> String {
        let kind = if self.regional { "-regional" } else { "" };
        format!(
            "{}{kind}-{}-{:?}",
            self.algorithm.name(),
            self.limit,
            self.state
        )
    }

    fn name(self) -> String {
        match self.regional {
            true => format!("{} (a region's share)", self.algorithm.name()),
            false => self.algorithm.name().to_owned(),
        }
    }
}

/// The stores: `fixed` on a clock that stays put once the full keys are filled (nothing
/// refills or expires), `moving` on one that each check of a full, admitted log moves.
struct Bench {
    fixed: RedisStore,
    moving: RedisStore,
    moving_clock: Arc<ManualClock>,
    admin: MultiplexedConnection,
}

impl Bench {
    /// Microseconds the moving clock advances per check of `workload`: about one entry
    /// of each key's log expires between two of its checks.
    fn step_us(workload: Workload) -> u64 {
        (SECOND.as_micros() as u64 / workload.limit / FULL_KEYS).max(1)
    }

    async fn check(&self, workload: Workload, policy: &Policy, i: usize, round: usize) {
        let rule = workload.rule();
        let identity = match workload.state {
            State::Empty => format!("r{round}-{i}"),
            // A refund and a check of each key in turn.
            State::Refunds => format!("k{}", (i / 2) as u64 % FULL_KEYS),
            _ => format!("k{}", i as u64 % FULL_KEYS),
        };
        let key = Key {
            rule: &rule,
            identity: &identity,
        };
        match workload.state {
            State::Empty | State::Full => {
                self.fixed.check(key, policy, 1).await.unwrap();
            }
            State::FullAdmitted => {
                self.moving_clock
                    .advance(Duration::from_micros(Self::step_us(workload)));
                self.moving.check(key, policy, 1).await.unwrap();
            }
            State::Refunds => {
                let given = [Check {
                    key,
                    policy,
                    cost: 1,
                }];
                if i.is_multiple_of(2) {
                    self.fixed.refund_all(&given).await.unwrap();
                } else {
                    self.fixed.check(key, policy, 1).await.unwrap();
                }
            }
        }
    }

    /// Brings the full keys of `workload` to their limit, from the time on `clock`,
    /// which it returns (and leaves there, but for a full, admitted log).
    async fn fill(&self, workload: Workload, clock: &ManualClock) -> u64 {
        let policy = workload.policy();
        let rule = workload.rule();
        let store = if workload.state == State::FullAdmitted {
            &self.moving
        } else {
            &self.fixed
        };
        let entries = if workload.algorithm == Algorithm::SlidingLog {
            workload.limit
        } else {
            1
        };
        let spacing = if workload.state == State::FullAdmitted {
            SECOND / workload.limit as u32
        } else {
            Duration::from_micros(1)
        };
        let base = clock_now(clock);
        if workload.regional {
            // Its capacity is its floor's part of the burst: filled a unit at a time.
            for k in 0..FULL_KEYS {
                let identity = format!("k{k}");
                let key = Key {
                    rule: &rule,
                    identity: &identity,
                };
                while store.check(key, &policy, 1).await.unwrap().allowed {}
            }
            return base;
        }
        for n in 0..entries {
            clock.set(base + (spacing * n as u32).as_nanos() as u64);
            for k in 0..FULL_KEYS {
                let identity = format!("k{k}");
                let key = Key {
                    rule: &rule,
                    identity: &identity,
                };
                let cost = workload.limit / entries;
                assert!(store.check(key, &policy, cost).await.unwrap().allowed);
            }
        }
        if workload.state != State::FullAdmitted {
            clock.set(base);
        }
        base
    }

    async fn memory_usage(&self, workload: Workload) -> u64 {
        let mut admin = self.admin.clone();
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(format!("weir:alg:{{k0}}:{}", workload.rule()))
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut admin)
            .await
            .unwrap()
    }

    /// Execution per FCALL of one round of `workload`, microseconds.
    async fn round(self: &Arc<Self>, workload: Workload, round: usize) -> f64 {
        let mut admin = self.admin.clone();
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut admin)
            .await
            .unwrap();
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let bench = self.clone();
                tokio::spawn(async move {
                    let policy = workload.policy();
                    for i in (t..CHECKS).step_by(TASKS) {
                        bench.check(workload, &policy, i, round).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut admin)
            .await
            .unwrap();
        let stat = |name: &str| -> f64 {
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
                .and_then(|l| l.split(',').find_map(|f| f.strip_prefix(name)))
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN)
        };
        stat("usec=") / stat("calls=")
    }
}

fn clock_now(clock: &ManualClock) -> u64 {
    weir_core::Clock::now(clock)
}

fn main() {
    let server = RedisServer::start();
    measure::run_pinned(server.pid().expect("redis-server is running"), run(&server));
}

async fn run(server: &RedisServer) {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir:alg".into(),
        timeout: Duration::from_secs(10),
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    let fixed_clock = Arc::new(ManualClock::new(START));
    let moving_clock = Arc::new(ManualClock::new(START));
    let fixed = RedisStore::connect(&config, fixed_clock.clone())
        .await
        .unwrap();
    let moving = RedisStore::connect(&config, moving_clock.clone())
        .await
        .unwrap();
    let admin = redis::Client::open(server.admin_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let bench = Arc::new(Bench {
        fixed,
        moving,
        moving_clock: moving_clock.clone(),
        admin,
    });

    let mut workloads = Vec::new();
    for algorithm in Algorithm::ALL {
        for limit in LIMITS {
            for state in [State::Empty, State::Full] {
                workloads.push(Workload {
                    algorithm,
                    limit,
                    state,
                    regional: false,
                });
            }
        }
    }
    for limit in LIMITS {
        for state in [State::Empty, State::Full] {
            workloads.push(Workload {
                algorithm: Algorithm::TokenBucket,
                limit,
                state,
                regional: true,
            });
        }
    }
    for limit in LIMITS {
        for state in [State::FullAdmitted, State::Refunds] {
            workloads.push(Workload {
                algorithm: Algorithm::SlidingLog,
                limit,
                state,
                regional: false,
            });
        }
    }
    for &w in &workloads {
        if matches!(w.state, State::Full | State::Refunds) {
            bench.fill(w, &fixed_clock).await;
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); workloads.len()];
    // A warm-up round, then rounds alternating the workloads of the fixed clock.
    for r in 0..=ROUNDS {
        for k in 0..workloads.len() {
            let i = (r + k) % workloads.len();
            if workloads[i].state != State::FullAdmitted {
                let sample = bench.round(workloads[i], r).await;
                if r > 0 {
                    samples[i].push(sample);
                }
            }
        }
    }
    // Full, admitted logs: each filled over a period, then checked from the moment its
    // first entry expires, its rounds in a row (the clock moves on through them).
    for (i, &w) in workloads.iter().enumerate() {
        if w.state == State::FullAdmitted {
            moving_clock.set(START + 3 * HOUR.as_nanos() as u64);
            let base = bench.fill(w, &moving_clock).await;
            moving_clock.set(base + SECOND.as_nanos() as u64);
            for r in 0..=ROUNDS {
                let sample = bench.round(w, r).await;
                if r > 0 {
                    samples[i].push(sample);
                }
            }
        }
    }

    // The peers: GCRA's check at the same limit on an empty key (admitted: it writes)
    // and on a full one (denied: it only reads).
    let gcra = |limit: u64, state: State| {
        let i = workloads
            .iter()
            .position(|w| w.algorithm == Algorithm::Gcra && w.limit == limit && w.state == state)
            .unwrap();
        &samples[i]
    };
    println!(
        "{ROUNDS} rounds of {CHECKS} checks, {TASKS} tasks; execution per FCALL (INFO commandstats), medians:"
    );
    println!("| algorithm | limit | state | execution | vs gcra admitted | vs gcra denied |");
    println!("| --- | ---: | --- | ---: | ---: | ---: |");
    for (i, w) in workloads.iter().enumerate() {
        let ratio = |peer: &Vec<f64>| {
            if w.state == State::FullAdmitted {
                // Measured in rounds of its own, not between GCRA's: the medians' ratio.
                median(samples[i].clone()) / median(peer.clone())
            } else {
                median(samples[i].iter().zip(peer).map(|(a, b)| a / b).collect())
            }
        };
        println!(
            "| {} | {} | {} | {:.2} us | {:.2}x | {:.2}x |",
            w.name(),
            w.limit,
            w.state.name(),
            median(samples[i].clone()),
            ratio(gcra(w.limit, State::Empty)),
            ratio(gcra(w.limit, State::Full)),
        );
    }
    println!("Redis bytes per full sliding-log key, one entry per microsecond (MEMORY USAGE):");
    for w in &workloads {
        if w.algorithm == Algorithm::SlidingLog && w.state == State::Full {
            println!(
                "  limit {}: {} bytes",
                w.limit,
                bench.memory_usage(*w).await
            );
        }
    }
}
