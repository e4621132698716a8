//! What the leasing tests share: lease events counted, a Redis store on the test's
//! clock, and the hot rule's key.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weir_core::{Clock, ManualClock};
use weir_store::{
    Key, LeaseEvents, LeaseStore, RedisClock, RedisStore, RedisStoreConfig, RedisTarget,
};
use weir_testkit::RedisServer;

/// 2026-11-30 10:00:00 UTC, in nanoseconds.
pub(crate) const START: u64 = 1_796_032_800_000_000_000;
pub(crate) const SECOND: u64 = 1_000_000_000;

/// Lease events counted, over every rule.
#[derive(Default)]
pub(crate) struct Counted {
    pub granted: AtomicU64,
    pub returned: AtomicU64,
    pub expired: AtomicU64,
    pub denied: AtomicU64,
}

impl LeaseEvents for Counted {
    fn granted(&self, _: usize, _: u64) {
        self.granted.fetch_add(1, Ordering::Relaxed);
    }
    fn returned(&self, _: usize, units: u64) {
        self.returned.fetch_add(units, Ordering::Relaxed);
    }
    fn expired(&self, _: usize, units: u64) {
        self.expired.fetch_add(units, Ordering::Relaxed);
    }
    fn denied_locally(&self, _: usize) {
        self.denied.fetch_add(1, Ordering::Relaxed);
    }
}

/// A Redis store on `server` whose time is `clock` (`clock: local`), under
/// `weir:<prefix>` (within the testkit's ACL user's keys).
pub(crate) async fn redis_with(
    server: &RedisServer,
    clock: Arc<dyn Clock>,
    timeout: Duration,
    prefix: &str,
) -> Arc<dyn LeaseStore> {
    let config = RedisStoreConfig {
        target: RedisTarget::Single(server.url()),
        key_prefix: format!("weir:{prefix}"),
        timeout,
        clock: RedisClock::Local,
        window_counters: false,
        access: Default::default(),
    };
    Arc::new(RedisStore::connect(&config, clock).await.unwrap())
}

/// [`redis_with`] a 2 s timeout, on a manual clock.
pub(crate) async fn redis(
    server: &RedisServer,
    clock: &Arc<ManualClock>,
    prefix: &str,
) -> Arc<dyn LeaseStore> {
    redis_with(server, clock.clone(), Duration::from_secs(2), prefix).await
}

/// `identity`'s key under the leased rule `hot`.
pub(crate) fn hot(identity: &str) -> Key<'_> {
    Key {
        rule: "hot",
        identity,
    }
}
