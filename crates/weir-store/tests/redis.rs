//! The Redis store against real `redis-server` processes (and a local 3-master
//! cluster): the same decisions as the memory store, expiry, script reloads, failures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::LeaseStore;
use weir_store::{
    Check, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Settled, Store, StoreError,
};
use weir_testkit::{
    RedisCluster, RedisServer, acl, calendar_sequences, conformance_sequences, decisions_in_micros,
};

/// 2026-11-30 10:00:00 UTC, in nanoseconds (whole microseconds).
const START: u64 = 1_796_032_800_000_000_000;

/// A store's configuration, its keys under `weir:<name>` (within the keys of the
/// testkit's ACL user, `~weir:*`).
fn config(target: RedisTarget, name: &str, clock: RedisClock) -> RedisStoreConfig {
    RedisStoreConfig {
        target,
        key_prefix: format!("weir:{name}"),
        timeout: Duration::from_secs(2),
        clock,
        window_counters: false,
        access: Default::default(),
    }
}

async fn store(
    server: &RedisServer,
    prefix: &str,
    clock: Arc<dyn Clock>,
    which: RedisClock,
) -> RedisStore {
    RedisStore::connect(
        &config(RedisTarget::Single(server.url()), prefix, which),
        clock,
    )
    .await
    .unwrap()
}

fn key(identity: &str) -> Key<'_> {
    Key {
        rule: "r",
        identity,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_decides_exactly_as_the_memory_store() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(&server, "conformance", clock.clone(), RedisClock::Local).await;
    let mut compared = 0;
    // A fixed seed keeps CI repeatable; WEIR_CONFORMANCE_SEED explores others.
    let seed =
        std::env::var("WEIR_CONFORMANCE_SEED").map_or(0x5eed, |s| s.parse().expect("a number"));
    for (n, (policy, steps)) in conformance_sequences(seed, 240).into_iter().enumerate() {
        let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
        let identity = format!("seq-{n}");
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step.gap_us * 1_000);
            clock.set(now);
            let expected = step.replay(&memory, key(&identity), &policy).await.unwrap();
            let actual = step.replay(&redis, key(&identity), &policy).await.unwrap();
            assert_eq!(
                decisions_in_micros(&actual),
                decisions_in_micros(&expected),
                "seed {seed}, sequence {n} ({:?} {} per {:?}, burst {:?}), step {i} {step:?}",
                policy.algorithm(),
                policy.limit(),
                policy.period(),
                policy.burst(),
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 240 * 30);
}

/// A fixed window on a calendar (uneven windows, as months and days at a clock change
/// are): Redis counts in a key per window, named by the start the instance works out,
/// and decides as the memory store does, by Functions and by script; on Redis's own
/// clock too, the window is the instance's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendar_windows_decide_exactly_as_the_memory_store() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let functions = store(&server, "calendar-f", clock.clone(), RedisClock::Local).await;
    let scripts = store(&server, "calendar-s", clock.clone(), RedisClock::Local).await;
    scripts.use_scripts();
    let mut compared = 0;
    for (n, (policy, steps)) in calendar_sequences(0xca1, 60).into_iter().enumerate() {
        let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
        let identity = format!("cal-{n}");
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step.gap_us * 1_000);
            clock.set(now);
            let expected = step.replay(&memory, key(&identity), &policy).await.unwrap();
            for redis in [&functions, &scripts] {
                let actual = step.replay(redis, key(&identity), &policy).await.unwrap();
                assert_eq!(
                    decisions_in_micros(&actual),
                    decisions_in_micros(&expected),
                    "sequence {n} ({} per window), step {i} {step:?} at {now}",
                    policy.limit(),
                );
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 60 * 30);
    // Each window's count lives under its own key, which expires a second after the
    // window's end (on the instances' clocks).
    let now = clock.now();
    let window = weir_core::Calendar::window(&CALENDAR, now);
    let name = format!("weir:calendar-f:{{cal-0}}c{}:r", window.start / 1_000);
    let one = Policy::new(Algorithm::FixedWindow, 5, Duration::from_secs(4), None)
        .unwrap()
        .on_calendar(&CALENDAR)
        .unwrap();
    let asked = std::time::Instant::now();
    assert!(
        functions
            .check(key("cal-0"), &one, 1)
            .await
            .unwrap()
            .allowed
    );
    let ttl: i64 = server.cli(&["PTTL", &name]).trim().parse().unwrap();
    // Redis's TTL runs down in real time between the check and the read.
    let waited = asked.elapsed().as_millis() as i64;
    let until_end = ((window.end - now) / 1_000_000) as i64;
    assert!(
        (until_end + 990 - waited..=until_end + 1_001).contains(&ttl),
        "{ttl} ms for a window ending in {until_end} ms"
    );
}

static CALENDAR: weir_testkit::UnevenCalendar = weir_testkit::UnevenCalendar;

/// On Redis's own clock (the default), the instance's clock still picks a calendar's
/// window (its key), and Redis's times the answer: the reset is the time from Redis's
/// clock to that window's end.
#[tokio::test]
async fn on_the_servers_clock_a_calendar_window_is_the_instances() {
    let server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(weir_store::SystemClock::new());
    let redis = store(
        &server,
        "calendar-server",
        clock.clone(),
        RedisClock::Server,
    )
    .await;
    let policy = Policy::new(Algorithm::FixedWindow, 1, Duration::from_secs(4), None)
        .unwrap()
        .on_calendar(&CALENDAR)
        .unwrap();
    for attempt in 0.. {
        let identity = format!("u{attempt}");
        let before = clock.now();
        let decision = redis.check(key(&identity), &policy, 1).await.unwrap();
        let after = clock.now();
        let window = weir_core::Calendar::window(&CALENDAR, before);
        if weir_core::Calendar::window(&CALENDAR, after) != window {
            continue; // a boundary passed during the check: which window is unknown
        }
        assert!(decision.allowed);
        let reset = u64::try_from(decision.reset_after.as_nanos()).unwrap();
        // Redis's TIME and the instance's clock are this machine's: within a few ms.
        let skew = 5_000_000;
        assert!(
            reset + skew >= window.end - after && reset <= window.end - before + skew,
            "reset {reset} ns for a window ending {} ns after the check began",
            window.end - before
        );
        let name = format!(
            "weir:calendar-server:{{{identity}}}c{}:r",
            window.start / 1_000
        );
        assert_eq!(server.cli(&["GET", &name]).trim(), "1");
        break;
    }
}

#[tokio::test]
async fn layered_checks_are_all_or_nothing_as_in_memory() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(&server, "layers", clock.clone(), RedisClock::Local).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let second = Policy::new(Algorithm::FixedWindow, 2, Duration::from_secs(1), None).unwrap();
    let minute = Policy::new(Algorithm::SlidingWindow, 3, Duration::from_secs(60), None).unwrap();
    let day = Policy::new(Algorithm::Gcra, 100, Duration::from_secs(86_400), None).unwrap();
    let checks = [
        Check {
            key: Key {
                rule: "s",
                identity: "u",
            },
            policy: &second,
            cost: 1,
        },
        Check {
            key: Key {
                rule: "m",
                identity: "u",
            },
            policy: &minute,
            cost: 1,
        },
        Check {
            key: Key {
                rule: "d",
                identity: "u",
            },
            policy: &day,
            cost: 1,
        },
    ];
    for round in 0..8 {
        let expected = memory.check_all(&checks).await.unwrap();
        let actual = redis.check_all(&checks).await.unwrap();
        let micros = |d: &Vec<_>| d.iter().map(decisions_in_micros).collect::<Vec<_>>();
        assert_eq!(micros(&actual), micros(&expected), "round {round}");
        clock.advance(Duration::from_millis(700));
    }
}

#[tokio::test]
async fn layered_refunds_decide_as_in_memory() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(&server, "refunds", clock.clone(), RedisClock::Local).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let minute = Policy::new(Algorithm::SlidingWindow, 5, Duration::from_secs(60), None).unwrap();
    let hour = Policy::new(Algorithm::Gcra, 7, Duration::from_secs(3_600), None).unwrap();
    let log = Policy::new(Algorithm::SlidingLog, 4, Duration::from_secs(30), None).unwrap();
    let layers = |costs: [u64; 4]| {
        [
            Check {
                key: key("m"),
                policy: &minute,
                cost: costs[0],
            },
            Check {
                key: key("h"),
                policy: &hour,
                cost: costs[1],
            },
            Check {
                key: key("l"),
                policy: &log,
                cost: costs[2],
            },
            // The same key twice in one call: the second sees the first.
            Check {
                key: key("m"),
                policy: &minute,
                cost: costs[3],
            },
        ]
    };
    let micros = |d: &Vec<_>| d.iter().map(decisions_in_micros).collect::<Vec<_>>();
    for round in 0..40u64 {
        let costs = [round % 3, (round / 2) % 3, round % 2, (round / 3) % 2];
        let checks = layers(costs);
        if round % 3 == 2 {
            memory.refund_all(&checks).await.unwrap();
            redis.refund_all(&checks).await.unwrap();
        } else {
            let expected = memory.check_all(&checks).await.unwrap();
            let actual = redis.check_all(&checks).await.unwrap();
            assert_eq!(micros(&actual), micros(&expected), "round {round}");
        }
        let peek = layers([0; 4]);
        let expected = memory.preview_all(&peek).await.unwrap();
        let actual = redis.preview_all(&peek).await.unwrap();
        assert_eq!(micros(&actual), micros(&expected), "round {round}, after");
        clock.advance(Duration::from_millis(1_700 * (round % 4)));
    }
}

#[tokio::test]
async fn every_key_has_a_ttl_no_longer_than_its_state() {
    let server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let redis = store(&server, "ttl", clock, RedisClock::Server).await;
    let mut longest = Vec::new();
    for (i, algorithm) in Algorithm::ALL.into_iter().enumerate() {
        let policy = Policy::new(algorithm, 10, Duration::from_secs(60 + i as u64), None).unwrap();
        for n in 0..20 {
            let identity = format!("user-{n}");
            let d = redis
                .check(key(&identity), &policy, 1 + n % 3)
                .await
                .unwrap();
            assert!(d.allowed);
            longest.push(d.reset_after);
        }
    }
    let keys = server.cli(&["--scan", "--pattern", "weir:ttl:*"]);
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), 20, "one key per identity and rule: {keys:?}");
    let max_reset_ms = longest.iter().max().unwrap().as_millis() as i64 + 1;
    for key in keys {
        let ttl: i64 = server.cli(&["PTTL", key]).trim().parse().unwrap();
        assert!(ttl > 0 && ttl <= max_reset_ms, "{key}: PTTL {ttl}");
    }
}

#[tokio::test]
async fn each_key_expires_when_its_state_is_full_again() {
    let server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let redis = store(&server, "expiry", clock, RedisClock::Server).await;
    let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(10), None).unwrap();
    let before = std::time::Instant::now();
    let d = redis.check(key("k"), &policy, 3).await.unwrap();
    assert!(d.reset_after <= Duration::from_secs(3));
    let ttl: i64 = server
        .cli(&["PTTL", "weir:expiry:{k}:r"])
        .trim()
        .parse()
        .unwrap();
    // Set to 3 s when the check ran, read at most `elapsed` later (however loaded the
    // machine is).
    let elapsed = before.elapsed().as_millis() as i64;
    assert!(
        (3_000 - elapsed - 1..=3_000).contains(&ttl),
        "3 tokens at 1/s refill in 3 s: PTTL {ttl}, read {elapsed} ms after"
    );
}

/// Many concurrent checks while `flush` (`SCRIPT FLUSH`, `FUNCTION FLUSH`) runs again
/// and again: none fails.
async fn flushing_under_load_fails_no_request(flush: &[&str]) {
    let server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let redis = Arc::new(store(&server, "flush", clock, RedisClock::Server).await);
    let policy = Policy::new(Algorithm::Gcra, 1_000_000, Duration::from_secs(1), None).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..16)
        .map(|w| {
            let redis = redis.clone();
            let done = done.clone();
            tokio::spawn(async move {
                for i in 0..150 {
                    let identity = format!("w{w}-{}", i % 7);
                    redis.check(key(&identity), &policy, 1).await.unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut flushes = 0;
    while done.load(Ordering::Relaxed) < 16 * 150 && flushes < 200 {
        assert_eq!(server.cli(flush).trim(), "OK");
        flushes += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for worker in workers {
        worker.await.unwrap();
    }
    assert!(flushes > 1, "the flushes happened during the load");
}

/// The script path (Redis 6) reloads its script.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_flush_under_load_fails_no_request() {
    flushing_under_load_fails_no_request(&["SCRIPT", "FLUSH"]).await;
}

/// The Functions path (Redis 7) loads its library again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn function_flush_under_load_fails_no_request() {
    flushing_under_load_fails_no_request(&["FUNCTION", "FLUSH"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_with_skewed_clocks_do_not_over_admit_on_the_server_clock() {
    let server = RedisServer::start();
    // Two instances whose own clocks are 30 s apart: the server's clock decides.
    let early: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let late: Arc<dyn Clock> = Arc::new(ManualClock::new(START + 30_000_000_000));
    let a = store(&server, "skew", early, RedisClock::Server).await;
    let b = store(&server, "skew", late, RedisClock::Server).await;
    for algorithm in Algorithm::ALL {
        let policy = Policy::new(algorithm, 20, Duration::from_secs(60), None).unwrap();
        let identity = format!("shared-{algorithm}");
        let mut admitted = 0;
        for i in 0..100 {
            let instance = if i % 2 == 0 { &a } else { &b };
            admitted += u32::from(
                instance
                    .check(key(&identity), &policy, 1)
                    .await
                    .unwrap()
                    .allowed,
            );
        }
        assert_eq!(admitted, 20, "{algorithm}");
    }
}

#[tokio::test]
async fn hostile_identities_stay_in_their_own_keys() {
    let server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let redis = store(&server, "hostile", clock, RedisClock::Server).await;
    let policy = Policy::new(Algorithm::FixedWindow, 1, Duration::from_secs(60), None).unwrap();
    let long = "x".repeat(10_000);
    let identities = [
        "a",
        "a}:r",
        "{a}",
        "a\nb",
        "a:",
        "%61",
        "",
        "é",
        long.as_str(),
    ];
    for identity in identities {
        let d = redis.check(key(identity), &policy, 1).await.unwrap();
        assert!(
            d.allowed,
            "{identity:?} was counted against another identity"
        );
    }
    for identity in identities {
        assert!(
            !redis
                .check(key(identity), &policy, 1)
                .await
                .unwrap()
                .allowed
        );
    }
    let keys = server.cli(&["--scan", "--pattern", "weir:hostile:*"]);
    assert_eq!(keys.lines().count(), identities.len());
    assert!(keys.lines().all(|k| k.len() < 200), "{keys}");
}

#[tokio::test]
async fn a_stopped_redis_is_a_clear_error_within_the_timeout() {
    let mut server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let mut cfg = config(
        RedisTarget::Single(server.url()),
        "down",
        RedisClock::Server,
    );
    cfg.timeout = Duration::from_millis(200);
    let redis = RedisStore::connect(&cfg, clock).await.unwrap();
    let policy = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(1), None).unwrap();
    redis.check(key("k"), &policy, 1).await.unwrap();
    server.kill();
    for _ in 0..5 {
        let started = Instant::now();
        let error = redis.check(key("k"), &policy, 1).await.unwrap_err();
        assert!(error.is_unavailable(), "{error}");
        assert!(
            started.elapsed() < Duration::from_millis(1_500),
            "took {:?}",
            started.elapsed()
        );
    }
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis.check(key("k"), &policy, 1).await.is_err() {
        assert!(Instant::now() < deadline, "did not reconnect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn connecting_to_nothing_is_a_clear_error() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let mut cfg = config(
        RedisTarget::Single("redis://127.0.0.1:1".into()),
        "x",
        RedisClock::Server,
    );
    cfg.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let error = RedisStore::connect(&cfg, clock).await.unwrap_err();
    assert!(
        matches!(error, StoreError::Unavailable(_) | StoreError::Timeout(_)),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_admits_exactly_the_limit_and_layers_all_or_nothing() {
    let cluster = RedisCluster::start();
    // The manual clock, not the servers': a second or a minute passing between two
    // checks on a loaded machine would change what the layers report.
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let cfg = config(
        RedisTarget::Cluster(cluster.urls()),
        "cl",
        RedisClock::Local,
    );
    let redis = Arc::new(RedisStore::connect(&cfg, clock).await.unwrap());

    // Exact counts, for every algorithm, with concurrent checks on many identities.
    for algorithm in Algorithm::ALL {
        let policy = Policy::new(algorithm, 25, Duration::from_secs(3600), None).unwrap();
        let tasks: Vec<_> = (0..32)
            .map(|t| {
                let redis = redis.clone();
                tokio::spawn(async move {
                    let mut admitted = [0u32; 4];
                    for i in 0..20 {
                        let identity = format!("{algorithm}-{}", (t + i) % 4);
                        let k = Key {
                            rule: "r",
                            identity: &identity,
                        };
                        admitted[(t + i) % 4] +=
                            u32::from(redis.check(k, &policy, 1).await.unwrap().allowed);
                    }
                    admitted
                })
            })
            .collect();
        let mut totals = [0u32; 4];
        for task in tasks {
            for (total, n) in totals.iter_mut().zip(task.await.unwrap()) {
                *total += n;
            }
        }
        assert_eq!(totals, [25; 4], "{algorithm}");
    }

    // Per second, per minute, per day for one user: all or nothing.
    let second = Policy::new(Algorithm::FixedWindow, 1_000, Duration::from_secs(1), None).unwrap();
    let minute = Policy::new(Algorithm::TokenBucket, 3, Duration::from_secs(60), None).unwrap();
    let day = Policy::new(Algorithm::SlidingLog, 5, Duration::from_secs(86_400), None).unwrap();
    let layers = |cost| {
        [
            Check {
                key: Key {
                    rule: "sec",
                    identity: "ana",
                },
                policy: &second,
                cost: 1,
            },
            Check {
                key: Key {
                    rule: "min",
                    identity: "ana",
                },
                policy: &minute,
                cost,
            },
            Check {
                key: Key {
                    rule: "day",
                    identity: "ana",
                },
                policy: &day,
                cost: 1,
            },
        ]
    };
    let first = redis.check_all(&layers(2)).await.unwrap();
    assert!(first.iter().all(|d| d.allowed));
    let denied = redis.check_all(&layers(2)).await.unwrap();
    assert_eq!(
        denied
            .iter()
            .map(|d| (d.allowed, d.remaining))
            .collect::<Vec<_>>(),
        [(true, 999), (false, 1), (true, 4)],
        "the minute layer denies; the others report what they had"
    );
    let after = redis.check_all(&layers(1)).await.unwrap();
    assert_eq!(
        after
            .iter()
            .map(|d| (d.allowed, d.remaining))
            .collect::<Vec<_>>(),
        [(true, 998), (true, 0), (true, 3)],
        "the denied request consumed nothing"
    );
}

#[tokio::test]
async fn a_preview_decides_as_a_check_and_changes_nothing_in_both_stores() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(&server, "preview", clock.clone(), RedisClock::Local).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let login = Policy::new(Algorithm::SlidingLog, 3, Duration::from_secs(900), None).unwrap();
    let failed = [Check {
        key: key("ana@x.io"),
        policy: &login,
        cost: 1,
    }];
    let stores: [&dyn Store; 2] = [&memory, &redis];
    for store in stores {
        for round in 0..5 {
            let preview = store.preview_all(&failed).await.unwrap();
            let again = store.preview_all(&failed).await.unwrap();
            assert_eq!(preview, again, "a preview changes nothing");
            assert_eq!(preview[0].allowed, round < 3, "round {round}");
            // Only a counted outcome consumes.
            store.check_all(&failed).await.unwrap();
        }
        let denied = store.preview_all(&failed).await.unwrap();
        assert_eq!(denied[0].retry_after, Some(Duration::from_secs(900)));
    }
}

/// (allowed, remaining) of each decision.
fn outcomes(decisions: &[weir_core::Decision]) -> Vec<(bool, u64)> {
    decisions.iter().map(|d| (d.allowed, d.remaining)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_layers_different_identities_all_or_nothing_as_one_server() {
    let cluster = RedisCluster::start();
    let clock = Arc::new(ManualClock::new(START));
    let cfg = config(
        RedisTarget::Cluster(cluster.urls()),
        "mixed",
        RedisClock::Server,
    );
    let redis = Arc::new(RedisStore::connect(&cfg, clock.clone()).await.unwrap());
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock);
    // One identity per node: an API key, a user, an IP address.
    let (key_id, user, ip) = (
        cluster.identity_on(0, "key"),
        cluster.identity_on(1, "user"),
        cluster.identity_on(2, "ip"),
    );
    let per_day = Policy::new(
        Algorithm::FixedWindow,
        1_000,
        Duration::from_secs(86_400),
        None,
    )
    .unwrap();
    let per_minute = Policy::new(Algorithm::TokenBucket, 3, Duration::from_secs(60), None).unwrap();
    let per_ip = Policy::new(Algorithm::SlidingLog, 5, Duration::from_secs(86_400), None).unwrap();
    let layers = |key_cost, user_cost, ip_cost| {
        [
            Check {
                key: Key {
                    rule: "key",
                    identity: &key_id,
                },
                policy: &per_day,
                cost: key_cost,
            },
            Check {
                key: Key {
                    rule: "user",
                    identity: &user,
                },
                policy: &per_minute,
                cost: user_cost,
            },
            Check {
                key: Key {
                    rule: "ip",
                    identity: &ip,
                },
                policy: &per_ip,
                cost: ip_cost,
            },
        ]
    };
    let stores: [&dyn Store; 2] = [&memory, &*redis];
    // Each row: the user's cost, the IP's cost, whether a preview; then the expected
    // (allowed, remaining) per layer, which one server (the memory store) also gives.
    let rows = [
        (2, 1, true, [(true, 999), (true, 1), (true, 4)]),
        (2, 1, false, [(true, 999), (true, 1), (true, 4)]),
        // The middle layer denies: the first is given back, the last not reached.
        (2, 1, false, [(true, 999), (false, 1), (true, 4)]),
        // A preview reports what a commit would consume where it passes.
        (2, 1, true, [(true, 998), (false, 1), (true, 3)]),
        (1, 1, false, [(true, 998), (true, 0), (true, 3)]),
        // The last layer denies: the first two are given back.
        (0, 4, false, [(true, 998), (true, 0), (false, 3)]),
        (0, 3, false, [(true, 997), (true, 0), (true, 0)]),
    ];
    for store in stores {
        for (n, (user_cost, ip_cost, preview, expected)) in rows.iter().enumerate() {
            let checks = layers(1, *user_cost, *ip_cost);
            let decisions = if *preview {
                store.preview_all(&checks).await.unwrap()
            } else {
                store.check_all(&checks).await.unwrap()
            };
            assert_eq!(outcomes(&decisions), expected, "row {n}");
        }
        // A refund of several identities gives back each of them.
        store.refund_all(&layers(1, 1, 2)).await.unwrap();
        let after = store.preview_all(&layers(0, 0, 0)).await.unwrap();
        assert_eq!(outcomes(&after), [(true, 998), (true, 1), (true, 2)]);
        store.refund_all(&layers(5, 3, 5)).await.unwrap();
        let full = store.preview_all(&layers(0, 0, 0)).await.unwrap();
        assert_eq!(outcomes(&full), [(true, 1_000), (true, 3), (true, 5)]);
        for check in layers(0, 0, 0) {
            store.reset(check.key, check.policy).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_layers_across_slots_admit_exactly_the_limit() {
    let cluster = RedisCluster::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let cfg = config(
        RedisTarget::Cluster(cluster.urls()),
        "race",
        RedisClock::Server,
    );
    let redis = Arc::new(RedisStore::connect(&cfg, clock).await.unwrap());
    let wide = Policy::new(
        Algorithm::SlidingLog,
        1_000,
        Duration::from_secs(86_400),
        None,
    )
    .unwrap();
    for (i, algorithm) in Algorithm::ALL.into_iter().enumerate() {
        // Checked first, on one node: never denies, so a denial by the second layer
        // always gives units back here.
        let ip = cluster.identity_on(i % 3, &format!("ip-{algorithm}"));
        let user = cluster.identity_on((i + 1) % 3, &format!("user-{algorithm}"));
        let limit = Policy::new(algorithm, 25, Duration::from_secs(86_400), None).unwrap();
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (redis, ip, user) = (redis.clone(), ip.clone(), user.clone());
                tokio::spawn(async move {
                    let mut admitted = 0;
                    for _ in 0..4 {
                        let checks = [
                            Check {
                                key: Key {
                                    rule: "ip",
                                    identity: &ip,
                                },
                                policy: &wide,
                                cost: 1,
                            },
                            Check {
                                key: Key {
                                    rule: "user",
                                    identity: &user,
                                },
                                policy: &limit,
                                cost: 1,
                            },
                        ];
                        let decisions = redis.check_all(&checks).await.unwrap();
                        admitted += u32::from(decisions.iter().all(|d| d.allowed));
                    }
                    admitted
                })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            admitted += task.await.unwrap();
        }
        assert_eq!(admitted, 25, "{algorithm}");
        let ip_key = Key {
            rule: "ip",
            identity: &ip,
        };
        assert_eq!(
            redis.check(ip_key, &wide, 0).await.unwrap().remaining,
            1_000 - 25,
            "{algorithm}: every denied request was given back on the other slot"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_fails_on_one_slot_gives_back_the_others() {
    let cluster = RedisCluster::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let mut cfg = config(
        RedisTarget::Cluster(cluster.urls()),
        "fail",
        RedisClock::Server,
    );
    cfg.timeout = Duration::from_millis(300);
    let redis = RedisStore::connect(&cfg, clock).await.unwrap();
    let (first, second) = (
        cluster.identity_on(0, "first"),
        cluster.identity_on(1, "second"),
    );
    let policy = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(86_400), None).unwrap();
    let checks = [
        Check {
            key: Key {
                rule: "r",
                identity: &first,
            },
            policy: &policy,
            cost: 4,
        },
        Check {
            key: Key {
                rule: "r",
                identity: &second,
            },
            policy: &policy,
            cost: 4,
        },
    ];
    cluster.nodes()[1].pause();
    let failed = redis.check_all(&checks).await;
    cluster.nodes()[1].resume();
    assert!(
        failed.as_ref().is_err_and(StoreError::is_unavailable),
        "{failed:?}"
    );
    let first_now = redis.check(checks[0].key, &policy, 0).await.unwrap();
    assert_eq!(
        first_now.remaining, 10,
        "the first slot's units were given back"
    );
}

/// The user guide's list of the commands weir sends (docs/guide/src/sharing/redis.md)
/// is enough (every Redis test runs as that user; this one goes through every kind of
/// call at once): a Redis ACL user allowed those alone, on `weir:*` keys, checks every
/// algorithm (by function and by script, on Redis's clock and with window counters),
/// refunds, charges, leases and resets, and its store's health loop finds Redis up
/// though `ROLE` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_user_allowed_only_the_readme_commands_does_everything() {
    // The testkit's user is allowed the guide's list (`weir_testkit::acl`), but
    // `ROLE`, which the guide says is optional.
    let server = RedisServer::start();
    let acl = server.cli(&["ACL", "SETUSER", weir_testkit::acl::USER, "-role"]);
    assert_eq!(acl.trim(), "OK");
    let url = server.url();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    for (round, (scripts, which, counters)) in [
        (false, RedisClock::Server, false),
        (true, RedisClock::Server, false),
        (false, RedisClock::Local, true),
    ]
    .into_iter()
    .enumerate()
    {
        let mut cfg = config(RedisTarget::Single(url.clone()), "acl", which);
        cfg.window_counters = counters;
        let store = RedisStore::connect(&cfg, clock.clone()).await.unwrap();
        if scripts {
            store.use_scripts();
        }
        for algorithm in Algorithm::ALL {
            let policy = Policy::new(algorithm, 10, Duration::from_secs(60), None).unwrap();
            // A key of each round's own: the rounds' clocks differ.
            let name = format!("{}-{round}", algorithm.name());
            let k = key(&name);
            let decision = store.check(k, &policy, 1).await;
            assert!(
                decision.as_ref().is_ok_and(|d| d.allowed),
                "{algorithm:?}: {decision:?}"
            );
            let checks = [Check {
                key: k,
                policy: &policy,
                cost: 1,
            }];
            store.refund_all(&checks).await.unwrap();
            if algorithm.carries_debt() {
                store.charge_all(&checks).await.unwrap();
            }
            store.reset(k, &policy).await.unwrap();
        }
        let gcra = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(60), None).unwrap();
        let take = weir_core::Take {
            min: 1,
            max: 5,
            hold: Duration::from_secs(10),
            closing: None,
        };
        let leased = format!("leased-{round}");
        let grant = store.take(key(&leased), &gcra, take).await.unwrap();
        let lease = grant
            .lease
            .unwrap_or_else(|| panic!("round {round}: no lease: {grant:?}"));
        assert!(
            store
                .give_back(key(&leased), &gcra, lease, 1)
                .await
                .unwrap()
        );
    }
    let cfg = config(RedisTarget::Single(url), "acl", RedisClock::Server);
    let watched = RedisStore::start(&cfg, clock);
    assert!(watched.wait_connected(Duration::from_secs(2)).await);
}

/// A check on a Redis Cluster whose slot is being moved to another node (resharding)
/// follows Redis's `ASK` redirection, which takes `ASKING` first: the guide's list
/// grants it, and without it the check fails (after the store's timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_on_a_slot_being_migrated_follows_the_ask_redirection() {
    let cluster = RedisCluster::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let cfg = config(
        RedisTarget::Cluster(cluster.urls()),
        "migrate",
        RedisClock::Local,
    );
    let redis = RedisStore::connect(&cfg, clock).await.unwrap();
    let policy = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(60), None).unwrap();
    // Moving from node 0 to node 1; none of its keys exists yet, so node 0 answers
    // `ASK` (not `TRYAGAIN`) for every check on it.
    let moving = cluster.identity_on(0, "moving");
    let slot = cluster.nodes()[0].cli(&["CLUSTER", "KEYSLOT", &moving]);
    let id = |node: usize| cluster.nodes()[node].cli(&["CLUSTER", "MYID"]);
    let (source, target) = (id(0), id(1));
    let set = |node: usize, state: &str, other: &str| {
        let said =
            cluster.nodes()[node].cli(&["CLUSTER", "SETSLOT", slot.trim(), state, other.trim()]);
        assert_eq!(said.trim(), "OK", "SETSLOT {state}: {said}");
    };
    set(1, "IMPORTING", &source);
    set(0, "MIGRATING", &target);
    let grant = |rule: &str| {
        for node in cluster.nodes() {
            let said = node.cli(&["ACL", "SETUSER", weir_testkit::acl::USER, rule]);
            assert_eq!(said.trim(), "OK", "{said}");
        }
    };

    grant("-asking");
    let refused = redis.check(key(&moving), &policy, 1).await;
    // redis-rs follows the redirection again and again, refused each time, until
    // the store's timeout: the check is a store failure, never decided.
    assert!(
        refused.as_ref().is_err_and(|e| e.is_unavailable()),
        "checked without ASKING: {refused:?}"
    );
    grant("+asking");
    // Decided on node 1, which keeps the state: the second check counts on the first.
    for left in [9, 8] {
        let decision = redis.check(key(&moving), &policy, 1).await.unwrap();
        assert!(
            decision.allowed && decision.remaining == left,
            "{decision:?}"
        );
    }
    assert!(cluster.nodes()[1].calls("asking") >= 2);
}

/// A settlement sent again (its first answer lost) is written once: on a server, by
/// Functions and by script, and on a cluster, where each identity's part is
/// remembered apart; the state ends as the memory store's after one settlement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_sent_twice_is_written_once() {
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let clock = Arc::new(ManualClock::new(START));
    let bucket = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(3600), None).unwrap();
    let window = Policy::new(Algorithm::FixedWindow, 100, Duration::from_secs(3600), None).unwrap();
    let targets = [
        (RedisTarget::Single(server.url()), false),
        (RedisTarget::Single(server.url()), true),
        (RedisTarget::Cluster(cluster.urls()), false),
    ];
    for (round, (target, scripts)) in targets.into_iter().enumerate() {
        let redis = RedisStore::connect(
            &config(target, &format!("settle{round}"), RedisClock::Local),
            clock.clone(),
        )
        .await
        .unwrap();
        if scripts {
            redis.use_scripts();
        }
        let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
        let (ana, bo) = (key("ana"), key("bo"));
        let reserve = [
            Check {
                key: ana,
                policy: &window,
                cost: 30,
            },
            Check {
                key: bo,
                policy: &bucket,
                cost: 30,
            },
        ];
        let refunds = [Check {
            key: ana,
            policy: &window,
            cost: 10,
        }];
        let charges = [Check {
            key: bo,
            policy: &bucket,
            cost: 50,
        }];
        for store in [&redis as &dyn Store, &memory] {
            assert!(
                store
                    .check_all(&reserve)
                    .await
                    .unwrap()
                    .iter()
                    .all(|d| d.allowed)
            );
        }
        let id = 0x5e77_1e00 + round as u128;
        let first = redis.settle_all(id, &refunds, &charges).await.unwrap();
        let again = redis.settle_all(id, &refunds, &charges).await.unwrap();
        assert_eq!(
            (first, again),
            (Settled::Written, Settled::Repeated),
            "round {round}"
        );
        memory.settle_all(id, &refunds, &charges).await.unwrap();
        let peek = [
            Check {
                key: ana,
                policy: &window,
                cost: 0,
            },
            Check {
                key: bo,
                policy: &bucket,
                cost: 0,
            },
        ];
        let left = |d: Vec<weir_core::Decision>| d.iter().map(|d| d.remaining).collect::<Vec<_>>();
        let on_redis = left(redis.preview_all(&peek).await.unwrap());
        assert_eq!(
            on_redis,
            left(memory.preview_all(&peek).await.unwrap()),
            "round {round}"
        );
        assert_eq!(
            on_redis,
            [80, 20],
            "round {round}: given back 10 of 30, charged 50 past 30"
        );
        // Another settlement is another id: written.
        let other = redis.settle_all(id + 1, &refunds, &[]).await.unwrap();
        assert_eq!(other, Settled::Written);
    }
}

/// The commands of the minimal ACL for script mode: the guide's Functions list
/// ([`acl::COMMANDS`]) without `FCALL` and `FUNCTION LOAD`, as its Scripts line is.
fn script_mode() -> Vec<&'static str> {
    acl::COMMANDS
        .into_iter()
        .filter(|c| !matches!(*c, "+fcall" | "+function|load"))
        .collect()
}

/// Makes ACL user `weir` (password `secret`, keys `weir:*`) allowed exactly
/// `commands`; its URL.
fn acl_user(server: &RedisServer, commands: &[&str]) -> String {
    let mut args = vec![
        "ACL", "SETUSER", "weir", "reset", "on", ">secret", "~weir:*", "-@all",
    ];
    args.extend(commands);
    assert_eq!(server.cli(&args).trim(), "OK");
    format!("redis://weir:secret@127.0.0.1:{}", server.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_user_denied_functions_checks_by_script() {
    let server = RedisServer::start();
    let url = acl_user(&server, &script_mode());
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let cfg = config(RedisTarget::Single(url), "acl", RedisClock::Server);
    RedisStore::admitted(&cfg, clock.clone()).await.unwrap();
    let store = RedisStore::connect(&cfg, clock).await.unwrap();
    for algorithm in Algorithm::ALL {
        let policy = Policy::new(algorithm, 3, Duration::from_secs(60), None).unwrap();
        let name = algorithm.name();
        let mut admitted = 0;
        for _ in 0..4 {
            admitted += u32::from(store.check(key(name), &policy, 1).await.unwrap().allowed);
        }
        assert_eq!(admitted, 3, "{algorithm:?}");
    }
    assert_eq!(server.calls("fcall"), 0);
    assert!(server.calls("evalsha") > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_user_lacking_a_command_weir_needs_is_refused_at_admission_naming_it() {
    let server = RedisServer::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    for (missing, named) in [("+get", "GET"), ("+evalsha", "'evalsha'")] {
        let commands: Vec<&str> = script_mode()
            .into_iter()
            .filter(|c| *c != missing)
            .collect();
        let url = acl_user(&server, &commands);
        let cfg = config(RedisTarget::Single(url), "acl", RedisClock::Server);
        let error = RedisStore::admitted(&cfg, clock.clone()).await.unwrap_err();
        let StoreError::Refused(said) = &error else {
            panic!("without {missing}: {error:?}");
        };
        assert!(
            said.contains("ACL user weir may not run") && said.contains(named),
            "without {missing}: {said}"
        );
    }
}
