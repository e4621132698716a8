//! The sliding log on Redis at the sizes the conformance suite does not reach: logs of
//! thousands of entries decide as the memory store's, through every path (one check,
//! layered checks, previews, refunds, a limit raised and lowered), and a full log of
//! the largest limit, checked by many clients at once, answers every check and costs
//! Redis about what another rule's check does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, Decision, ManualClock, Policy};
use weir_store::{
    Check, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Store,
};
use weir_testkit::{RedisServer, decisions_in_micros};

/// 2026-11-30 10:00:00 UTC, in nanoseconds (whole microseconds).
const START: u64 = 1_796_032_800_000_000_000;

async fn connect(server: &RedisServer, clock: Arc<dyn Clock>, timeout: Duration) -> RedisStore {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir:log".to_owned(),
        timeout,
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    RedisStore::connect(&config, clock).await.unwrap()
}

fn log(limit: u64, period: Duration) -> Policy {
    Policy::new(Algorithm::SlidingLog, limit, period, None).unwrap()
}

/// A small deterministic generator.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn micros(decisions: &[Decision]) -> Vec<Decision> {
    decisions.iter().map(decisions_in_micros).collect()
}

#[tokio::test]
async fn long_logs_decide_as_the_memory_store_on_every_path() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = connect(&server, clock.clone(), Duration::from_secs(5)).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let period = Duration::from_secs(10);
    // The limit changes under the same key: raised past the ring's size (laid out
    // again), lowered below the entries it holds, raised again.
    let limits = [1_000, 1_600, 700, 2_500];
    let policies: Vec<Policy> = limits.iter().map(|&l| log(l, period)).collect();
    let other = Policy::new(Algorithm::Gcra, 100_000, Duration::from_secs(1), None).unwrap();
    let (user, layer) = (
        Key {
            rule: "log",
            identity: "u",
        },
        Key {
            rule: "gcra",
            identity: "u",
        },
    );
    let mut rng = XorShift(0x51d1);
    let mut now = START;
    let stores: [&dyn Store; 2] = [&memory, &redis];
    // Each limit in turn: a busy client filling the log (cost 1, a few microseconds
    // apart), then mixed traffic: pauses that expire part of the log, a clock stepping
    // back, whole periods, and costs up to more than the limit.
    for step in 0..4 * 2_400 {
        let (policy, busy) = (&policies[step / 2_400], step % 2_400 < 2_000);
        let gap_us: i64 = match rng.below(100) {
            _ if busy => 1 + rng.below(20) as i64,
            0..=59 => rng.below(20) as i64,
            60..=79 => rng.below(3_000_000) as i64,
            80..=94 => -(rng.below(2_000) as i64),
            95..=96 => 10_000_000,
            _ => 0,
        };
        now = now.saturating_add_signed(gap_us * 1_000);
        clock.set(now);
        let cost = match rng.below(100) {
            _ if busy => 1,
            0..=59 => 1,
            60..=84 => rng.below(40),
            85..=89 => 0,
            _ => rng.below(policy.limit() + 2),
        };
        let check = [Check {
            key: user,
            policy,
            cost,
        }];
        let layered = [
            check[0],
            Check {
                key: layer,
                policy: &other,
                cost: 1,
            },
        ];
        let path = rng.below(10);
        let mut seen = Vec::new();
        for store in stores {
            let decided = match path {
                0 => store.refund_all(&check).await.map(|()| Vec::new()),
                1 => store.preview_all(&check).await,
                2 => store.check_all(&layered).await,
                // One key twice in one call: the second sees what the first left.
                3 => store.check_all(&[check[0], check[0]]).await,
                4 => store
                    .refund_all(&[check[0], check[0]])
                    .await
                    .map(|()| Vec::new()),
                _ => store.check(user, policy, cost).await.map(|d| vec![d]),
            }
            .unwrap();
            let peek = store.check(user, policy, 0).await.unwrap();
            seen.push((micros(&decided), decisions_in_micros(&peek)));
        }
        assert_eq!(
            seen[1],
            seen[0],
            "step {step}, cost {cost}, limit {}",
            policy.limit()
        );
    }
}

/// The documented maximum of a sliding log's limit.
const LIMIT: u64 = weir_core::MAX_SLIDING_LOG_LIMIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_log_of_the_largest_limit_under_concurrency_answers_every_check_and_costs_what_a_gcra_check_does()
 {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    // The service's default timeout: a check that waits behind a slow one fails.
    let timeout = Duration::from_millis(50);
    // The log by script, GCRA by function: INFO commandstats times each apart.
    let logs = Arc::new(connect(&server, clock.clone(), timeout).await);
    logs.use_scripts();
    let gcras = Arc::new(connect(&server, clock.clone(), timeout).await);
    let period = Duration::from_secs(3_600);
    let policy = Arc::new(log(LIMIT, period));
    let gcra = Arc::new(Policy::new(Algorithm::Gcra, 1_000, Duration::from_secs(1), None).unwrap());
    let login = Key {
        rule: "login",
        identity: "attacker",
    };
    // One entry per microsecond: the most entries a log can hold. Filled without the
    // service's timeout: on a loaded machine one of these 10,000 checks may take 50
    // ms, and the filling is not what is measured.
    let filler = connect(&server, clock.clone(), Duration::from_secs(2)).await;
    filler.use_scripts();
    for _ in 0..LIMIT {
        assert!(filler.check(login, &policy, 1).await.unwrap().allowed);
        clock.advance(Duration::from_micros(1));
    }
    assert_eq!(
        server.cli(&["STRLEN", "weir:log:{attacker}:login"]).trim(),
        "160050"
    );
    // From the oldest entry's expiry on, each microsecond frees one unit.
    clock.set(START + period.as_nanos() as u64);
    server.cli(&["CONFIG", "RESETSTAT"]);

    let mut tasks = Vec::new();
    for t in 0..8 {
        let (logs, policy, clock) = (logs.clone(), policy.clone(), clock.clone());
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0;
            for _ in 0..250 {
                if t % 2 == 0 {
                    clock.advance(Duration::from_micros(1));
                }
                let decision = logs.check(login, &policy, 1).await.expect("answered");
                admitted += u64::from(decision.allowed);
            }
            admitted
        }));
    }
    let mut others = Vec::new();
    for t in 0..2 {
        let (gcras, gcra) = (gcras.clone(), gcra.clone());
        others.push(tokio::spawn(async move {
            let identity = format!("caller-{t}");
            let key = Key {
                rule: "api",
                identity: &identity,
            };
            for _ in 0..1_000 {
                gcras.check(key, &gcra, 1).await.expect("answered");
            }
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    for task in others {
        task.await.unwrap();
    }

    // Exact under concurrency: the log holds the entries that have not expired, and
    // those admitted since.
    let now = clock.now();
    let expired = (now - START) / 1_000 - period.as_micros() as u64 + 1;
    let peek = logs.check(login, &policy, 0).await.unwrap();
    assert!(
        admitted > 0 && admitted <= expired,
        "{admitted} of {expired}"
    );
    assert_eq!(peek.remaining, expired - admitted);

    let log_calls = server.calls("evalsha");
    let gcra_calls = server.calls("fcall");
    assert_eq!((log_calls, gcra_calls), (8 * 250 + 1, 2 * 1_000));
    // Never the whole log: a few records read and written per check.
    assert_eq!(server.calls("get"), 2_000, "GCRA's own GETs only");
    let record_calls = server.calls("getrange") + server.calls("setrange");
    assert!(
        record_calls <= 6 * log_calls,
        "{record_calls} record reads and writes for {log_calls} checks"
    );
    // Redis's own timing of each call, in the same run: a check of the full log costs
    // a small multiple of a GCRA check, script overhead included (it was hundreds).
    let per_call = |command| server.usec(command) as f64 / server.calls(command) as f64;
    let (log_us, gcra_us) = (per_call("evalsha"), per_call("fcall"));
    assert!(
        log_us <= 10.0 * gcra_us,
        "a sliding-log check took {log_us:.1} us in Redis, a GCRA check {gcra_us:.1} us"
    );
}

#[tokio::test]
async fn a_log_in_the_former_format_is_kept_in_the_new_one() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = connect(&server, clock.clone(), Duration::from_secs(5)).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let policy = log(5, Duration::from_secs(60));
    let key = Key {
        rule: "login",
        identity: "ana",
    };
    // What an earlier weir wrote after admitting 2 at START and 1 a second later.
    let us = START / 1_000;
    let former = format!("l:{us}:2,{}:1", us + 1_000_000);
    server.cli(&["SET", "weir:log:{ana}:login", &former, "PX", "60000"]);
    memory.check(key, &policy, 2).await.unwrap();
    clock.advance(Duration::from_secs(1));
    memory.check(key, &policy, 1).await.unwrap();

    // A peek reads it and writes nothing; then each check decides as the memory store.
    clock.advance(Duration::from_secs(1));
    let peek = redis.check(key, &policy, 0).await.unwrap();
    assert_eq!(peek, memory.check(key, &policy, 0).await.unwrap());
    assert_eq!(peek.remaining, 2);
    assert_eq!(server.cli(&["GET", "weir:log:{ana}:login"]).trim(), former);
    for (gap, cost) in [(0, 2), (0, 1), (58, 1), (1, 3), (1, 1)] {
        clock.advance(Duration::from_secs(gap));
        assert_eq!(
            decisions_in_micros(&redis.check(key, &policy, cost).await.unwrap()),
            decisions_in_micros(&memory.check(key, &policy, cost).await.unwrap()),
            "{gap} s later, cost {cost}"
        );
    }
    let value = server.cli(&["GETRANGE", "weir:log:{ana}:login", "0", "1"]);
    assert_eq!(value.trim(), "L:", "kept in the new format");
}
