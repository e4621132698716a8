//! The queue on real stores: a Redis no server answers (never ready) and the memory
//! store.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{
    Check, Key, MemoryStore, MemoryStoreConfig, RedisClock, RedisStore, RedisStoreConfig,
    RedisTarget, Store, StoreError,
};

use super::{Debt, Owed, Tried};
use crate::metrics::Metrics;

/// After a reload that changed the `store` section, debts owed to the old store,
/// out, do not hold up those owed to the new one.
#[tokio::test]
async fn a_store_out_does_not_hold_up_what_is_owed_to_another() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1));
    let metrics = Metrics::new(clock.clone());
    let owed = Owed::new(10, clock.clone(), &metrics);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let config = RedisStoreConfig {
        target: RedisTarget::Single(format!("redis://127.0.0.1:{port}")),
        key_prefix: "weir".into(),
        timeout: Duration::from_millis(50),
        clock: RedisClock::Server,
        window_counters: false,
        access: Default::default(),
    };
    let lost: Arc<dyn Store> = RedisStore::start(&config, clock.clone());
    let memory = Arc::new(MemoryStore::new(
        MemoryStoreConfig::default(),
        clock.clone(),
    ));
    let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(3600), None).unwrap();
    let ana = Check {
        key: Key {
            rule: "r",
            identity: "ana",
        },
        policy: &policy,
        cost: 5,
    };
    assert!(memory.check_all(&[ana]).await.unwrap()[0].allowed);
    let refused = Tried::of(&StoreError::Unavailable("circuit open".into()), false, 1);
    owed.owe(Debt::new(&lost, 1, &[ana], &[], refused));
    owed.owe(Debt::new(
        &(memory.clone() as Arc<dyn Store>),
        2,
        &[ana],
        &[],
        refused,
    ));
    assert!(
        !owed.send_again().await,
        "the lost store's debt is still owed"
    );
    assert_eq!(owed.queue.lock().debts.len(), 1);
    let peek = Check { cost: 0, ..ana };
    assert_eq!(
        memory.check_all(&[peek]).await.unwrap()[0].remaining,
        10,
        "given back"
    );
}
