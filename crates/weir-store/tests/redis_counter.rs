//! A fixed window on the instances' clocks keeps one counter per window in Redis: a
//! one-unit check is `INCRBY` + `PEXPIRE` (no Lua), and every other path (several
//! units, refunds, previews, layers, resets) reads the same counter, deciding as the
//! memory store does.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Decision, ManualClock, Policy};
use weir_store::{
    Check, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Store,
};
use weir_testkit::{RedisServer, decisions_in_micros};

/// 2026-11-30 10:00:00 UTC, in nanoseconds: the start of a 10 s window.
const START: u64 = 1_796_032_800_000_000_000;
/// That window's number for a 10 s period.
const WINDOW: u64 = 179_603_280;

async fn store(server: &RedisServer, clock: Arc<ManualClock>, which: RedisClock) -> RedisStore {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "c".to_owned(),
        timeout: Duration::from_secs(2),
        clock: which,
    };
    RedisStore::connect(&config, clock).await.unwrap()
}

const KEY: Key<'static> = Key {
    rule: "r",
    identity: "u",
};

fn three_per_10s() -> Policy {
    Policy::new(Algorithm::FixedWindow, 3, Duration::from_secs(10), None).unwrap()
}

fn check(policy: &Policy, cost: u64) -> [Check<'_>; 1] {
    [Check {
        key: KEY,
        policy,
        cost,
    }]
}

/// Allowed and remaining of each decision.
fn outcomes(decisions: &[Decision]) -> Vec<(bool, u64)> {
    decisions.iter().map(|d| (d.allowed, d.remaining)).collect()
}

#[tokio::test]
async fn one_unit_is_incrby_and_pexpire_and_every_path_decides_as_in_memory() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START + 2_000_000_000));
    let redis = store(&server, clock.clone(), RedisClock::Local).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let policy = three_per_10s();
    let same = |a: &[Decision], b: &[Decision], what: &str| {
        let micros = |d: &[Decision]| d.iter().map(decisions_in_micros).collect::<Vec<_>>();
        assert_eq!(micros(a), micros(b), "{what}");
    };

    // Five single units: three admitted, two denied until the window ends, 8 s on.
    let mut decided = Vec::new();
    for _ in 0..5 {
        let expected = memory.check(KEY, &policy, 1).await.unwrap();
        let actual = redis.check(KEY, &policy, 1).await.unwrap();
        same(&[actual], &[expected], "a single unit");
        decided.push(actual);
    }
    assert_eq!(
        outcomes(&decided),
        [(true, 2), (true, 1), (true, 0), (false, 0), (false, 0)]
    );
    assert_eq!(decided[4].retry_after, Some(Duration::from_secs(8)));
    assert_eq!(decided[0].reset_after, Duration::from_secs(8));
    assert_eq!(
        (server.calls("incrby"), server.calls("pexpire")),
        (5, 5),
        "each unit one INCRBY and one PEXPIRE"
    );
    assert_eq!(
        server.calls("fcall") + server.calls("evalsha") + server.calls("eval"),
        0,
        "no Lua for a single unit"
    );

    // The window's own counter: denied units counted too (read as the limit), expiring
    // a second after the window ends.
    let counter = format!("c:{{u}}w{WINDOW}:r");
    assert_eq!(server.cli(&["GET", &counter]).trim(), "5");
    let ttl: u64 = server.cli(&["PTTL", &counter]).trim().parse().unwrap();
    assert!((8_000..=9_000).contains(&ttl), "PTTL {ttl}");
    assert_eq!(server.cli(&["EXISTS", "c:{u}:r"]).trim(), "0");

    // A refund gives back exactly one of the three admitted, whatever the counter says.
    memory.refund_all(&check(&policy, 1)).await.unwrap();
    redis.refund_all(&check(&policy, 1)).await.unwrap();
    let expected = memory.preview_all(&check(&policy, 0)).await.unwrap();
    let actual = redis.preview_all(&check(&policy, 0)).await.unwrap();
    same(&actual, &expected, "a peek after the refund");
    assert_eq!(outcomes(&actual), [(true, 1)]);

    // Several units go by the Lua, on the same counter.
    for (cost, what) in [(2, "two units"), (1, "the last unit"), (1, "one too many")] {
        let expected = memory.check_all(&check(&policy, cost)).await.unwrap();
        let actual = redis.check_all(&check(&policy, cost)).await.unwrap();
        same(&actual, &expected, what);
    }
    let expected = memory.preview_all(&check(&policy, 0)).await.unwrap();
    let actual = redis.preview_all(&check(&policy, 0)).await.unwrap();
    same(&actual, &expected, "a full window");
    assert_eq!(outcomes(&actual), [(true, 0)]);

    // The next window has its own counter, full again.
    clock.advance(Duration::from_secs(8));
    let expected = memory.check(KEY, &policy, 1).await.unwrap();
    let actual = redis.check(KEY, &policy, 1).await.unwrap();
    same(&[actual], &[expected], "the next window");
    assert_eq!((actual.allowed, actual.remaining), (true, 2));
    let next = format!("c:{{u}}w{}:r", WINDOW + 1);
    assert_eq!(server.cli(&["GET", &next]).trim(), "1");

    // Reset forgets the current window's counter.
    redis.reset(KEY, &policy).await.unwrap();
    assert_eq!(server.cli(&["EXISTS", &next]).trim(), "0");
    let after = redis.check(KEY, &policy, 1).await.unwrap();
    assert_eq!((after.allowed, after.remaining), (true, 2));
}

#[tokio::test]
async fn a_clock_stepping_back_counts_in_the_earlier_windows_counter() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START + 9_000_000_000));
    let redis = store(&server, clock.clone(), RedisClock::Local).await;
    let policy = three_per_10s();
    for _ in 0..3 {
        assert!(redis.check(KEY, &policy, 1).await.unwrap().allowed);
    }
    clock.advance(Duration::from_secs(2));
    assert!(redis.check(KEY, &policy, 1).await.unwrap().allowed);
    // An instance whose clock is 2 s behind is still in the full window: denied until
    // its end by that clock, and the new window keeps its own count.
    clock.set(START + 9_500_000_000);
    let behind = redis.check(KEY, &policy, 1).await.unwrap();
    assert!(!behind.allowed);
    assert_eq!(behind.retry_after, Some(Duration::from_millis(500)));
    clock.set(START + 11_000_000_000);
    let ahead = redis.check(KEY, &policy, 1).await.unwrap();
    assert_eq!((ahead.allowed, ahead.remaining), (true, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_units_admit_exactly_the_limit_and_refunds_exactly_what_they_give() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = Arc::new(store(&server, clock, RedisClock::Local).await);
    let policy =
        Arc::new(Policy::new(Algorithm::FixedWindow, 10, Duration::from_secs(60), None).unwrap());
    let burst = |n: usize| {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let (redis, policy) = (redis.clone(), policy.clone());
                tokio::spawn(async move { redis.check(KEY, &policy, 1).await.unwrap().allowed })
            })
            .collect();
        async move {
            let mut admitted = 0;
            for task in tasks {
                admitted += usize::from(task.await.unwrap());
            }
            admitted
        }
    };
    assert_eq!(burst(64).await, 10);
    assert_eq!(server.calls("incrby"), 64);
    redis.refund_all(&check(&policy, 1)).await.unwrap();
    redis.refund_all(&check(&policy, 2)).await.unwrap();
    let peek = redis.preview_all(&check(&policy, 0)).await.unwrap();
    assert_eq!(outcomes(&peek), [(true, 3)]);
    assert_eq!(burst(20).await, 3);
}

#[tokio::test]
async fn on_the_servers_clock_a_fixed_window_stays_one_lua_call_under_the_rules_key() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(&server, clock, RedisClock::Server).await;
    let policy = three_per_10s();
    assert!(redis.check(KEY, &policy, 1).await.unwrap().allowed);
    assert_eq!((server.calls("fcall"), server.calls("incrby")), (1, 0));
    assert!(server.cli(&["GET", "c:{u}:r"]).starts_with("f:"));
}
