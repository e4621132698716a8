//! The Redis store over TLS (`rediss://`) against real `redis-server` processes with
//! certificates the test makes: exact limits across two clients on a single server and
//! on a 3-node cluster that talks TLS on its bus too; mutual TLS; and every server
//! certificate that must not be trusted refused with its reason, never a fall back to
//! cleartext; and a server reached by address with its certificate checked for a
//! configured server name.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    ClientIdentity, Key, RedisAccess, RedisClock, RedisStore, RedisStoreConfig, RedisTarget,
    RedisTls, Secret, Store, StoreError,
};
use weir_testkit::{CertFiles, RedisCluster, RedisServer, TestCerts, TlsSetup};

/// 2026-11-30 10:00:00 UTC, in nanoseconds.
const START: u64 = 1_796_032_800_000_000_000;

fn config(target: RedisTarget, tls: RedisTls) -> RedisStoreConfig {
    RedisStoreConfig {
        target,
        key_prefix: "weir:tls".to_owned(),
        timeout: Duration::from_secs(2),
        clock: RedisClock::Server,
        window_counters: false,
        access: RedisAccess {
            tls: Some(tls),
            ..RedisAccess::default()
        },
    }
}

fn trusting(certs: &TestCerts) -> RedisTls {
    RedisTls {
        ca: Some(std::fs::read(&certs.ca).unwrap()),
        client: None,
        server_name: None,
    }
}

fn identity(files: &CertFiles) -> ClientIdentity {
    ClientIdentity {
        cert: std::fs::read(&files.cert).unwrap(),
        key: Secret::new(std::fs::read_to_string(&files.key).unwrap()),
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(START))
}

/// Checks on `identity` from both stores in turn, concurrently, 4 times the limit:
/// how many were admitted.
async fn admitted_by_two(a: Arc<RedisStore>, b: Arc<RedisStore>, identity: &str) -> u32 {
    let policy = Policy::new(Algorithm::Gcra, 25, Duration::from_secs(3600), None).unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|t| {
            let store = if t % 2 == 0 { a.clone() } else { b.clone() };
            let identity = identity.to_owned();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..5 {
                    let key = Key {
                        rule: "r",
                        identity: &identity,
                    };
                    admitted += u32::from(store.check(key, &policy, 1).await.unwrap().allowed);
                }
                admitted
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_over_tls_admit_exactly_the_limit() {
    let certs = TestCerts::new();
    let setup = TlsSetup {
        ca: &certs.ca,
        server: &certs.server,
        mutual: false,
    };
    let server = RedisServer::start_tls(&setup, &[]);
    let cfg = config(RedisTarget::Single(server.tls_url()), trusting(&certs));
    let a = Arc::new(RedisStore::connect(&cfg, clock()).await.unwrap());
    let b = Arc::new(RedisStore::connect(&cfg, clock()).await.unwrap());
    assert_eq!(admitted_by_two(a, b, "shared").await, 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_on_a_tls_cluster_admit_exactly_the_limit() {
    let certs = TestCerts::new();
    let cluster = RedisCluster::start_tls(&certs);
    let cfg = config(RedisTarget::Cluster(cluster.tls_urls()), trusting(&certs));
    let a = Arc::new(RedisStore::connect(&cfg, clock()).await.unwrap());
    let b = Arc::new(RedisStore::connect(&cfg, clock()).await.unwrap());
    // Identities on every node.
    for identity in ["a", "b", "c", "d"] {
        assert_eq!(
            admitted_by_two(a.clone(), b.clone(), identity).await,
            25,
            "{identity}"
        );
    }
    // The health loop's own links reach every node over TLS too.
    let watched = RedisStore::start(&cfg, clock());
    assert!(watched.wait_connected(Duration::from_secs(5)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_requiring_mutual_tls_admits_weir_with_its_certificate_only() {
    let certs = TestCerts::new();
    let setup = TlsSetup {
        ca: &certs.ca,
        server: &certs.server,
        mutual: true,
    };
    let server = RedisServer::start_tls(&setup, &[]);
    let target = RedisTarget::Single(server.tls_url());
    let without = config(target.clone(), trusting(&certs));
    let refused = RedisStore::connect(&without, clock()).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Refused(_)),
        "no client certificate: {refused:?}"
    );
    let with = config(
        target,
        RedisTls {
            client: Some(identity(&certs.client)),
            ..trusting(&certs)
        },
    );
    let store = RedisStore::connect(&with, clock()).await.unwrap();
    let policy = Policy::new(Algorithm::Gcra, 1, Duration::from_secs(60), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "m",
    };
    assert!(store.check(key, &policy, 1).await.unwrap().allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_that_does_not_verify_is_refused_with_its_reason() {
    let certs = TestCerts::new();
    for (name, server, reason) in [
        (
            "another name",
            &certs.other_name,
            "not valid for name \"127.0.0.1\"",
        ),
        ("expired", &certs.expired, "expired"),
        ("an unknown CA", &certs.unknown_ca, "UnknownIssuer"),
    ] {
        let setup = TlsSetup {
            ca: &certs.ca,
            server,
            mutual: false,
        };
        let server = RedisServer::start_tls(&setup, &[]);
        let cfg = config(RedisTarget::Single(server.tls_url()), trusting(&certs));
        let error = RedisStore::admitted(&cfg, clock()).await.unwrap_err();
        let StoreError::Refused(said) = &error else {
            panic!("{name}: {error:?}");
        };
        assert!(said.contains(reason), "{name}: {said}");
        // No command of weir's reached Redis (a client's first is CLIENT SETINFO).
        assert_eq!(server.calls("client|setinfo"), 0, "{name}");
    }
}

/// A certificate for a name only (`redis.elsewhere.test`), the server reached by its
/// address: with `server_name` set to that name weir connects, counts, and comes back
/// after the server restarts; with another name it is refused, naming the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_reached_by_address_is_checked_for_the_configured_server_name() {
    let certs = TestCerts::new();
    let setup = TlsSetup {
        ca: &certs.ca,
        server: &certs.other_name,
        mutual: false,
    };
    let mut server = RedisServer::start_tls(&setup, &[]);
    let target = RedisTarget::Single(server.tls_url());
    let named = |name: &str| {
        config(
            target.clone(),
            RedisTls {
                server_name: Some(name.to_owned()),
                ..trusting(&certs)
            },
        )
    };
    let error = RedisStore::admitted(&named("redis.test"), clock())
        .await
        .unwrap_err();
    let StoreError::Refused(said) = &error else {
        panic!("another name: {error:?}");
    };
    assert!(said.contains("not valid for name \"redis.test\""), "{said}");
    assert_eq!(server.calls("client|setinfo"), 0);

    let cfg = named("redis.elsewhere.test");
    RedisStore::admitted(&cfg, clock()).await.unwrap();
    let a = Arc::new(RedisStore::connect(&cfg, clock()).await.unwrap());
    let b = RedisStore::start(&cfg, clock());
    assert!(b.wait_connected(Duration::from_secs(5)).await);
    assert_eq!(admitted_by_two(a, b.clone(), "named").await, 25);

    // The connection under a name is no connection manager: the health loop makes a
    // new one when the server comes back.
    server.restart();
    let policy = Policy::new(Algorithm::Gcra, 1_000, Duration::from_secs(60), None).unwrap();
    let key = Key {
        rule: "r",
        identity: "after",
    };
    let restarted = std::time::Instant::now();
    while b.check(key, &policy, 1).await.is_err() {
        assert!(
            restarted.elapsed() < Duration::from_secs(5),
            "no reconnection under the server name"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A cluster cannot check one name for nodes it reaches by their announced
/// addresses: a server name is refused, never ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_refuses_a_server_name() {
    let cfg = config(
        RedisTarget::Cluster(vec!["rediss://127.0.0.1:1".to_owned()]),
        RedisTls {
            ca: None,
            client: None,
            server_name: Some("redis.test".to_owned()),
        },
    );
    let error = RedisStore::admitted(&cfg, clock()).await.unwrap_err();
    let StoreError::Refused(said) = &error else {
        panic!("{error:?}");
    };
    assert!(said.contains("CLUSTER SLOTS"), "{said}");
}
