//! Redis's CPU per check: weir beside its peers, on one Redis, in one run.
//!
//! `cargo bench -p weir-store --bench redis_cpu`
//!
//! Alternating in each round, each workload runs the same number of checks from the same
//! number of concurrent tasks (16) over one multiplexed connection, so the client
//! pipelines them alike: Redis reads about 16 calls at a time (it reports the calls per
//! read), as `redis-benchmark -P 16` would send them:
//!
//! - the peer: a bare one-key GCRA Lua script by `EVALSHA` (the shape of go-redis's
//!   `redis_rate`: TIME, GET, float arithmetic, SET with an expiry);
//! - weir's GCRA check through its Redis store (`FCALL` of its library on Redis 7);
//! - the same by script (`EVALSHA`, the Redis 6 path, what weir did before);
//! - envoyproxy/ratelimit's fixed window: `INCRBY` and `EXPIRE`, pipelined per check;
//! - weir's fixed window through its Redis store, on the server's clock (one `FCALL`),
//!   and in window counters on the instances' clocks as envoy counts (`INCRBY` +
//!   `PEXPIRE`), every check admitted, and every check denied;
//! - the floor of any Lua: `FCALL` of a function that only returns 1.
//!
//! For each: execution per check (the commands' `usec` in `INFO commandstats`, per
//! check) and Redis's process CPU per check (its threads' time on CPU, from
//! `/proc/<pid>/task/*/schedstat`, per check), medians of the rounds, and the ratios.
//! redis-server is pinned to CPU 0 and this process (client included) to CPU 1 with
//! `taskset`, when the machine has two.
//!
//! Timings on a shared machine move with its load; instructions do not.
//! `bench/redis_instructions.sh` runs this benchmark against a redis-server under
//! valgrind's callgrind (`WEIR_CALLGRIND_DIR` set): it then counts, per check, the
//! instructions of the whole server (what its CPU time follows) and of the commands'
//! execution (`call()`, what `usec` times), once per workload.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

#[path = "measure/mod.rs"]
mod measure;

use measure::{cpu_ns, median};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use weir_core::{Algorithm, Policy};
use weir_store::{Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store, SystemClock};
use weir_testkit::RedisServer;

const ROUNDS: usize = 7;
const CHECKS: usize = 64_000;
const TASKS: usize = 16;
const IDENTITIES: usize = 10_000;
const TIMEOUT: Duration = Duration::from_secs(60);

/// A bare GCRA (after go-redis/redis_rate's script): KEYS[1]; ARGV burst, rate, period
/// (s), cost. Returns allowed, remaining, retry and reset (s, as text).
const PEER_GCRA: &str = r"
local key = KEYS[1]
local burst, rate = tonumber(ARGV[1]), tonumber(ARGV[2])
local period, cost = tonumber(ARGV[3]), tonumber(ARGV[4])
local interval = period / rate
local increment, offset = interval * cost, interval * burst
local t = redis.call('TIME')
local now = (t[1] - 1735689600) + t[2] / 1000000
local tat = tonumber(redis.call('GET', key) or now)
if tat < now then tat = now end
local new_tat = tat + increment
local diff = now - (new_tat - offset)
local remaining = math.floor(diff / interval)
if remaining < 0 then
  return { 0, 0, tostring(-diff), tostring(tat - now) }
end
local reset = new_tat - now
redis.call('SET', key, new_tat, 'EX', math.ceil(reset))
return { cost, remaining, tostring(-1), tostring(reset) }
";

/// A library whose one function does nothing: what any Lua call costs at least.
const EMPTY: &str =
    "#!lua name=bench_empty\nredis.register_function('bench_empty', function() return 1 end)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    PeerGcra,
    WeirGcra,
    WeirGcraScript,
    IncrbyExpire,
    WeirFixedWindow,
    WeirFixedCounter,
    WeirFixedCounterDenied,
    EmptyFunction,
}

impl Workload {
    const ALL: [Workload; 8] = [
        Workload::PeerGcra,
        Workload::WeirGcra,
        Workload::WeirGcraScript,
        Workload::IncrbyExpire,
        Workload::WeirFixedWindow,
        Workload::WeirFixedCounter,
        Workload::WeirFixedCounterDenied,
        Workload::EmptyFunction,
    ];

    fn name(self) -> &'static str {
        match self {
            Workload::PeerGcra => "peer: bare GCRA script (EVALSHA)",
            Workload::WeirGcra => "weir gcra (FCALL)",
            Workload::WeirGcraScript => "weir gcra by script (EVALSHA)",
            Workload::IncrbyExpire => "envoy: INCRBY + EXPIRE pipelined",
            Workload::WeirFixedWindow => "weir fixed_window (FCALL)",
            Workload::WeirFixedCounter => "weir fixed_window counters",
            Workload::WeirFixedCounterDenied => "weir fixed_window counters, denied",
            Workload::EmptyFunction => "floor: FCALL of `return 1`",
        }
    }

    /// The commands whose execution time a check of this workload costs.
    fn commands(self) -> &'static [&'static str] {
        match self {
            Workload::PeerGcra | Workload::WeirGcraScript => &["evalsha"],
            Workload::WeirGcra | Workload::WeirFixedWindow | Workload::EmptyFunction => &["fcall"],
            Workload::IncrbyExpire => &["incrby", "expire"],
            Workload::WeirFixedCounter | Workload::WeirFixedCounterDenied => &["incrby", "pexpire"],
        }
    }
}

struct Client {
    weir: RedisStore,
    /// weir on the instances' clocks.
    weir_local: RedisStore,
    weir_scripts: RedisStore,
    connection: MultiplexedConnection,
    peer_sha: String,
    gcra: Policy,
    fixed_window: Policy,
    /// One a minute: after each identity's first check, every check is denied.
    fixed_window_spent: Policy,
}

impl Client {
    async fn check(&self, workload: Workload, identity: &str) {
        let key = Key {
            rule: "api",
            identity,
        };
        match workload {
            Workload::PeerGcra => {
                let mut c = self.connection.clone();
                redis::cmd("EVALSHA")
                    .arg(&self.peer_sha)
                    .arg(1)
                    .arg(format!("peer:{{{identity}}}:api"))
                    .arg(1_000_000)
                    .arg(1_000_000)
                    .arg(1)
                    .arg(1)
                    .query_async::<redis::Value>(&mut c)
                    .await
                    .unwrap();
            }
            Workload::WeirGcra => {
                self.weir.check(key, &self.gcra, 1).await.unwrap();
            }
            Workload::WeirGcraScript => {
                self.weir_scripts.check(key, &self.gcra, 1).await.unwrap();
            }
            Workload::IncrbyExpire => {
                let mut c = self.connection.clone();
                let counter = format!("envoy:{{{identity}}}:api");
                redis::pipe()
                    .cmd("INCRBY")
                    .arg(&counter)
                    .arg(1)
                    .cmd("EXPIRE")
                    .arg(&counter)
                    .arg(60)
                    .query_async::<redis::Value>(&mut c)
                    .await
                    .unwrap();
            }
            Workload::WeirFixedWindow => {
                self.weir.check(key, &self.fixed_window, 1).await.unwrap();
            }
            Workload::WeirFixedCounter | Workload::WeirFixedCounterDenied => {
                let policy = if workload == Workload::WeirFixedCounter {
                    &self.fixed_window
                } else {
                    &self.fixed_window_spent
                };
                self.weir_local.check(key, policy, 1).await.unwrap();
            }
            Workload::EmptyFunction => {
                let mut c = self.connection.clone();
                redis::cmd("FCALL")
                    .arg("bench_empty")
                    .arg(1)
                    .arg(format!("empty:{{{identity}}}:api"))
                    .query_async::<redis::Value>(&mut c)
                    .await
                    .unwrap();
            }
        }
    }
}

/// One workload's figures in one round.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Execution per check, microseconds (`INFO commandstats`).
    execution_us: f64,
    /// Redis's process CPU per check, microseconds.
    cpu_us: f64,
    /// Commands Redis read per read from its clients: how deeply they were pipelined.
    calls_per_read: f64,
}

/// A field of an `INFO` section's line `<prefix>...`, as a number.
fn field(info: &str, prefix: &str, name: &str) -> f64 {
    info.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|l| {
            l.split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Runs `checks` checks of `workload` from `TASKS` tasks.
async fn drive(client: &Arc<Client>, workload: Workload, checks: usize) {
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (t..checks).step_by(TASKS) {
                    let identity = format!("user-{}", i % IDENTITIES);
                    client.check(workload, &identity).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// Under callgrind: instructions per check of the whole server and of `call()`.
async fn count(
    client: &Arc<Client>,
    server: &RedisServer,
    dir: &str,
    workload: Workload,
) -> (f64, f64) {
    const COUNTED: usize = 8_000;
    let pid = server.pid().expect("redis-server is running").to_string();
    let control = |args: &[&str]| {
        let out = std::process::Command::new("callgrind_control")
            .args(args)
            .arg(&pid)
            .output()
            .expect("callgrind_control (apt-get install valgrind)");
        assert!(out.status.success(), "callgrind_control {args:?}: {out:?}");
    };
    drive(client, workload, COUNTED / 4).await;
    control(&["--zero"]);
    drive(client, workload, COUNTED).await;
    let name = format!("{workload:?}");
    control(&["--dump", &name]);
    let dump = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("cg."))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .expect("a callgrind dump");
    let annotated = std::process::Command::new("callgrind_annotate")
        .arg("--inclusive=yes")
        .arg(&dump)
        .output()
        .expect("callgrind_annotate");
    let text = String::from_utf8_lossy(&annotated.stdout);
    let number = |line: &str| -> f64 {
        let n: String = line
            .split_whitespace()
            .next()
            .unwrap_or("0")
            .replace(',', "");
        n.parse().unwrap_or(f64::NAN)
    };
    let total = text
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .map_or(f64::NAN, number);
    let call = text
        .lines()
        .find(|l| l.contains(":call ["))
        .map_or(f64::NAN, number);
    (total / COUNTED as f64, call / COUNTED as f64)
}

async fn round(client: &Arc<Client>, server: &RedisServer, workload: Workload) -> Sample {
    let pid = server.pid().expect("redis-server is running");
    let mut admin = client.connection.clone();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    let before = cpu_ns(pid);
    drive(client, workload, CHECKS).await;
    let cpu = cpu_ns(pid) - before;
    let info: String = redis::cmd("INFO")
        .arg("all")
        .query_async(&mut admin)
        .await
        .unwrap();
    let usec: f64 = workload
        .commands()
        .iter()
        .map(|c| field(&info, &format!("cmdstat_{c}:"), "usec"))
        .sum();
    let calls: f64 = workload
        .commands()
        .iter()
        .map(|c| field(&info, &format!("cmdstat_{c}:"), "calls"))
        .sum();
    let reads = info
        .lines()
        .find_map(|l| l.strip_prefix("total_reads_processed:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    Sample {
        execution_us: usec / CHECKS as f64,
        cpu_us: cpu as f64 / 1e3 / CHECKS as f64,
        calls_per_read: calls / reads,
    }
}

fn main() {
    let server = RedisServer::start();
    let pid = server.pid().expect("redis-server is running");
    measure::run_pinned(pid, run(server));
}

async fn run(server: RedisServer) {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir".into(),
        // Generous: under callgrind, Redis runs some fifty times slower.
        timeout: TIMEOUT,
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    };
    let connect = |config| async move {
        RedisStore::connect(&config, Arc::new(SystemClock::new()))
            .await
            .unwrap()
    };
    let weir = connect(config.clone()).await;
    let weir_local = connect(RedisStoreConfig {
        clock: RedisClock::Local,
        window_counters: true,
        access: Default::default(),
        ..config.clone()
    })
    .await;
    let weir_scripts = connect(config.clone()).await;
    weir_scripts.use_scripts();
    let mut connection = redis::Client::open(server.admin_url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &AsyncConnectionConfig::new().set_response_timeout(Some(TIMEOUT)),
        )
        .await
        .unwrap();
    let peer_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(PEER_GCRA)
        .query_async(&mut connection)
        .await
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(EMPTY)
        .query_async(&mut connection)
        .await
        .unwrap();
    let client = Arc::new(Client {
        weir,
        weir_local,
        weir_scripts,
        connection,
        peer_sha,
        gcra: Policy::new(Algorithm::Gcra, 1_000_000, Duration::from_secs(1), None).unwrap(),
        fixed_window: Policy::new(
            Algorithm::FixedWindow,
            1_000_000_000,
            Duration::from_secs(60),
            None,
        )
        .unwrap(),
        fixed_window_spent: Policy::new(Algorithm::FixedWindow, 1, Duration::from_secs(60), None)
            .unwrap(),
    });

    if let Ok(dir) = std::env::var("WEIR_CALLGRIND_DIR") {
        println!("instructions per check, under callgrind:");
        println!("  {:<36} {:>14} {:>14}", "", "whole server", "in call()");
        for workload in Workload::ALL {
            let (total, call) = count(&client, &server, &dir, workload).await;
            println!("  {:<36} {total:>14.0} {call:>14.0}", workload.name());
        }
        return;
    }
    // A warm-up round: every key exists, every script and function is loaded.
    for workload in Workload::ALL {
        round(&client, &server, workload).await;
    }
    let mut samples: Vec<(Workload, Vec<Sample>)> =
        Workload::ALL.iter().map(|&w| (w, Vec::new())).collect();
    for r in 0..ROUNDS {
        // Alternating: each round starts with another workload.
        for k in 0..Workload::ALL.len() {
            let i = (r + k) % Workload::ALL.len();
            let sample = round(&client, &server, samples[i].0).await;
            samples[i].1.push(sample);
        }
    }

    println!(
        "{ROUNDS} rounds of {CHECKS} checks each, {TASKS} tasks, {IDENTITIES} identities; medians:"
    );
    println!(
        "  {:<36} {:>14} {:>14} {:>12}",
        "", "execution/check", "Redis CPU/check", "calls/read"
    );
    let mut medians = Vec::new();
    for (workload, s) in &samples {
        let m = Sample {
            execution_us: median(s.iter().map(|s| s.execution_us).collect()),
            cpu_us: median(s.iter().map(|s| s.cpu_us).collect()),
            calls_per_read: median(s.iter().map(|s| s.calls_per_read).collect()),
        };
        println!(
            "  {:<36} {:>11.2} us {:>11.2} us {:>12.1}",
            workload.name(),
            m.execution_us,
            m.cpu_us,
            m.calls_per_read
        );
        medians.push((*workload, m, s.clone()));
    }
    let ratio = |a: Workload, b: Workload| {
        // The median of each round's ratio: both sides measured minutes apart at most.
        let of = |w: Workload| &medians.iter().find(|m| m.0 == w).unwrap().2;
        let (a, b) = (of(a), of(b));
        let per_round =
            |f: fn(&Sample) -> f64| median(a.iter().zip(b).map(|(x, y)| f(x) / f(y)).collect());
        (per_round(|s| s.execution_us), per_round(|s| s.cpu_us))
    };
    for (a, b) in [
        (Workload::WeirGcra, Workload::PeerGcra),
        (Workload::WeirGcraScript, Workload::PeerGcra),
        (Workload::WeirFixedWindow, Workload::IncrbyExpire),
        (Workload::WeirFixedCounter, Workload::IncrbyExpire),
        (Workload::WeirFixedCounterDenied, Workload::IncrbyExpire),
        (Workload::EmptyFunction, Workload::IncrbyExpire),
    ] {
        let (execution, cpu) = ratio(a, b);
        println!(
            "  {} / {}: execution {execution:.2}x, Redis CPU {cpu:.2}x",
            a.name(),
            b.name()
        );
    }
}
