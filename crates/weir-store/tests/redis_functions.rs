//! The two ways weir's Lua reaches Redis: a Functions library called by `FCALL` (Redis
//! 7), and the script by `EVALSHA` (a Redis without Functions); a library lost between
//! checks is loaded again without failing one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    Check, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Store,
};
use weir_testkit::{RedisCluster, RedisServer, conformance_sequences, decisions_in_micros};

/// 2026-11-30 10:00:00 UTC, in nanoseconds (whole microseconds).
const START: u64 = 1_796_032_800_000_000_000;

async fn connect(target: RedisTarget, clock: Arc<dyn Clock>, which: RedisClock) -> RedisStore {
    let config = RedisStoreConfig {
        target,
        key_prefix: "weir:fn".to_owned(),
        timeout: Duration::from_secs(2),
        clock: which,
        window_counters: false,
        access: Default::default(),
    };
    RedisStore::connect(&config, clock).await.unwrap()
}

/// A store on `server`, timed by a manual clock it returns.
async fn on_local_clock(server: &RedisServer) -> (RedisStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(START));
    let redis = connect(
        RedisTarget::Single(server.url()),
        clock.clone(),
        RedisClock::Local,
    )
    .await;
    (redis, clock)
}

fn key(identity: &str) -> Key<'_> {
    Key {
        rule: "r",
        identity,
    }
}

/// The names of the libraries `FUNCTION LIST` shows.
fn libraries(server: &RedisServer) -> Vec<String> {
    let list = server.cli(&["FUNCTION", "LIST"]);
    let lines: Vec<&str> = list.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "library_name")
        .map(|w| w[1].to_owned())
        .collect()
}

/// Replays conformance sequences on `redis`, beside the memory store; `between(n)` runs
/// before the n-th step of all.
async fn replays_as_memory(redis: &RedisStore, clock: &Arc<ManualClock>, between: impl Fn(usize)) {
    let mut n = 0;
    for (s, (policy, steps)) in conformance_sequences(0xf0c, 60).into_iter().enumerate() {
        let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
        let identity = format!("seq-{s}");
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            between(n);
            n += 1;
            now = now.saturating_add_signed(step.gap_us * 1_000);
            clock.set(now);
            let expected = step.replay(&memory, key(&identity), &policy).await.unwrap();
            let actual = step.replay(redis, key(&identity), &policy).await.unwrap();
            assert_eq!(
                decisions_in_micros(&actual),
                decisions_in_micros(&expected),
                "sequence {s} ({policy:?}), step {i} {step:?}"
            );
        }
    }
}

#[tokio::test]
async fn redis_7_checks_by_fcall_of_the_loaded_library() {
    let server = RedisServer::start();
    let (redis, clock) = on_local_clock(&server).await;
    let loaded = libraries(&server);
    assert!(
        loaded.len() == 1 && loaded[0].starts_with("weir_"),
        "loaded on connecting: {loaded:?}"
    );
    replays_as_memory(&redis, &clock, |_| {}).await;
    assert!(server.calls("fcall") > 0);
    assert_eq!(server.calls("evalsha") + server.calls("eval"), 0);
    assert_eq!(server.calls("function|load"), 1, "loaded once");
}

#[tokio::test]
async fn scripts_decide_as_functions_do() {
    let server = RedisServer::start();
    let (redis, clock) = on_local_clock(&server).await;
    redis.use_scripts();
    replays_as_memory(&redis, &clock, |_| {}).await;
    assert!(server.calls("evalsha") > 0);
    assert_eq!(server.calls("fcall"), 0);
}

/// A Redis without `FCALL` and `FUNCTION` (renamed away, as on Redis 6 they do not
/// exist): the store learns it once and checks by script.
#[tokio::test]
async fn a_redis_without_functions_is_checked_by_script() {
    let server = RedisServer::start_with(&[
        "--rename-command",
        "FCALL",
        "",
        "--rename-command",
        "FUNCTION",
        "",
    ]);
    assert!(server.cli(&["FCALL", "f", "0"]).contains("unknown command"));
    let (redis, clock) = on_local_clock(&server).await;
    replays_as_memory(&redis, &clock, |_| {}).await;
    assert!(server.calls("evalsha") > 0);
}

/// `FUNCTION FLUSH` and `FLUSHALL` between checks, and a restart: each check is
/// decided as by the memory store (whose state a `FLUSHALL` clears too).
#[tokio::test]
async fn a_lost_library_is_loaded_again_without_failing_a_check() {
    let mut server = RedisServer::start();
    let (redis, clock) = on_local_clock(&server).await;
    replays_as_memory(&redis, &clock, |n| {
        if n % 3 == 0 {
            assert_eq!(server.cli(&["FUNCTION", "FLUSH"]).trim(), "OK");
            assert!(libraries(&server).is_empty());
        }
    })
    .await;
    assert!(server.calls("function|load") > 100);
    assert_eq!(server.calls("evalsha") + server.calls("eval"), 0);

    // FLUSHALL keeps functions (and drops the counts, here and in memory alike).
    let policy = Policy::new(Algorithm::FixedWindow, 3, Duration::from_secs(3600), None).unwrap();
    for remaining in [2, 1] {
        assert_eq!(
            redis.check(key("k"), &policy, 1).await.unwrap().remaining,
            remaining
        );
    }
    server.cli(&["FLUSHALL"]);
    assert_eq!(libraries(&server).len(), 1);
    assert_eq!(
        redis.check(key("k"), &policy, 1).await.unwrap().remaining,
        2
    );

    // A restart without persistence loses both; the connection's first command after
    // it may fail (the client reconnects then), none after.
    server.restart();
    assert!(libraries(&server).is_empty());
    let mut decided = None;
    for _ in 0..3 {
        match redis.check(key("k"), &policy, 1).await {
            Ok(decision) => {
                decided = Some(decision);
                break;
            }
            Err(error) => assert!(error.is_unavailable(), "{error}"),
        }
    }
    assert_eq!(decided.expect("a check after the restart").remaining, 2);
    assert_eq!(libraries(&server).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_has_the_library_on_every_primary_and_reloads_it() {
    let cluster = RedisCluster::start();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let redis = connect(
        RedisTarget::Cluster(cluster.urls()),
        clock,
        RedisClock::Server,
    )
    .await;
    for node in cluster.nodes() {
        let loaded = libraries(node);
        assert!(
            loaded.len() == 1 && loaded[0].starts_with("weir_"),
            "{loaded:?}"
        );
    }
    let policy = Policy::new(Algorithm::Gcra, 5, Duration::from_secs(3600), None).unwrap();
    let identities = ["a", "b", "c", "d", "e", "f"];
    let mut admitted = 0;
    for round in 0..7 {
        if round % 2 == 1 {
            for node in cluster.nodes() {
                assert_eq!(node.cli(&["FUNCTION", "FLUSH"]).trim(), "OK");
            }
        }
        for identity in identities {
            admitted += u32::from(
                redis
                    .check(key(identity), &policy, 1)
                    .await
                    .unwrap()
                    .allowed,
            );
        }
        // Layered checks of one identity: the general entry point, one slot.
        let checks = [
            Check {
                key: Key {
                    rule: "x",
                    identity: "a",
                },
                policy: &policy,
                cost: 1,
            },
            Check {
                key: Key {
                    rule: "y",
                    identity: "a",
                },
                policy: &policy,
                cost: 1,
            },
        ];
        let both = redis.check_all(&checks).await.unwrap();
        assert_eq!(
            both.iter().filter(|d| d.allowed).count(),
            if round < 5 { 2 } else { 0 }
        );
    }
    assert_eq!(admitted, 5 * identities.len() as u32);
    for node in cluster.nodes() {
        assert!(!libraries(node).is_empty(), "loaded again on every primary");
    }
}
