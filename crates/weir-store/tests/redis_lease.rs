//! Token leases on real `redis-server` processes (and a local 3-master cluster): the
//! Lua decides as weir-core's `take` and `give_back`, concurrent holders never get more
//! than the bucket, a crashed holder's units come back after its hold, and a late
//! give-back is ignored.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, LeaseId, Leases, ManualClock, Policy};
use weir_store::LeaseStore;
use weir_store::{
    Closing, Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Store, StoreError, Take,
};
use weir_testkit::{Holders, LeaseOutcome, RedisCluster, RedisServer, lease_sequences};

/// 2026-11-30 10:00:00 UTC, in nanoseconds (whole microseconds).
const START: u64 = 1_796_032_800_000_000_000;

async fn store(target: RedisTarget, clock: Arc<dyn Clock>) -> RedisStore {
    store_on(target, clock, RedisClock::Local, "lease").await
}

async fn store_on(
    target: RedisTarget,
    clock: Arc<dyn Clock>,
    which: RedisClock,
    prefix: &str,
) -> RedisStore {
    let config = RedisStoreConfig {
        target,
        // Within the testkit's ACL user's keys.
        key_prefix: format!("weir:{prefix}"),
        timeout: Duration::from_secs(2),
        clock: which,
        window_counters: false,
        access: Default::default(),
    };
    RedisStore::connect(&config, clock).await.unwrap()
}

fn key(identity: &str) -> Key<'_> {
    Key {
        rule: "r",
        identity,
    }
}

fn lease(min: u64, max: u64, hold: Duration) -> Take {
    Take {
        min,
        max,
        hold,
        closing: None,
    }
}

/// Replays the lease sequences through Redis and weir-core on one manual clock, and
/// checks that they reach every case: leases granted, renewed, denied (with a retry
/// time and without), found on give-back and not (expired).
async fn conform(redis: &RedisStore, clock: &ManualClock, seed: u64, prefix: &str) {
    let mut seen = [0u32; 6];
    for (n, (policy, steps)) in lease_sequences(seed, 120).into_iter().enumerate() {
        let identity = format!("{prefix}-{n}");
        let (mut state, mut leases) = (None, Leases::default());
        let (mut in_redis, mut in_core) = (Holders::default(), Holders::default());
        let mut now = START;
        for (i, step) in steps.iter().enumerate() {
            if let weir_testkit::LeaseStep::Wait { gap_us } = step {
                now = now.saturating_add_signed(gap_us * 1_000);
            }
            clock.set(now);
            let expected = in_core.replay_on(step, &mut state, &mut leases, &policy, now);
            let actual = in_redis
                .replay(step, redis, key(&identity), &policy)
                .await
                .unwrap();
            assert_eq!(
                actual,
                expected,
                "seed {seed}, sequence {n} ({:?} {} per {:?}, burst {:?}), step {i} {step:?}",
                policy.algorithm(),
                policy.limit(),
                policy.period(),
                policy.burst(),
            );
            match actual {
                LeaseOutcome::Grant { leased: true, .. } => seen[0] += 1,
                LeaseOutcome::Grant { closed: true, .. } => seen[1] += 1,
                LeaseOutcome::Grant {
                    units: 0, decision, ..
                } if !decision.allowed => {
                    seen[2 + usize::from(decision.retry_after.is_some())] += 1
                }
                LeaseOutcome::Found(found) => seen[4 + usize::from(found)] += 1,
                _ => {}
            }
        }
    }
    assert!(seen.iter().all(|&n| n >= 10), "cases reached: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_leases_exactly_as_weir_core() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Single(server.url()), clock.clone()).await;
    // A fixed seed keeps CI repeatable; WEIR_CONFORMANCE_SEED explores others.
    let seed =
        std::env::var("WEIR_CONFORMANCE_SEED").map_or(0x1ea5e, |s| s.parse().expect("a number"));
    conform(&redis, &clock, seed, "functions").await;
    // The script path (Redis without Functions) decides alike.
    redis.use_scripts();
    conform(&redis, &clock, seed + 1, "scripts").await;
}

/// Holders taking, renewing and giving back on one key at once (at one instant of the
/// manual clock, and on the server's clock, where a year's limit refills nothing in
/// the test's second): what they spend (granted less returned) never exceeds the
/// capacity, and what they did not spend is all back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_holders_never_get_more_than_the_bucket() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    for (which, algorithm) in [RedisClock::Local, RedisClock::Server]
        .into_iter()
        .flat_map(|c| [(c, Algorithm::TokenBucket), (c, Algorithm::Gcra)])
    {
        let target = RedisTarget::Single(server.url());
        let prefix = format!("{which:?}");
        let redis = Arc::new(store_on(target, clock.clone(), which, &prefix).await);
        let year = Duration::from_secs(365 * 86_400);
        let policy = Policy::new(algorithm, 100, year, None).unwrap();
        let tasks: Vec<_> = (0..8u64)
            .map(|t| {
                let redis = redis.clone();
                tokio::spawn(async move {
                    let k = key(algorithm.name());
                    let (mut spent, mut held): (u64, Option<(LeaseId, u64)>) = (0, None);
                    let mut denied = 0;
                    for i in 0..40u64 {
                        // Spends some of what it holds, renews with the rest.
                        let closing = held.map(|(lease, units)| {
                            let used = (t + i) % (units + 1);
                            spent += used;
                            Closing {
                                lease,
                                unspent: units - used,
                            }
                        });
                        let take = Take {
                            closing,
                            ..lease(1, 1 + (t + i) % 9, Duration::from_secs(30))
                        };
                        let grant = redis.take(k, &policy, take).await.unwrap();
                        assert_eq!(grant.closed, closing.is_some());
                        denied += u64::from(!grant.decision.allowed);
                        held = grant.lease.map(|lease| (lease, grant.units));
                    }
                    if let Some((lease, units)) = held {
                        let used = units / 2;
                        spent += used;
                        assert!(
                            redis
                                .give_back(k, &policy, lease, units - used)
                                .await
                                .unwrap()
                        );
                    }
                    (spent, denied)
                })
            })
            .collect();
        let (mut spent, mut denied) = (0, 0);
        for task in tasks {
            let (s, d) = task.await.unwrap();
            (spent, denied) = (spent + s, denied + d);
        }
        assert!(
            denied > 0,
            "{which:?} {algorithm}: the holders want more than the bucket"
        );
        assert!(spent <= 100, "{which:?} {algorithm}: {spent} spent");
        let peek = redis
            .take(key(algorithm.name()), &policy, Take::check(0))
            .await
            .unwrap();
        assert_eq!(
            peek.decision.remaining + spent,
            100,
            "{which:?} {algorithm}: every unit not spent is back"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_units_come_back_after_the_hold_and_a_late_give_back_is_ignored() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Single(server.url()), clock.clone()).await;
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let policy = Policy::new(algorithm, 10, Duration::from_secs(1), None).unwrap();
        let k = key(algorithm.name());
        clock.set(START);
        let crashed = redis
            .take(k, &policy, lease(1, 10, Duration::from_secs(2)))
            .await
            .unwrap();
        assert_eq!(crashed.units, 10);
        // Another instance: nothing until the hold ends, then the refill from there.
        clock.set(START + 1_000_000_000);
        let denied = redis.take(k, &policy, Take::check(1)).await.unwrap();
        assert!(!denied.decision.allowed);
        assert_eq!(
            denied.decision.retry_after,
            Some(Duration::from_millis(1_100))
        );
        clock.set(START + 2_100_000_000);
        let back = redis.take(k, &policy, Take::check(1)).await.unwrap();
        assert!(back.decision.allowed, "{algorithm}");
        // The crashed holder returns, late: nothing is given back twice.
        let before = redis.take(k, &policy, Take::check(0)).await.unwrap();
        let late = redis
            .give_back(k, &policy, crashed.lease.unwrap(), 10)
            .await
            .unwrap();
        assert!(!late, "{algorithm}");
        let after = redis.take(k, &policy, Take::check(0)).await.unwrap();
        assert_eq!(after, before, "{algorithm}");
    }
    // A reset forgets the leases with the state.
    let policy = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(1), None).unwrap();
    let k = key("reset");
    let held = redis
        .take(k, &policy, lease(5, 5, Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(held.lease.is_some());
    let records = "weir:lease:{reset}:r:leases";
    assert_eq!(server.cli(&["EXISTS", records]).trim(), "1");
    redis.reset(k, &policy).await.unwrap();
    assert_eq!(
        server
            .cli(&["EXISTS", records, "weir:lease:{reset}:r"])
            .trim(),
        "0"
    );
    let full = redis.take(k, &policy, Take::check(0)).await.unwrap();
    assert_eq!(full.decision.remaining, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_and_the_leaky_bucket_are_refused() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Single(server.url()), clock).await;
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::LeakyBucket,
    ] {
        let policy = Policy::new(algorithm, 10, Duration::from_secs(1), None).unwrap();
        let taken = redis.take(key("w"), &policy, Take::check(1)).await;
        assert!(matches!(taken, Err(StoreError::Lease(_))), "{taken:?}");
        let given = redis.give_back(key("w"), &policy, LeaseId(1), 1).await;
        assert!(matches!(given, Err(StoreError::Lease(_))), "{given:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_work_on_every_node_of_a_cluster_with_records_in_their_keys_slot() {
    let cluster = RedisCluster::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Cluster(cluster.urls()), clock.clone()).await;
    let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(60), None).unwrap();
    for node in 0..3 {
        let identity = cluster.identity_on(node, "holder");
        let k = key(&identity);
        let grant = redis
            .take(k, &policy, lease(1, 8, Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(grant.units, 8);
        let state = format!("weir:lease:{{{identity}}}:r");
        let records = format!("{state}:leases");
        assert_eq!(cluster.owner_of(&records), node);
        assert_eq!(cluster.owner_of(&state), node);
        let server = &cluster.nodes()[node];
        assert_eq!(server.cli(&["EXISTS", &records]).trim(), "1");
        let denied = redis.take(k, &policy, Take::check(3)).await.unwrap();
        assert!(!denied.decision.allowed, "two left under the lease");
        assert!(
            redis
                .give_back(k, &policy, grant.lease.unwrap(), 6)
                .await
                .unwrap()
        );
        let after = redis.take(k, &policy, Take::check(0)).await.unwrap();
        assert_eq!(after.decision.remaining, 8, "two spent");
        redis.reset(k, &policy).await.unwrap();
        assert_eq!(server.cli(&["EXISTS", &records]).trim(), "0");
    }
}

/// What a take costs Redis against a check, from `INFO commandstats` (one run; print
/// with `cargo test -p weir-store --test redis_lease -- --ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a test"]
async fn measure_a_take_against_a_check() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Single(server.url()), clock.clone()).await;
    let policy = Policy::new(Algorithm::Gcra, 1_000_000, Duration::from_secs(60), None).unwrap();
    let runs = 20_000u64;
    let per_call = |before: (u64, u64)| {
        let (calls, usec) = (server.calls("fcall"), server.usec("fcall"));
        (usec - before.1) as f64 / (calls - before.0) as f64
    };
    let start = (server.calls("fcall"), server.usec("fcall"));
    for i in 0..runs {
        clock.set(START + i * 1_000);
        redis.check(key("check"), &policy, 1).await.unwrap();
    }
    let check = per_call(start);
    let start = (server.calls("fcall"), server.usec("fcall"));
    let mut held = None;
    for i in 0..runs {
        clock.set(START + i * 1_000);
        let take = Take {
            closing: held.map(|lease| Closing { lease, unspent: 10 }),
            ..lease(1, 100, Duration::from_secs(1))
        };
        held = redis.take(key("take"), &policy, take).await.unwrap().lease;
    }
    let renew = per_call(start);
    let start = (server.calls("fcall"), server.usec("fcall"));
    for i in 0..runs {
        clock.set(START + i * 1_000);
        redis
            .take(key("direct"), &policy, Take::check(1))
            .await
            .unwrap();
    }
    let direct = per_call(start);
    println!(
        "Redis usec per call: check {check:.2}, take renewing a lease {renew:.2}, take with no hold {direct:.2}"
    );
}
