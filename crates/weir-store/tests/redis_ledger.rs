//! The shared ledger (`RedisStore::ledger_*`) on one real Redis and on a Redis Cluster:
//! what one instance records, another lists, longest first, capped with the whole
//! count; what ended is pruned, what is removed is gone; the key leaves Redis when its
//! last member ends.
#![allow(clippy::unwrap_used, reason = "test")]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Clock, ManualClock};
use weir_store::{LedgerPage, RedisClock, RedisStore, RedisStoreConfig, RedisTarget};
use weir_testkit::{RedisCluster, RedisServer};

/// 2026-11-30 10:00:00 UTC, in milliseconds.
const NOW: u64 = 1_796_032_800_000;

async fn store(target: RedisTarget) -> RedisStore {
    let config = RedisStoreConfig {
        target,
        key_prefix: "weir:led".to_owned(),
        timeout: Duration::from_secs(2),
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(NOW * 1_000_000));
    RedisStore::connect(&config, clock).await.unwrap()
}

/// Two instances (two connections) on one ledger: `a` writes, `b` reads.
async fn shared_between_two(a: &RedisStore, b: &RedisStore) {
    for (member, ends) in [
        ("k1", NOW + 5_000),
        ("k/2 {x}", NOW + 9_000),
        ("k3", NOW + 1),
    ] {
        a.ledger_add("bans:api", member, ends, NOW).await.unwrap();
    }
    // Another name is another ledger.
    a.ledger_add("bans:login", "k1", NOW + 60_000, NOW)
        .await
        .unwrap();
    let page = b.ledger_read("bans:api", NOW, 2).await.unwrap();
    assert_eq!(
        page,
        LedgerPage {
            total: 3,
            members: vec![("k/2 {x}".into(), NOW + 9_000), ("k1".into(), NOW + 5_000)],
        }
    );
    // Ended at NOW + 1: pruned from then on (an end is exclusive).
    let page = b.ledger_read("bans:api", NOW + 1, 10).await.unwrap();
    assert_eq!(page.total, 2);
    // Written again: a new end, not a second member.
    a.ledger_add("bans:api", "k1", NOW + 20_000, NOW + 1)
        .await
        .unwrap();
    b.ledger_remove("bans:api", "k/2 {x}").await.unwrap();
    b.ledger_remove("bans:api", "never there").await.unwrap();
    let page = a.ledger_read("bans:api", NOW + 2, 10).await.unwrap();
    assert_eq!(page.members, vec![("k1".to_owned(), NOW + 20_000)]);
    assert_eq!(page.total, 1);
    let page = b.ledger_read("bans:api", NOW + 20_000, 10).await.unwrap();
    assert_eq!(page, LedgerPage::default());
    let page = b.ledger_read("bans:login", NOW, 10).await.unwrap();
    assert_eq!(page.members, vec![("k1".to_owned(), NOW + 60_000)]);
}

#[tokio::test]
async fn a_ledger_is_shared_on_one_redis() {
    let server = RedisServer::start();
    server.grant_bans_and_concurrency();
    let target = || RedisTarget::Single(server.url());
    let (a, b) = (store(target()).await, store(target()).await);
    shared_between_two(&a, &b).await;
    // The key lasts as long as its last member, no longer.
    let ttl: i64 = server
        .cli(&["PTTL", "weir:led:ledger{bans:login}"])
        .trim()
        .parse()
        .unwrap();
    assert!((1..=60_000).contains(&ttl), "ttl {ttl}");
}

#[tokio::test]
async fn a_ledger_is_shared_on_a_cluster() {
    let cluster = RedisCluster::start();
    cluster.grant_bans_and_concurrency();
    let target = || RedisTarget::Cluster(cluster.urls());
    let (a, b) = (store(target()).await, store(target()).await);
    shared_between_two(&a, &b).await;
}
