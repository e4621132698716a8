//! Slots of requests in flight (`algorithm: concurrency`) on a real `redis-server`:
//! the set outlives every slot it holds, whatever lease the instance that takes or
//! renews last runs with; a take answered later than half its lease is refused; and a
//! take that fails or is dropped unanswered leaves no slot held by no request. Found by
//! the model of the protocol (crates/weir-lease-model, src/slots).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::ManualClock;
use weir_store::{
    Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, SlotStore, SlotTake, StoreError,
};
use weir_testkit::RedisServer;

fn config(server: &RedisServer) -> RedisStoreConfig {
    RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: "weir:slots".to_owned(),
        timeout: Duration::from_secs(5),
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    }
}

async fn connect(server: &RedisServer) -> RedisStore {
    let clock = Arc::new(ManualClock::new(0));
    RedisStore::connect(&config(server), clock).await.unwrap()
}

const KEY: Key<'static> = Key {
    rule: "reports",
    identity: "k1",
};

fn takes(limit: u64) -> [SlotTake<'static>; 1] {
    [SlotTake { key: KEY, limit }]
}

/// The one slots set on the server, by name.
fn slots_key(server: &RedisServer) -> String {
    let keys = server.cli(&["KEYS", "*:slots"]);
    let mut names = keys.lines().filter(|l| !l.is_empty());
    let name = names.next().expect("a slots set").to_owned();
    assert_eq!(names.next(), None, "one slots set");
    name
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cli(&["PTTL", key]).trim().parse().unwrap()
}

fn score(server: &RedisServer, key: &str, id: u64) -> Option<i64> {
    let found = server.cli(&["ZSCORE", key, &id.to_string()]);
    found.trim().parse().ok()
}

/// Instance A holds a slot for 10 s; instance B, configured with a 1 s lease (a
/// rolling change of `store.slot_lease`), takes the next slot of the key: the set must
/// still live as long as A's slot, else it expires in 1 s with A's request in flight.
#[tokio::test]
async fn a_take_with_a_shorter_lease_never_shortens_the_set_under_a_longer_slot() {
    let server = RedisServer::start();
    server.grant_bans_and_concurrency();
    let (a, b) = (connect(&server).await, connect(&server).await);
    let free = a
        .take_slots(&takes(2), 1, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(free[0].allowed);
    let free = b
        .take_slots(&takes(2), 2, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(free[0].allowed && free[0].free == 0, "{free:?}");
    let key = slots_key(&server);
    let ttl = pttl(&server, &key);
    assert!(
        ttl > 9_000,
        "the set expires in {ttl} ms, before A's slot (10 s)"
    );
    assert!(score(&server, &key, 1).is_some());
}

/// The same through B's renewal loop (every third of its 600 ms lease): each renewal
/// keeps the set alive as long as A's slot.
#[tokio::test]
async fn a_renewal_with_a_shorter_lease_never_shortens_the_set_under_a_longer_slot() {
    let server = RedisServer::start();
    server.grant_bans_and_concurrency();
    let a = connect(&server).await;
    let b = RedisStore::start(&config(&server), Arc::new(ManualClock::new(0)));
    a.take_slots(&takes(2), 1, Duration::from_secs(10))
        .await
        .unwrap();
    let lease = Duration::from_millis(600);
    let taken = Instant::now();
    let free = loop {
        match b.take_slots(&takes(2), 2, lease).await {
            Ok(free) => break free,
            Err(StoreError::Unavailable(_)) if taken.elapsed() < Duration::from_secs(5) => {
                tokio::task::yield_now().await;
            }
            Err(error) => panic!("{error}"),
        }
    };
    assert!(free[0].allowed);
    let key = slots_key(&server);
    let first = score(&server, &key, 2).unwrap();
    // Waits for an event (B's renewal moving its deadline), not for a time.
    let waiting = Instant::now();
    while score(&server, &key, 2) == Some(first) {
        assert!(
            waiting.elapsed() < Duration::from_secs(5),
            "B never renewed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ttl = pttl(&server, &key);
    assert!(
        ttl > 8_000,
        "after B's renewal the set expires in {ttl} ms, before A's slot"
    );
    assert!(score(&server, &key, 1).is_some());
}

/// Waits (for an event, at most 5 s) until `releases` slots were given back (`ZREM`
/// ran), then checks that no slots set is left: the take ran before its release.
async fn given_back(server: &RedisServer, releases: u64) {
    let start = Instant::now();
    while server.calls("zrem") < releases {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the slot of a take not answered was never given back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        server.cli(&["KEYS", "*:slots"]).trim(),
        "",
        "a slot no request holds stayed taken"
    );
}

/// A take Redis answers later than half the lease (here: writes paused 1 s, lease
/// 400 ms) is refused as a timeout at half the lease, and its slot, taken once Redis
/// resumed, is given back: no request starts late in its slot's lease, and no slot is
/// left held by none.
#[tokio::test]
async fn a_take_answered_after_half_the_lease_is_refused_and_leaves_no_slot() {
    let server = RedisServer::start();
    server.grant_bans_and_concurrency();
    let store = connect(&server).await;
    server.cli(&["CLIENT", "PAUSE", "1000", "WRITE"]);
    let lease = Duration::from_millis(400);
    let taken = store.take_slots(&takes(1), 7, lease).await;
    assert!(
        matches!(taken, Err(StoreError::Timeout(within)) if within == lease / 2),
        "{taken:?}"
    );
    given_back(&server, 1).await;
    let free = store.take_slots(&takes(1), 8, lease).await.unwrap();
    assert!(free[0].allowed, "the key's one slot is free: {free:?}");
}

/// A take that fails on the store's own timeout (100 ms, writes paused 500 ms, a
/// 10 s lease), and one whose caller gives up and drops the call: each may have run
/// all the same, and each slot is given back once Redis resumes, not held by no
/// request for the 10 s of its lease.
#[tokio::test]
async fn a_take_that_fails_or_is_dropped_gives_its_slot_back() {
    let server = RedisServer::start();
    server.grant_bans_and_concurrency();
    let store = RedisStore::connect(
        &RedisStoreConfig {
            timeout: Duration::from_millis(100),
            ..config(&server)
        },
        Arc::new(ManualClock::new(0)),
    )
    .await
    .unwrap();
    let lease = Duration::from_secs(10);
    server.cli(&["CLIENT", "PAUSE", "500", "WRITE"]);
    let taken = store.take_slots(&takes(1), 1, lease).await;
    assert!(taken.is_err(), "{taken:?}");
    given_back(&server, 1).await;

    server.cli(&["CLIENT", "PAUSE", "500", "WRITE"]);
    let given_up = tokio::time::timeout(
        Duration::from_millis(20),
        store.take_slots(&takes(1), 2, lease),
    )
    .await;
    assert!(given_up.is_err(), "the call was dropped unanswered");
    given_back(&server, 2).await;
    let free = store.take_slots(&takes(1), 3, lease).await.unwrap();
    assert!(free[0].allowed, "the key's one slot is free: {free:?}");
}
