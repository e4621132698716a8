//! The Redis store through Redis Sentinel, on real processes (a primary, a replica
//! and three sentinels): two clients admit exactly the limit on the primary the
//! sentinels name; the primary killed, no check waits past the store's timeout, and
//! the store follows the primary the sentinels promote, measured from their switch;
//! a failover that leaves the old primary running is followed as well, at once, on
//! the sentinels' `+switch-master`; a sentinel that floods that channel with junk
//! costs a bounded number of probes, and its subscription is made again when it
//! drops; sentinels and primary reached by address, checked for a server name; and a
//! primary loading its data after a restart (`-LOADING`) is an outage, failing checks
//! at once, that ends when it is loaded or the sentinels name another primary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    Key, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, RedisTls, Store, StoreError,
};
use weir_testkit::{MASTER, RedisSentinels, RedisServer, SentinelSetup, TestCerts, redis_cli};

/// 2026-11-30 10:00:00 UTC, in nanoseconds.
const START: u64 = 1_796_032_800_000_000_000;
const TIMEOUT: Duration = Duration::from_millis(200);
/// The store's timeout over TLS (see its test).
const TLS_TIMEOUT: Duration = Duration::from_millis(500);

fn config(sentinels: &RedisSentinels) -> RedisStoreConfig {
    RedisStoreConfig {
        target: RedisTarget::Sentinel {
            sentinels: sentinels.urls(),
            master: MASTER.to_owned(),
            credentials: Default::default(),
        },
        key_prefix: "weir:sentinel".to_owned(),
        timeout: TIMEOUT,
        clock: RedisClock::Server,
        window_counters: false,
        access: RedisSentinels::access(),
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(START))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_a_failover_within_two_seconds_of_the_sentinels_switch() {
    let mut set = RedisSentinels::start();
    let cfg = config(&set);
    let a = RedisStore::start(&cfg, clock());
    let b = RedisStore::start(&cfg, clock());
    assert!(a.wait_connected(Duration::from_secs(5)).await);
    assert!(b.wait_connected(Duration::from_secs(5)).await);

    // Exactly the limit across two clients, on the primary.
    let policy = Policy::new(Algorithm::Gcra, 25, Duration::from_secs(3600), None).unwrap();
    let key = |identity| Key {
        rule: "r",
        identity,
    };
    let mut admitted = 0;
    for i in 0..60 {
        let store = if i % 2 == 0 { &a } else { &b };
        admitted += u32::from(
            store
                .check(key("shared"), &policy, 1)
                .await
                .unwrap()
                .allowed,
        );
    }
    assert_eq!(admitted, 25);

    // The primary killed: checks fail within the timeout until the sentinels promote
    // the replica, then succeed on it.
    let old = set.primary_port();
    set.server_on(old).kill();
    let killed = Instant::now();
    let fresh = Policy::new(Algorithm::Gcra, 1_000, Duration::from_secs(3600), None).unwrap();
    let mut switched: Option<Instant> = None;
    let mut slowest = Duration::ZERO;
    let back = loop {
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no failover followed within 30 s"
        );
        if switched.is_none() && set.primary_port() != old {
            switched = Some(Instant::now());
        }
        let asked = Instant::now();
        let answer = a.check(key("after"), &fresh, 1).await;
        slowest = slowest.max(asked.elapsed());
        if answer.is_ok() && switched.is_some() {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let switched = switched.expect("the sentinels switched");
    let followed = back.duration_since(switched);
    eprintln!(
        "sentinels switched {:?} after the kill; the store followed {followed:?} after the switch; slowest check {slowest:?}",
        switched.duration_since(killed)
    );
    assert!(
        followed < Duration::from_secs(2),
        "followed after {followed:?}"
    );
    assert!(
        slowest < TIMEOUT + Duration::from_millis(300),
        "a check took {slowest:?}, past the store's timeout"
    );
    // The other client follows too.
    let deadline = Instant::now() + Duration::from_secs(2);
    while b.check(key("after"), &fresh, 1).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the second client did not follow"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A failover that leaves the old primary running (`SENTINEL FAILOVER`): it goes on
/// answering as a primary, and taking writes its demotion will discard, for seconds
/// (6 s and more here), so the store cannot wait for it to fail or say `READONLY`:
/// it asks the sentinels at least every 500 ms and moves to the primary they name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_leaves_the_old_primary_running_is_followed_within_two_seconds() {
    let set = RedisSentinels::start();
    let store = RedisStore::start(&config(&set), clock());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let policy = Policy::new(Algorithm::Gcra, 1_000, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "k",
    };
    store.check(key, &policy, 1).await.unwrap();
    let old = set.primary_port();
    set.fail_over();
    set.wait(Duration::from_secs(10), "the sentinels to switch", |s| {
        s.primary_port() != old
    });
    let switched = Instant::now();
    // Until the store asks the sentinels, its checks go on landing on the old primary.
    loop {
        let answer = store.check(key, &policy, 1).await;
        let new = set.primary_port();
        let on_new = set.server(new).calls("fcall") + set.server(new).calls("evalsha");
        if answer.is_ok() && on_new > 0 {
            break;
        }
        assert!(
            switched.elapsed() < Duration::from_secs(2),
            "still not on the new primary {:?} after the switch: {answer:?}",
            switched.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "checking on the new primary {:?} after the switch",
        switched.elapsed()
    );
}

/// What a failover over-admits: checks the old primary acknowledged but had not yet
/// replicated are lost with it. 40 of a limit of 50 admitted one after another, the
/// primary killed, then 100 more tried on the new primary: the total over the limit is
/// what the replica had not received (printed), a few checks here, never the 40 a
/// store starting afresh would give again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_over_admits_at_most_what_was_not_yet_replicated() {
    let mut set = RedisSentinels::start();
    let store = RedisStore::start(&config(&set), clock());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let policy = Policy::new(Algorithm::Gcra, 50, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "counted",
    };
    for _ in 0..40 {
        assert!(store.check(key, &policy, 1).await.unwrap().allowed);
    }
    let old = set.primary_port();
    set.server_on(old).kill();
    let killed = Instant::now();
    let mut after = 0;
    let mut answered = 0;
    while answered < 100 {
        assert!(killed.elapsed() < Duration::from_secs(30), "no failover");
        match store.check(key, &policy, 1).await {
            Ok(decision) => {
                answered += 1;
                after += u32::from(decision.allowed);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let over = (40 + after).saturating_sub(50);
    eprintln!("over-admitted {over} across the failover (40 before, {after} after)");
    assert!(40 + after >= 50, "under-admitted: {after} after");
    assert!(
        over <= 5,
        "over-admitted {over}: the new primary lost more than the lag"
    );
}

/// Sentinels, primary and replica all over TLS (`rediss://` sentinels, the primary's
/// TLS port named): two clients admit exactly the limit, and the store follows a
/// killed primary to the promoted replica, over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_tls_sentinels_two_clients_admit_exactly_and_follow_a_failover() {
    let certs = TestCerts::new();
    let mut set = RedisSentinels::start_tls(&certs);
    let mut cfg = config(&set);
    // Each TLS connection builds its rustls configuration, loading the system's roots
    // (redis-rs 1.8 does, even with a CA given): tens of milliseconds of CPU in a
    // debug build, so asking a sentinel and connecting to the primary on a loaded
    // host overran 200 ms, and the store followed only seconds later.
    cfg.timeout = TLS_TIMEOUT;
    cfg.access.tls = Some(RedisTls {
        ca: Some(std::fs::read(&certs.ca).unwrap()),
        client: None,
        server_name: None,
    });
    let a = RedisStore::start(&cfg, clock());
    let b = RedisStore::start(&cfg, clock());
    assert!(a.wait_connected(Duration::from_secs(5)).await);
    assert!(b.wait_connected(Duration::from_secs(5)).await);
    let policy = Policy::new(Algorithm::Gcra, 25, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "tls",
    };
    let mut admitted = 0;
    for i in 0..60 {
        let store = if i % 2 == 0 { &a } else { &b };
        admitted += u32::from(store.check(key, &policy, 1).await.unwrap().allowed);
    }
    assert_eq!(admitted, 25);
    let old = set.primary_port();
    set.server_on(old).kill();
    set.wait(Duration::from_secs(30), "the sentinels to switch", |s| {
        s.primary_port() != old
    });
    let switched = Instant::now();
    // The state moved with the primary: still exactly 25, now all denied.
    let decision = loop {
        if let Ok(decision) = a.check(key, &policy, 1).await {
            break decision;
        }
        assert!(
            switched.elapsed() < Duration::from_secs(2),
            "not on the new primary"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!decision.allowed, "{decision:?}");
}

/// A "sentinel" that floods `+switch-master` with junk and with messages naming the
/// watched master (a plain Redis, listed last, so never asked for the primary): the
/// store goes on checking, and its probes stay bounded (each wake is followed by a
/// gap); killed and restarted, it has weir's subscription again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_flooding_junk_costs_bounded_probes_and_a_dropped_subscription_is_remade() {
    let set = RedisSentinels::start();
    let mut junk = RedisServer::start();
    let mut cfg = config(&set);
    if let RedisTarget::Sentinel { sentinels, .. } = &mut cfg.target {
        sentinels.push(junk.admin_url());
    }
    let store = RedisStore::start(&cfg, clock());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let subscribed = |junk: &RedisServer| junk.cli(&["PUBSUB", "NUMSUB", "+switch-master"]);
    set.wait(Duration::from_secs(3), "weir to subscribe", |_| {
        subscribed(&junk).lines().nth(1) == Some("1")
    });

    let client = redis::Client::open(junk.admin_url()).unwrap();
    let mut publisher = client.get_multiplexed_async_connection().await.unwrap();
    let primary = set.server(set.primary_port());
    let probes_before = primary.calls("role");
    let policy = Policy::new(Algorithm::Gcra, 100_000, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "flood",
    };
    let flooding = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut sent = 0;
    while flooding.elapsed() < Duration::from_secs(1) {
        let mut pipe = redis::pipe();
        for i in 0..200 {
            let payload: &[u8] = match i % 3 {
                0 => b"mymaster 127.0.0.1 1 127.0.0.1 2",
                1 => b"\xff\x00 not a switch at all",
                _ => b"",
            };
            pipe.cmd("PUBLISH")
                .arg("+switch-master")
                .arg(payload)
                .ignore();
        }
        pipe.query_async::<()>(&mut publisher).await.unwrap();
        sent += 200;
        let asked = Instant::now();
        store.check(key, &policy, 1).await.unwrap();
        slowest = slowest.max(asked.elapsed());
    }
    let probes = primary.calls("role") - probes_before;
    eprintln!("{sent} junk messages in 1 s: {probes} probes, slowest check {slowest:?}");
    // At most one wake per 100 ms, beside the idle probes and the 500 ms poll.
    assert!(probes <= 20, "{probes} probes under a flood");
    assert!(
        slowest < TIMEOUT,
        "a check took {slowest:?} under the flood"
    );

    // The subscription drops with the server, and is made again when it is back.
    junk.restart();
    set.wait(Duration::from_secs(5), "weir to subscribe again", |_| {
        subscribed(&junk).lines().nth(1) == Some("1")
    });
    store.check(key, &policy, 1).await.unwrap();
}

/// Sentinels, primary and replica with a certificate for a name only, reached by
/// their addresses: with `server_name` weir finds and uses the primary; without it
/// the sentinels' certificate is refused, with the name it was checked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_and_primary_reached_by_address_are_checked_for_the_server_name() {
    let certs = TestCerts::new();
    let set = RedisSentinels::start_tls_as(&certs, &certs.other_name);
    let mut cfg = config(&set);
    let tls = |server_name: Option<&str>| {
        Some(RedisTls {
            ca: Some(std::fs::read(&certs.ca).unwrap()),
            client: None,
            server_name: server_name.map(str::to_owned),
        })
    };
    cfg.access.tls = tls(None);
    let error = RedisStore::admitted(&cfg, clock()).await.unwrap_err();
    let said = format!("{error:?}");
    assert!(
        matches!(error, weir_store::StoreError::Refused(_)),
        "{said}"
    );
    assert!(said.contains("not valid for name"), "{said}");

    cfg.access.tls = tls(Some("redis.elsewhere.test"));
    RedisStore::admitted(&cfg, clock()).await.unwrap();
    let store = RedisStore::start(&cfg, clock());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let policy = Policy::new(Algorithm::Gcra, 2, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "named",
    };
    let mut admitted = 0;
    for _ in 0..3 {
        admitted += u32::from(store.check(key, &policy, 1).await.unwrap().allowed);
    }
    assert_eq!(admitted, 2);
}

/// A primary that restarts loads its data before it serves, answering `-LOADING`
/// meanwhile, and the sentinels go on naming it (to them a `LOADING` answer is alive:
/// no failover). `DEBUG RELOAD` makes that loading, slowed to seconds by
/// `key-load-delay`: every check meanwhile fails at once as unavailable (the rule's
/// failure policy answers, the breaker counts it), none waits out the timeout or reads
/// as a fault; once loaded, the same store checks again, on the state it had. Loading
/// again, the sentinels promote the replica (`SENTINEL FAILOVER`): the store moves to
/// it within 2 s of the switch, the old primary still loading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_loading_its_data_fails_checks_at_once_until_it_is_loaded_or_replaced() {
    let set = RedisSentinels::start_with(&SentinelSetup {
        server_args: &["--enable-debug-command", "local"],
        ..SentinelSetup::default()
    });
    let store = RedisStore::start(&config(&set), clock());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let policy = Policy::new(Algorithm::Gcra, 5, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "loading",
    };
    for _ in 0..3 {
        assert!(store.check(key, &policy, 1).await.unwrap().allowed);
    }
    let port = set.primary_port();
    let primary = set.server(port);
    // 10,000 keys, 100 µs each to load, the loader answering clients every 1 KiB read:
    // about 2 s of `-LOADING`.
    assert_eq!(primary.cli(&["DEBUG", "POPULATE", "10000"]).trim(), "OK");
    for (name, value) in [
        ("key-load-delay", "100"),
        ("loading-process-events-interval-bytes", "1024"),
    ] {
        assert_eq!(primary.cli(&["CONFIG", "SET", name, value]).trim(), "OK");
    }
    let loading = |server: &RedisServer| server.cli(&["INFO", "persistence"]).contains("loading:1");
    let reload = std::thread::spawn(move || {
        let output = redis_cli(&["-p", &port.to_string(), "DEBUG", "RELOAD"]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    });
    set.wait(Duration::from_secs(5), "the primary to load", |s| {
        loading(s.server(port))
    });

    let mut failed = 0;
    let mut admitted = 3;
    let mut slowest = Duration::ZERO;
    while loading(set.server(port)) {
        let asked = Instant::now();
        let answer = store.check(key, &policy, 1).await;
        slowest = slowest.max(asked.elapsed());
        match answer {
            Err(StoreError::Unavailable(said)) => {
                assert!(said.contains("loading the dataset"), "{said}");
                failed += 1;
            }
            // Loaded between the check and the look at the server.
            Ok(decision) if !loading(set.server(port)) => {
                admitted += u32::from(decision.allowed);
            }
            other => panic!("a check while loading: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let loaded = Instant::now();
    assert_eq!(reload.join().unwrap().trim(), "OK");
    eprintln!("{failed} checks failed while loading; slowest {slowest:?}");
    assert!(failed >= 10, "only {failed} checks while loading");
    assert!(slowest < TIMEOUT, "a check took {slowest:?} while loading");
    assert_eq!(set.primary_port(), port, "the sentinels failed over");

    // Loaded: the same store checks again, on the state kept: 5 admitted in all.
    let mut denied = false;
    while !denied {
        match store.check(key, &policy, 1).await {
            Ok(decision) => {
                admitted += u32::from(decision.allowed);
                denied = !decision.allowed;
            }
            Err(error) => {
                assert!(
                    loaded.elapsed() < Duration::from_secs(2),
                    "no check {:?} after the load ended: {error:?}",
                    loaded.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    assert_eq!(admitted, 5);

    // Loading again, slower, and the sentinels promote the replica meanwhile: the
    // store moves to it while the old primary still loads.
    assert_eq!(
        set.server(port)
            .cli(&["CONFIG", "SET", "key-load-delay", "300"])
            .trim(),
        "OK"
    );
    let reload = std::thread::spawn(move || {
        let output = redis_cli(&["-p", &port.to_string(), "DEBUG", "RELOAD"]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    });
    set.wait(Duration::from_secs(5), "the primary to load", |s| {
        loading(s.server(port))
    });
    set.fail_over();
    set.wait(Duration::from_secs(5), "the sentinels to switch", |s| {
        s.primary_port() != port
    });
    let switched = Instant::now();
    let fresh = Key {
        rule: "r",
        identity: "after-switch",
    };
    while store.check(fresh, &policy, 1).await.is_err() {
        assert!(
            switched.elapsed() < Duration::from_secs(2),
            "not on the new primary {:?} after the switch",
            switched.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "on the new primary {:?} after the switch",
        switched.elapsed()
    );
    assert!(
        loading(set.server(port)),
        "the old primary finished loading first: the test proves nothing"
    );
    let new = set.server(set.primary_port());
    assert!(new.calls("fcall") + new.calls("evalsha") > 0);
    assert_eq!(reload.join().unwrap().trim(), "OK");
}
