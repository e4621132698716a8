//! The Redis store's health loop against real `redis-server` processes, with no
//! traffic: it finds Redis lost (killed, frozen, a cluster primary killed) and back
//! within a second, the breaker that follows it opens and closes with it, and the first
//! check after the return is shared and succeeds. Also a replica promoted by failover.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Policy};
use weir_store::{
    Breaker, BreakerConfig, Check, Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget,
    Store, StoreError, SystemClock,
};
use weir_testkit::{RedisCluster, RedisServer, redis_cli};

/// What the issue asks: readiness right within a second of the change.
const WITHIN: Duration = Duration::from_secs(1);
/// Beyond it, for a loaded shared machine; the figures printed say what it took.
const MARGIN: Duration = Duration::from_millis(750);

/// The tests' store: keys under `health`, on Redis's clock.
fn config(target: RedisTarget, timeout: Duration) -> RedisStoreConfig {
    RedisStoreConfig {
        target,
        key_prefix: "weir:health".into(),
        timeout,
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    }
}

fn start(target: RedisTarget) -> (Arc<RedisStore>, Breaker<Arc<RedisStore>>) {
    let config = config(target, Duration::from_millis(100));
    let store = RedisStore::start(&config, Arc::new(SystemClock::new()));
    let breaker = Breaker::new(store.clone(), BreakerConfig::default()).following(store.health());
    (store, breaker)
}

/// Waits until the breaker's readiness is `ready`; how long it took.
async fn until_ready(breaker: &Breaker<Arc<RedisStore>>, ready: bool, what: &str) -> Duration {
    let started = Instant::now();
    while breaker.is_ready() != ready {
        assert!(
            started.elapsed() < WITHIN + MARGIN,
            "{what}: readiness still {} after {:?}",
            !ready,
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    eprintln!("{what}: ready = {ready} after {took:?}");
    took
}

async fn check_succeeds(breaker: &Breaker<Arc<RedisStore>>, identity: &str) {
    let policy = policy();
    let key = Key {
        rule: "r",
        identity,
    };
    let decision = breaker.check(key, &policy, 1).await;
    assert!(
        decision.as_ref().is_ok_and(|d| d.allowed),
        "the first check after the return: {decision:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_finds_redis_killed_frozen_and_back_within_a_second() {
    let mut redis = RedisServer::start();
    let (store, breaker) = start(RedisTarget::Single(redis.url()));
    assert!(store.wait_connected(Duration::from_secs(2)).await);
    check_succeeds(&breaker, "a").await;
    // Idle from here: no check until the store is back.
    tokio::time::sleep(Duration::from_millis(600)).await;

    redis.kill();
    until_ready(&breaker, false, "killed").await;
    assert!(
        breaker
            .check(
                Key {
                    rule: "r",
                    identity: "a"
                },
                &policy(),
                1
            )
            .await
            .is_err(),
        "refused at once while lost"
    );
    redis = tokio::task::spawn_blocking(move || {
        redis.restart();
        redis
    })
    .await
    .unwrap();
    until_ready(&breaker, true, "restarted").await;
    check_succeeds(&breaker, "a").await;

    for freeze in [Duration::from_millis(500), Duration::from_secs(3)] {
        tokio::time::sleep(Duration::from_millis(600)).await;
        redis.pause();
        let lost = tokio::time::timeout(freeze, until_ready(&breaker, false, "frozen")).await;
        if freeze >= WITHIN + MARGIN {
            assert!(lost.is_ok(), "a {freeze:?} freeze is noticed");
        }
        tokio::time::sleep(freeze.saturating_sub(lost.unwrap_or(freeze))).await;
        redis.resume();
        until_ready(&breaker, true, "thawed").await;
        check_succeeds(&breaker, "a").await;
    }
}

/// Waits until `replica` has synced with its primary, for at most 20 s.
async fn until_synced(replica: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !replica
        .cli(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica did not sync");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn policy() -> Policy {
    Policy::new(Algorithm::Gcra, 100, Duration::from_secs(60), None).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_finds_a_cluster_primary_lost_and_back() {
    let mut cluster = RedisCluster::start();
    let (store, breaker) = start(RedisTarget::Cluster(cluster.urls()));
    assert!(store.wait_connected(Duration::from_secs(2)).await);
    check_succeeds(&breaker, "c").await;
    tokio::time::sleep(Duration::from_millis(600)).await;

    // Any primary: the probe pings every one, so no traffic to its slots is needed.
    let owner = cluster.owner_of("weir:health:{c}:r");
    cluster.node_mut(owner).kill();
    until_ready(&breaker, false, "cluster primary killed").await;
    // Full coverage is required (Redis's default): once the node timeout (2 s) has
    // passed, the others serve no slot (CLUSTERDOWN), and the store is lost whole,
    // not in part, though they answer PING.
    let health = store.health();
    let deadline = Instant::now() + Duration::from_secs(10);
    while health.is_up() {
        assert!(
            Instant::now() < deadline,
            "the cluster's fail state not seen"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(health.slots_lost(), 0);
    let key = Key {
        rule: "r",
        identity: "c",
    };
    let error = breaker.check(key, &policy(), 1).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.node_mut(owner).restart();
        cluster.wait_ready(Duration::from_secs(20));
        cluster
    })
    .await
    .unwrap();
    until_ready(&breaker, true, "cluster primary back").await;
    check_succeeds(&breaker, "c").await;
    drop(cluster);
}

/// Two primaries of five frozen at once (a zone cut off), the first seed among them: the
/// probe asks the seeds for the slot map and pings every primary all at once, so their
/// slots are found lost within one store timeout of the freeze (asking or pinging each
/// in turn would take two to four), and the other primaries' slots are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primaries_lost_together_cost_the_probe_one_timeout() {
    // Long enough that one timeout and two are far apart on a loaded machine.
    const TIMEOUT: Duration = Duration::from_secs(3);
    let cluster = RedisCluster::with_primaries(5);
    for node in cluster.nodes() {
        node.cli(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
    }
    let target = RedisTarget::Cluster(cluster.urls());
    let store = RedisStore::start(&config(target, TIMEOUT), Arc::new(SystemClock::new()));
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let health = store.health();
    while !health.is_whole() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Both in one signal, so that no probe sees one frozen and not the other.
    let frozen = [&cluster.nodes()[0], &cluster.nodes()[1]].map(|node| node.pid().unwrap());
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &frozen[0].to_string(), &frozen[1].to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let since = Instant::now();
    // A probe under way at the freeze may have pinged the primaries just before it and
    // then find the connection checks use frozen: that probe fails whole, one timeout
    // that is the freeze's timing, not the probe's; the next one is then measured.
    let mut bound = TIMEOUT + WITHIN + MARGIN;
    let mut lost_whole = false;
    // Each of the five holds a fifth of the 16,384 slots.
    while health.slots_lost() < 2 * 3_200 {
        if !lost_whole && !health.is_up() {
            lost_whole = true;
            bound += TIMEOUT;
        }
        assert!(
            since.elapsed() < bound,
            "two frozen primaries' slots not all found lost after {:?} ({} lost)",
            since.elapsed(),
            health.slots_lost()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "two frozen primaries found lost after {:?} (a probe lost whole first: {lost_whole})",
        since.elapsed()
    );
    let lost = health.slots_lost();
    assert!((6_500..=6_600).contains(&lost), "{lost} slots lost");
    assert!(health.is_up(), "the other three primaries' slots are kept");
}

/// A seed that knows no slot (a cluster node reset, or not joined yet: it answers
/// `CLUSTER SLOTS` with nothing) is not where the probe takes the cluster's map from.
/// Believed whenever it answered first, it would make the map seem to change from one
/// probe to the next, and every change makes the store connect again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_that_knows_no_slot_is_not_believed() {
    let cluster = RedisCluster::start();
    let lone = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    let mut seeds = vec![lone.url()];
    seeds.extend(cluster.urls());
    let (store, breaker) = start(RedisTarget::Cluster(seeds));
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    check_succeeds(&breaker, "seed").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let connections = || -> u64 {
        cluster
            .nodes()
            .iter()
            .map(|node| {
                let stats = node.cli(&["INFO", "stats"]);
                stats
                    .lines()
                    .find_map(|line| line.strip_prefix("total_connections_received:"))
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .expect("total_connections_received")
            })
            .sum()
    };
    let before = connections();
    // Idle: the health loop probes every 200-400 ms, about ten times here.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The two `INFO` calls' own connections (redis-cli) are the only new ones.
    let opened = connections() - before;
    assert!(opened <= 3, "{opened} connections opened while idle");
    assert!(store.health().is_whole());
    check_succeeds(&breaker, "seed").await;
}

/// The cluster's failover, built by hand (the testkit's cluster has no replicas): a
/// replica joins the primary that owns the key; that primary is killed; once the replica
/// is promoted, the idle store finds it without traffic (the seeds still name the dead
/// primary, not the replica) and the first check after is decided there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_finds_a_promoted_replica() {
    let mut cluster = RedisCluster::start();
    let owner = cluster.owner_of("weir:health:{f}:r");
    let replica = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "2000",
    ]);
    let owner_id = cluster.nodes()[owner].cli(&["CLUSTER", "MYID"]);
    let joined = redis_cli(&[
        "--cluster",
        "add-node",
        &format!("127.0.0.1:{}", replica.port()),
        &format!("127.0.0.1:{}", cluster.nodes()[owner].port()),
        "--cluster-slave",
        "--cluster-master-id",
        owner_id.trim(),
    ]);
    assert!(joined.status.success(), "{joined:?}");
    until_synced(&replica).await;

    let (store, breaker) = start(RedisTarget::Cluster(cluster.urls()));
    assert!(store.wait_connected(Duration::from_secs(2)).await);
    check_succeeds(&breaker, "f").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    // `FUNCTION LOAD` is replicated: the replica to be promoted has weir's library.
    assert!(replica.cli(&["FUNCTION", "LIST"]).contains("weir_"));

    let killed_at = Instant::now();
    cluster.node_mut(owner).kill();
    until_ready(&breaker, false, "primary killed, replica waiting").await;
    // The failover: after the node timeout (2 s), the replica is elected.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !replica.cli(&["ROLE"]).starts_with("master") {
        assert!(Instant::now() < deadline, "no failover");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let promoted = killed_at.elapsed();
    let promoted_at = Instant::now();
    let healthy = |n: &RedisServer| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok");
    while !(healthy(&replica)
        && (0..3)
            .filter(|&i| i != owner)
            .all(|i| healthy(&cluster.nodes()[i])))
    {
        assert!(Instant::now() < deadline, "the cluster did not recover");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cluster_ok = promoted_at.elapsed();
    let back = until_ready(&breaker, true, "replica promoted").await;
    eprintln!(
        "failover: replica promoted {promoted:?} after the kill, cluster ok {cluster_ok:?} \
         later, store ready {back:?} after that"
    );
    check_succeeds(&breaker, "f").await;
}

/// A Redis that answers but cannot serve is an outage, not a fault: here a replica
/// (what a URL may name after a failover), which answers `READONLY`; `LOADING` after a
/// restart, `CLUSTERDOWN` and `MASTERDOWN` are taken alike. Its errors are ones the
/// rules' failure policies act on (a fail-open rule decides on the local fallback, not
/// a 503), and they open the breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_answers_but_cannot_serve_is_an_outage() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    // Synced first: during the first sync a replica answers LOADING, an outage too,
    // but this test is about READONLY.
    until_synced(&replica).await;
    let config = config(RedisTarget::Single(replica.url()), Duration::from_secs(1));
    let store = RedisStore::connect(&config, Arc::new(SystemClock::new()))
        .await
        .unwrap();
    let breaker = Breaker::new(store, BreakerConfig::default());
    let policy = policy();
    let key = Key {
        rule: "r",
        identity: "replica",
    };
    for _ in 0..BreakerConfig::default().threshold {
        let error = breaker.check(key, &policy, 1).await.unwrap_err();
        assert!(error.is_unavailable(), "{error}");
        assert!(error.to_string().contains("read only replica"), "{error}");
    }
    assert!(
        !breaker.is_closed(),
        "the breaker opens on a replica's refusals"
    );
}

/// One primary of three killed, the cluster left serving the slots it still covers
/// (`cluster-require-full-coverage no`): the health loop finds that primary's slots
/// lost; checks there fail at once as an outage (`SlotLost`, which the rules' failure
/// policies act on) without opening the breaker, so keys on the other primaries go on
/// being decided on Redis, exactly, between them. Readiness says degraded until the
/// primary is back, and then its keys are decided on Redis again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_primary_sends_only_its_own_slots_to_the_failure_policy() {
    let mut cluster = RedisCluster::start();
    for node in cluster.nodes() {
        node.cli(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
    }
    let lost = cluster.identity_on(0, "lost");
    let kept = [
        cluster.identity_on(1, "kept"),
        cluster.identity_on(2, "kept"),
    ];
    let (store, breaker) = start(RedisTarget::Cluster(cluster.urls()));
    assert!(store.wait_connected(Duration::from_secs(2)).await);
    for identity in [&lost, &kept[0], &kept[1]] {
        check_succeeds(&breaker, identity).await;
    }
    let policy = policy();
    let health = store.health();

    cluster.node_mut(0).kill();
    until_ready(&breaker, false, "one primary killed").await;
    let started = Instant::now();
    while health.slots_lost() == 0 {
        assert!(
            started.elapsed() < WITHIN + MARGIN,
            "its slots not found lost"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The testkit's cluster splits the slots in three: the lost third, about.
    let slots = health.slots_lost();
    assert!((5000..=5600).contains(&slots), "{slots} slots lost");
    assert!(health.is_up() && !health.is_whole());

    let lost_key = Key {
        rule: "r",
        identity: &lost,
    };
    for round in 0..20u64 {
        let error = breaker.check(lost_key, &policy, 1).await.unwrap_err();
        assert!(
            matches!(error, StoreError::SlotLost(_)) && error.is_unavailable(),
            "{error}"
        );
        for identity in &kept {
            let key = Key {
                rule: "r",
                identity,
            };
            let decision = breaker.check(key, &policy, 1).await.unwrap();
            // 100 a minute, one taken before the kill: counted on Redis, one by one.
            assert!(decision.allowed);
            assert_eq!(decision.remaining, 98 - round, "{identity}");
        }
        assert!(breaker.is_closed(), "round {round}: the breaker opened");
    }
    // A request with keys on both sides cannot be decided: all or nothing.
    let both = [
        Check {
            key: Key {
                rule: "r",
                identity: &kept[0],
            },
            policy: &policy,
            cost: 1,
        },
        Check {
            key: lost_key,
            policy: &policy,
            cost: 1,
        },
    ];
    let error = breaker.check_all(&both).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.node_mut(0).restart();
        cluster.wait_ready(Duration::from_secs(20));
        cluster
    })
    .await
    .unwrap();
    until_ready(&breaker, true, "the primary back").await;
    assert_eq!(health.slots_lost(), 0);
    check_succeeds(&breaker, &lost).await;
    drop(cluster);
}

/// The probe asks `ROLE` of a single server: a replica (it answers `PING`, but takes no
/// write) is never found up, so never ready; a user whose ACL denies `ROLE` still finds
/// its Redis up, ready, and deciding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_finds_a_replica_lost_and_a_role_it_may_not_ask_no_matter() {
    let primary = RedisServer::start();
    primary.cli(&["ACL", "SETUSER", "default", "-role"]);
    assert!(primary.cli(&["ROLE"]).contains("NOPERM"));
    let (store, breaker) = start(RedisTarget::Single(primary.url()));
    assert!(store.wait_connected(Duration::from_secs(2)).await);
    until_ready(&breaker, true, "ROLE refused by the ACL").await;
    check_succeeds(&breaker, "acl").await;

    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let (replica_store, replica_breaker) = start(RedisTarget::Single(replica.url()));
    assert!(!replica_store.wait_connected(Duration::from_secs(1)).await);
    assert!(!replica_breaker.is_ready());
}

/// A cluster whose ACL refuses `CLUSTER INFO` to weir's user: the probe learns nothing
/// of the cluster's state there, and the store is still up, ready and deciding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_state_the_acl_hides_does_not_lose_the_store() {
    let cluster = RedisCluster::start();
    for node in cluster.nodes() {
        node.cli(&["ACL", "SETUSER", "default", "-cluster|info"]);
        assert!(node.cli(&["CLUSTER", "INFO"]).contains("NOPERM"));
    }
    let (store, breaker) = start(RedisTarget::Cluster(cluster.urls()));
    assert!(store.wait_connected(Duration::from_secs(2)).await);
    until_ready(&breaker, true, "CLUSTER INFO refused by the ACL").await;
    check_succeeds(&breaker, "acl").await;
}
