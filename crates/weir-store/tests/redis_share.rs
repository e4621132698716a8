//! Regional shares on real `redis-server` processes (and a local 3-master cluster):
//! random sequences of checks, refunds, reports, applies and renewals on a global
//! rule's key, at instants on one manual clock, decided alike by the Lua and by
//! weir-core (through the memory store).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, ManualClock, Policy, Renewal, Report};
use weir_store::ShareStore;
use weir_store::{
    Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig, RedisTarget,
    Store,
};
use weir_testkit::{RedisCluster, RedisServer, XorShift, decisions_in_micros};

/// 2026-11-30 10:00:00 UTC, in nanoseconds (whole microseconds).
const START: u64 = 1_796_032_800_000_000_000;

async fn conform(redis: &RedisStore, clock: &Arc<ManualClock>, seed: u64) {
    let memory = MemoryStore::new(MemoryStoreConfig::default(), clock.clone());
    let mut random = XorShift(seed | 1);
    let mut seen = [0u32; 5];
    for n in 0..60 {
        let limit = [10, 60, 600, 7][random.below(4) as usize];
        let period = Duration::from_millis([1_000, 6_000, 60_000][random.below(3) as usize]);
        let burst = [None, Some(3), Some(limit * 2)][random.below(3) as usize];
        let regions = 1 + random.below(3);
        let floor = 1 + random.below(limit / regions);
        let policy = Policy::new(Algorithm::TokenBucket, limit, period, burst)
            .unwrap()
            .regional(floor, regions)
            .unwrap();
        let identity = format!("share-{seed}-{n}");
        let key = Key {
            rule: "global",
            identity: &identity,
        };
        let round = Duration::from_micros(4 * (1 + random.below(100_000)));
        let hold = round * 3;
        let mut now = START;
        // The last claim on each side: memory's number (ns) and Redis's (us).
        let mut claims: Option<(u64, u64)> = None;
        let mut home_seq = [0u64; 3];
        for step in 0..80 {
            clock.set(now);
            let at = format!("sequence {n} step {step} ({policy:?})");
            match random.below(7) {
                0 | 1 => {
                    let cost = random.below(4);
                    let expected = memory.check(key, &policy, cost).await.unwrap();
                    let actual = redis.check(key, &policy, cost).await.unwrap();
                    assert_eq!(
                        decisions_in_micros(&actual),
                        decisions_in_micros(&expected),
                        "check {cost}: {at}"
                    );
                    seen[0] += u32::from(expected.allowed && cost > 0);
                }
                2 => {
                    let report = Report {
                        offered: random.below(20),
                        round,
                        force: random.below(4) == 0,
                        // Now and then a shorter hold, as after a reload.
                        hold: if random.below(4) == 0 { round } else { hold },
                    };
                    let expected = memory.report_share(key, &policy, report).await.unwrap();
                    let actual = redis.report_share(key, &policy, report).await.unwrap();
                    let normal = |c: Option<weir_core::Claim>, scale: u64| {
                        c.map(|c| (c.seq / scale, c.demand, c.enforcing))
                    };
                    assert_eq!(
                        normal(actual, 1),
                        normal(expected, 1_000),
                        "report {report:?}: {at}"
                    );
                    if let (Some(e), Some(a)) = (expected, actual) {
                        claims = Some((e.seq, a.seq));
                        seen[1] += 1;
                    }
                }
                3 => {
                    let grant = random.below(limit);
                    let (in_memory, in_redis) = claims.unwrap_or((1, 1));
                    let expected = memory
                        .apply_share(key, &policy, in_memory, grant, hold)
                        .await
                        .unwrap();
                    let actual = redis
                        .apply_share(key, &policy, in_redis, grant, hold)
                        .await
                        .unwrap();
                    assert_eq!(actual, expected, "apply {grant}: {at}");
                    seen[2] += u32::from(expected);
                }
                4 => {
                    let region = random.below(regions) as usize;
                    home_seq[region] += random.below(3);
                    // Now and then from a region configured for one more region.
                    let count = regions + u64::from(random.below(8) == 0);
                    let renewal = Renewal {
                        region: region as u32,
                        regions: count as u32,
                        demand: random.below(limit * 3),
                        enforcing: random.below(limit),
                        seq: home_seq[region],
                        hold,
                    };
                    let expected = memory.renew_share(key, &policy, renewal).await.unwrap();
                    let actual = redis.renew_share(key, &policy, renewal).await.unwrap();
                    assert_eq!(actual, expected, "renew {renewal:?}: {at}");
                    seen[3] += u32::from(expected.is_some_and(|g| g > 0));
                }
                5 => {
                    let cost = random.below(3);
                    let check = [weir_store::Check {
                        key,
                        policy: &policy,
                        cost,
                    }];
                    memory.refund_all(&check).await.unwrap();
                    redis.refund_all(&check).await.unwrap();
                    seen[4] += 1;
                }
                _ => {
                    let gap = random.below(2 * round.as_micros() as u64 + 1);
                    now += gap * 1_000;
                }
            }
        }
    }
    assert!(seen.iter().all(|&s| s > 0), "every case reached: {seen:?}");
}

async fn store(target: RedisTarget, clock: Arc<dyn Clock>) -> RedisStore {
    let config = RedisStoreConfig {
        target,
        key_prefix: "weir:share".to_owned(),
        timeout: Duration::from_secs(2),
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    RedisStore::connect(&config, clock).await.unwrap()
}

/// The longest hold of the sequences (three rounds of at most 400 ms), and a second for
/// Redis's uptime, counted in whole seconds: a younger Redis grants no share.
const OLDER_THAN_A_HOLD: Duration = Duration::from_millis(2_300);

#[tokio::test]
async fn the_lua_decides_shares_as_weir_core_does() {
    let server = RedisServer::start();
    tokio::time::sleep(OLDER_THAN_A_HOLD).await;
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Single(server.url()), clock.clone()).await;
    for seed in 0..4 {
        conform(&redis, &clock, seed).await;
    }
}

#[tokio::test]
async fn a_home_younger_than_a_hold_grants_nothing() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Single(server.url()), clock.clone()).await;
    let policy = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(60), None)
        .unwrap()
        .regional(2, 3)
        .unwrap();
    let key = Key {
        rule: "global",
        identity: "young",
    };
    let renewal = |seq, hold| Renewal {
        region: 0,
        regions: 3,
        demand: 50,
        enforcing: 0,
        seq,
        hold,
    };
    // A hold of a minute: the server is seconds old.
    let young = redis.renew_share(key, &policy, renewal(1, Duration::from_secs(60)));
    assert_eq!(young.await.unwrap(), Some(0));
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // A hold of a millisecond: the server has been up longer.
    let old = redis.renew_share(key, &policy, renewal(2, Duration::from_millis(1)));
    assert_eq!(old.await.unwrap(), Some(94));
}

#[tokio::test]
async fn on_a_cluster_too() {
    let cluster = RedisCluster::start();
    tokio::time::sleep(OLDER_THAN_A_HOLD).await;
    let clock = Arc::new(ManualClock::new(START));
    let redis = store(RedisTarget::Cluster(cluster.urls()), clock.clone()).await;
    conform(&redis, &clock, 7).await;
}
