//! The Redis store through sentinels that have a password of their own (`requirepass`
//! in `sentinel.conf`), another than the data nodes': with both, weir finds the
//! primary, checks on it, subscribes to the sentinels' announcements and follows a
//! failover; a sentinel password in the sentinel's URL works too, and so does a
//! minimal ACL user on the sentinels; a sentinel that refuses weir's credentials (a
//! wrong password, none, the data nodes' sent to it, one it does not have) is a
//! refusal naming the sentinel, not an outage to wait out.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    Credentials, Key, RedisAccess, RedisClock, RedisStore, RedisStoreConfig, RedisTarget, Secret,
    Store, StoreError,
};
use weir_testkit::{MASTER, RedisSentinels, SentinelSetup};

/// 2026-11-30 10:00:00 UTC, in nanoseconds.
const START: u64 = 1_796_032_800_000_000_000;
const SENTINEL_PASSWORD: &str = "sentinel-pw-3c9e";
const DATA_PASSWORD: &str = "data-pw-81b2";

fn protected() -> RedisSentinels {
    RedisSentinels::start_with(&SentinelSetup {
        sentinel_password: Some(SENTINEL_PASSWORD),
        data_password: Some(DATA_PASSWORD),
        server_args: &[],
    })
}

/// The store through `sentinels` (URLs) with the sentinels' `password`, and the data
/// nodes' password.
fn config(sentinels: Vec<String>, password: Option<&str>) -> RedisStoreConfig {
    RedisStoreConfig {
        target: RedisTarget::Sentinel {
            sentinels,
            master: MASTER.to_owned(),
            credentials: Credentials {
                username: None,
                password: password.map(Secret::new),
            },
        },
        key_prefix: "sentinel-auth".to_owned(),
        timeout: Duration::from_millis(200),
        clock: RedisClock::Server,
        window_counters: false,
        access: RedisAccess {
            password: Some(Secret::new(DATA_PASSWORD)),
            ..RedisAccess::default()
        },
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(START))
}

/// How many clients of each sentinel are subscribed to both announcement channels
/// (weir's subscriptions: the sentinels subscribe on the data nodes, not on each
/// other).
fn subscriptions(set: &RedisSentinels) -> Vec<usize> {
    (0..3)
        .map(|i| {
            set.sentinel(i, &["CLIENT", "LIST"])
                .lines()
                .filter(|client| client.contains(" sub=2 "))
                .count()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sentinels_own_password_weir_checks_subscribes_and_follows_a_failover() {
    let set = protected();
    let cfg = config(set.urls(), Some(SENTINEL_PASSWORD));
    RedisStore::admitted(&cfg, clock()).await.unwrap();
    let store = RedisStore::start(&cfg, clock());
    assert!(store.wait_connected(Duration::from_secs(5)).await);
    let policy = Policy::new(Algorithm::Gcra, 3, Duration::from_secs(3600), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "auth",
    };
    let mut admitted = 0;
    for _ in 0..5 {
        admitted += u32::from(store.check(key, &policy, 1).await.unwrap().allowed);
    }
    assert_eq!(admitted, 3);
    // The `+switch-master` subscriptions logged in with the sentinels' password.
    set.wait(Duration::from_secs(3), "weir to subscribe", |s| {
        subscriptions(s) == [1, 1, 1]
    });

    // A failover that leaves the old primary running: followed on the new one, where
    // the state went (all 3 spent: denied).
    let old = set.primary_port();
    set.fail_over();
    set.wait(Duration::from_secs(10), "the sentinels to switch", |s| {
        s.primary_port() != old
    });
    let switched = Instant::now();
    loop {
        let answer = store.check(key, &policy, 1).await;
        let new = set.server(set.primary_port());
        if let Ok(decision) = answer
            && new.calls("fcall") + new.calls("evalsha") > 0
        {
            assert!(!decision.allowed);
            break;
        }
        assert!(
            switched.elapsed() < Duration::from_secs(2),
            "not on the new primary {:?} after the switch",
            switched.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The sentinels' password written in their URLs still works; so does an ACL user on
/// the sentinels (`sentinel_username`) allowed only what weir sends them: the
/// primary's address, `SUBSCRIBE` to the two announcement channels, and `PING` (the
/// guide's minimal sentinel ACL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_sentinels_urls_or_a_minimal_acl_user_on_them_works() {
    let set = protected();
    let in_urls = set
        .urls()
        .iter()
        .map(|url| url.replace("redis://", &format!("redis://:{SENTINEL_PASSWORD}@")))
        .collect();
    for i in 0..3 {
        let created = set.sentinel(
            i,
            &[
                "ACL",
                "SETUSER",
                "watcher",
                "on",
                ">watcher-pw-77",
                "-@all",
                "+sentinel|get-master-addr-by-name",
                "+subscribe",
                "&+switch-master",
                "&+failover-state-reconf-slaves",
                "+ping",
            ],
        );
        assert_eq!(created.trim(), "OK");
    }
    let mut acl_user = config(set.urls(), Some("watcher-pw-77"));
    if let RedisTarget::Sentinel { credentials, .. } = &mut acl_user.target {
        credentials.username = Some("watcher".to_owned());
    }
    for (round, cfg) in [config(in_urls, None), acl_user].iter().enumerate() {
        RedisStore::admitted(cfg, clock()).await.unwrap();
        let store = RedisStore::start(cfg, clock());
        assert!(store.wait_connected(Duration::from_secs(5)).await);
        let policy = Policy::new(Algorithm::Gcra, 3, Duration::from_secs(3600), None).unwrap();
        let key = Key {
            rule: "r",
            identity: "in-url",
        };
        assert!(store.check(key, &policy, 1).await.unwrap().allowed);
        set.wait(
            Duration::from_secs(3),
            &format!("round {round}: weir to subscribe"),
            |s| subscriptions(s) == [1, 1, 1],
        );
        drop(store);
        set.wait(
            Duration::from_secs(3),
            &format!("round {round}: the subscriptions to end"),
            |s| subscriptions(s) == [0, 0, 0],
        );
    }
}

/// A wrong password, none, or the data nodes' sent to the sentinels: refused, naming
/// each sentinel (its URL, any password in it redacted) and saying it refused the
/// credentials, at once (no waiting for a failover that will not come); printed
/// nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_that_refuses_the_credentials_is_a_refusal_naming_it() {
    let set = protected();
    let port = |url: &str| url.rsplit(':').next().unwrap().to_owned();
    for (password, said) in [
        (Some("not-the-sentinels"), "was not accepted"),
        (None, "needs a password, and none was given"),
        (Some(DATA_PASSWORD), "was not accepted"),
    ] {
        let started = Instant::now();
        let error = RedisStore::admitted(&config(set.urls(), password), clock())
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, StoreError::Refused(_)), "{text}");
        for url in set.urls() {
            assert!(
                text.contains(&format!("{url}: the sentinel refused weir: ")),
                "{password:?}: {url} not named: {text}"
            );
            assert!(text.contains(&port(&url)));
        }
        assert!(text.contains(said), "{password:?}: {text}");
        for secret in [SENTINEL_PASSWORD, DATA_PASSWORD, "not-the-sentinels"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(started.elapsed() < Duration::from_secs(2), "{text}");
    }
    // The password in a URL is redacted where the sentinel is named.
    let urls = set
        .urls()
        .iter()
        .map(|url| url.replace("redis://", "redis://:wrong-in-url@"))
        .collect();
    let error = RedisStore::admitted(&config(urls, None), clock())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("redis://:<redacted>@127.0.0.1:"), "{text}");
    assert!(!text.contains("wrong-in-url"), "{text}");

    // The sentinels let weir in, the primary they name does not: its password is the
    // data nodes' own, and none was given (the sentinels' is not sent to it).
    let mut no_data_password = config(set.urls(), Some(SENTINEL_PASSWORD));
    no_data_password.access.password = None;
    let error = RedisStore::admitted(&no_data_password, clock())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, StoreError::Refused(_)), "{text}");
    assert!(
        text.contains("ACL user default needs a password, and none was given"),
        "{text}"
    );

    // A password given to sentinels that have none is refused as well (Redis refuses
    // an `AUTH` where no password is set).
    let open = RedisSentinels::start();
    let error = RedisStore::admitted(&config(open.urls(), Some(SENTINEL_PASSWORD)), clock())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, StoreError::Refused(_)), "{text}");
    assert!(text.contains("the sentinel refused weir"), "{text}");
}
