//! Window counters (`window_counters`, on the instances' clocks): a fixed window kept as
//! one counter per window in Redis. A one-unit check is `INCRBY` + `PEXPIRE` (no Lua),
//! and every other path (several units, refunds, previews, layers, resets) reads the
//! same counter: until a unit is denied they decide as the memory store does; a denied
//! unit stays counted, as in envoy, so from then on they can only deny more, never
//! admit more.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Decision, ManualClock, Policy};
use weir_store::{
    Check, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Store,
};
use weir_testkit::{Action, RedisCluster, RedisServer, conformance_sequences, decisions_in_micros};

/// 2026-11-30 10:00:00 UTC, in nanoseconds: the start of a 10 s window.
const START: u64 = 1_796_032_800_000_000_000;
/// That window's number for a 10 s period.
const WINDOW: u64 = 179_603_280;

async fn connect(
    target: RedisTarget,
    clock: Arc<ManualClock>,
    which: RedisClock,
    window_counters: bool,
) -> RedisStore {
    let config = RedisStoreConfig {
        target,
        key_prefix: "weir:c".to_owned(),
        timeout: Duration::from_secs(2),
        clock: which,
        window_counters,
        access: Default::default(),
    };
    RedisStore::connect(&config, clock).await.unwrap()
}

/// A store keeping fixed windows in counters on `server`, on `clock`.
async fn counters(server: &RedisServer, clock: Arc<ManualClock>) -> RedisStore {
    connect(
        RedisTarget::Single(server.url()),
        clock,
        RedisClock::Local,
        true,
    )
    .await
}

const KEY: Key<'static> = Key {
    rule: "r",
    identity: "u",
};

fn fixed(limit: u64, seconds: u64) -> Policy {
    Policy::new(
        Algorithm::FixedWindow,
        limit,
        Duration::from_secs(seconds),
        None,
    )
    .unwrap()
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

/// Asserts that two stores decided alike (to the microsecond).
fn same(actual: &[Decision], expected: &[Decision], what: &str) {
    let micros = |d: &[Decision]| d.iter().map(decisions_in_micros).collect::<Vec<_>>();
    assert_eq!(micros(actual), micros(expected), "{what}");
}

/// One unit of `policy` on both stores, which must agree; returns the decision.
async fn unit(redis: &RedisStore, memory: &MemoryStore, policy: &Policy, what: &str) -> Decision {
    let expected = memory.check(KEY, policy, 1).await.unwrap();
    let actual = redis.check(KEY, policy, 1).await.unwrap();
    same(&[actual], &[expected], what);
    actual
}

#[tokio::test]
async fn one_unit_is_incrby_and_pexpire_and_denied_units_stay_counted() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START + 2_000_000_000));
    let redis = counters(&server, clock.clone()).await;
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let policy = fixed(3, 10);

    // Five single units: three admitted, two denied until the window ends, 8 s on.
    let mut decided = Vec::new();
    for _ in 0..5 {
        decided.push(unit(&redis, &memory, &policy, "a single unit").await);
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

    // The window's own counter, denied units included, expires a second after the
    // window ends.
    let counter = format!("weir:c:{{u}}w{WINDOW}:r");
    assert_eq!(server.cli(&["GET", &counter]).trim(), "5");
    let ttl: u64 = server.cli(&["PTTL", &counter]).trim().parse().unwrap();
    assert!((8_000..=9_000).contains(&ttl), "PTTL {ttl}");
    assert_eq!(server.cli(&["EXISTS", "weir:c:{u}:r"]).trim(), "0");

    // The denied units stay counted: a refund of a reserved unit leaves the window
    // full (the memory store, which never counted them, would admit one more).
    redis.refund_all(&check(&policy, 1)).await.unwrap();
    let peek = redis.preview_all(&check(&policy, 0)).await.unwrap();
    assert_eq!(outcomes(&peek), [(true, 0)]);
    assert!(!redis.check(KEY, &policy, 1).await.unwrap().allowed);
    assert!(!redis.check_all(&check(&policy, 2)).await.unwrap()[0].allowed);

    // The next window has its own counter, full again.
    clock.advance(Duration::from_secs(8));
    let next_window = unit(&redis, &memory, &policy, "the next window").await;
    assert_eq!((next_window.allowed, next_window.remaining), (true, 2));
    let next = format!("weir:c:{{u}}w{}:r", WINDOW + 1);
    assert_eq!(server.cli(&["GET", &next]).trim(), "1");
    // Until a unit is denied, several units (by the Lua), refunds and peeks decide as
    // the memory store does, on the same counter.
    for (cost, what) in [(2, "two units"), (3, "too many, not counted")] {
        let expected = memory.check_all(&check(&policy, cost)).await.unwrap();
        let actual = redis.check_all(&check(&policy, cost)).await.unwrap();
        same(&actual, &expected, what);
    }
    memory.refund_all(&check(&policy, 2)).await.unwrap();
    redis.refund_all(&check(&policy, 2)).await.unwrap();
    let expected = memory.preview_all(&check(&policy, 0)).await.unwrap();
    let actual = redis.preview_all(&check(&policy, 0)).await.unwrap();
    same(&actual, &expected, "a peek after a refund");
    assert_eq!(outcomes(&actual), [(true, 2)]);
    assert_eq!(server.cli(&["GET", &next]).trim(), "1");

    // Reset forgets the current window's counter.
    redis.reset(KEY, &policy).await.unwrap();
    assert_eq!(server.cli(&["EXISTS", &next]).trim(), "0");
    let after = redis.check(KEY, &policy, 1).await.unwrap();
    assert_eq!((after.allowed, after.remaining), (true, 2));
}

#[tokio::test]
async fn callers_with_other_limits_on_one_key_are_never_admitted_beyond_their_own() {
    // Plans give callers of one rule their own limits, and a key (an IP address, say)
    // can be shared by callers of two plans; a reload can change a limit. Every unit
    // admitted under a limit found the window's count within it.
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = counters(&server, clock.clone()).await;
    let (pro, free) = (fixed(100, 60), fixed(10, 60));
    let admitted = |policy: &Policy, n: usize| {
        let (redis, policy) = (&redis, *policy);
        async move {
            let mut admitted = 0;
            for _ in 0..n {
                admitted += usize::from(redis.check(KEY, &policy, 1).await.unwrap().allowed);
            }
            admitted
        }
    };
    assert_eq!(admitted(&free, 12).await, 10);
    // The two denied units count: the pro caller has 100 - 12 left.
    assert_eq!(admitted(&pro, 100).await, 88);
    redis.refund_all(&check(&free, 1)).await.unwrap();
    assert_eq!(
        admitted(&pro, 5).await,
        0,
        "denied units keep the window full"
    );
    assert_eq!(admitted(&free, 5).await, 0);

    // A limit raised by a reload within a window: the units counted so far stay.
    clock.advance(Duration::from_secs(60));
    assert_eq!(admitted(&fixed(5, 60), 8).await, 5);
    assert_eq!(admitted(&fixed(50, 60), 60).await, 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_decide_as_the_memory_store_until_a_unit_is_denied() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = counters(&server, clock.clone()).await;
    let (mut compared, mut refunds) = (0, 0);
    let sequences = conformance_sequences(0xc0c0, 240)
        .into_iter()
        .filter(|(policy, _)| policy.algorithm() == Algorithm::FixedWindow);
    for (n, (policy, steps)) in sequences.enumerate() {
        let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
        let identity = format!("seq-{n}");
        let key = Key {
            rule: "r",
            identity: &identity,
        };
        let period_ns = policy.period_ns();
        // The window in which a denied unit was counted: from then on, until it ends,
        // a refund gives back room here that the memory store (which never counted
        // the unit) also had, so the two part ways; refunds there are left out.
        let mut denied_in = None;
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            now = now.saturating_add_signed(step.gap_us_with_window_counters(&policy) * 1_000);
            clock.set(now);
            let window = now / period_ns;
            // Charges (past the limit) are for the bucket algorithms: a fixed window
            // takes them as checks, which a counter decides as it counts.
            let refund = step.action == Action::Refund;
            if refund && denied_in == Some(window) || step.action == Action::Charge {
                continue;
            }
            let expected = step.replay(&memory, key, &policy).await.unwrap();
            let actual = step.replay(&redis, key, &policy).await.unwrap();
            same(
                &[actual],
                &[expected],
                &format!("sequence {n}, step {i} {step:?}"),
            );
            if !refund && step.cost == 1 && !expected.allowed {
                denied_in = Some(window);
            }
            compared += 1;
            refunds += usize::from(refund);
        }
    }
    assert!(compared > 40 * 25, "{compared} steps compared");
    assert!(refunds > 100, "{refunds} refunds compared");
    assert!(
        server.calls("incrby") > 300,
        "the sequences' single units went by INCRBY"
    );
}

#[tokio::test]
async fn a_clock_stepping_back_counts_in_the_earlier_windows_counter() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START + 9_000_000_000));
    let redis = counters(&server, clock.clone()).await;
    let policy = fixed(3, 10);
    for _ in 0..3 {
        assert!(redis.check(KEY, &policy, 1).await.unwrap().allowed);
    }
    clock.advance(Duration::from_secs(2));
    assert!(redis.check(KEY, &policy, 1).await.unwrap().allowed);
    // An instance whose clock is 1.5 s behind is still in the full window: denied until
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
async fn concurrent_units_admit_exactly_the_limit() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = Arc::new(counters(&server, clock).await);
    let policy = Arc::new(fixed(10, 60));
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
    let counter = format!("weir:c:{{u}}w{}:r", START / 1_000 / 60_000_000);
    assert_eq!(server.cli(&["GET", &counter]).trim(), "64");
    assert_eq!(burst(20).await, 0);
}

#[tokio::test]
async fn without_counters_a_fixed_window_stays_one_lua_call_under_the_rules_key() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let policy = fixed(3, 10);
    for (which, counters) in [(RedisClock::Local, false), (RedisClock::Server, true)] {
        server.cli(&["FLUSHALL"]);
        server.cli(&["CONFIG", "RESETSTAT"]);
        let redis = connect(
            RedisTarget::Single(server.url()),
            clock.clone(),
            which,
            counters,
        )
        .await;
        assert!(redis.check(KEY, &policy, 1).await.unwrap().allowed);
        assert_eq!(
            (server.calls("fcall"), server.calls("incrby")),
            (1, 0),
            "{which:?}"
        );
        assert!(server.cli(&["GET", "weir:c:{u}:r"]).starts_with("f:"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_a_unit_counted_on_one_slot_is_given_back_when_another_denies() {
    let cluster = RedisCluster::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = connect(
        RedisTarget::Cluster(cluster.urls()),
        clock,
        RedisClock::Local,
        true,
    )
    .await;
    let (user, ip) = (cluster.identity_on(0, "user"), cluster.identity_on(1, "ip"));
    let (per_user, per_ip) = (fixed(5, 60), fixed(1, 60));
    let layers = |cost_user, cost_ip| {
        [
            Check {
                key: Key {
                    rule: "user",
                    identity: &user,
                },
                policy: &per_user,
                cost: cost_user,
            },
            Check {
                key: Key {
                    rule: "ip",
                    identity: &ip,
                },
                policy: &per_ip,
                cost: cost_ip,
            },
        ]
    };
    assert_eq!(
        outcomes(&redis.check_all(&layers(1, 1)).await.unwrap()),
        [(true, 4), (true, 0)]
    );
    // The IP is spent: the user's unit, counted by INCRBY on its slot first, is given
    // back, and the answer reports the user's budget as it was.
    for _ in 0..3 {
        assert_eq!(
            outcomes(&redis.check_all(&layers(1, 1)).await.unwrap()),
            [(true, 4), (false, 0)]
        );
    }
    assert_eq!(
        outcomes(&redis.preview_all(&layers(0, 0)).await.unwrap()),
        [(true, 4), (true, 0)]
    );
    // The user's units went by INCRBY on its node, and were given back by the Lua.
    let node = &cluster.nodes()[0];
    assert_eq!(node.calls("incrby"), 4);
    assert_eq!(node.calls("fcall"), 3 + 1, "three refunds and the peek");
}
