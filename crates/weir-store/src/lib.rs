//! Where weir keeps its counters: the [`Store`] trait and its implementations.
//!
//! A store applies an algorithm of `weir-core` to the state kept under a key,
//! atomically, with the time taken from its [`Clock`](weir_core::Clock). The
//! [`MemoryStore`] keeps state in this process: the embedded default, exact for one
//! instance. The [`RedisStore`] keeps it in Redis or Redis Cluster, shared by every
//! instance, each check one atomic Lua script; it also leases units of a bucket to the
//! instances ([`LeaseStore::take`], [`LeaseStore::give_back`]), and the [`LeasingStore`] in front
//! of it spends those units on this instance, so a hot key costs a store call per
//! batch rather than per request.

#![deny(missing_docs)]

mod breaker;
mod clock;
mod error;
mod health;
mod jitter;
mod leasing;
mod memory;
mod redis_store;
mod regional;
mod store;

pub use breaker::{Breaker, BreakerConfig};
pub use clock::SystemClock;
pub use error::StoreError;
pub use health::StoreHealth;
pub use leasing::{
    AUTO_CAPACITY_SHARE, AUTO_HOLD, AUTO_MIN_BATCH, AUTO_MIN_CAPACITY, Batch, LeaseEvents,
    LeasePlan, LeasingStore, MAX_SLOTS,
};
pub use memory::{MemoryStore, MemoryStoreConfig};
pub use redis_store::{
    CLUSTER_REFUSAL as REDIS_CLUSTER_SERVER_NAME, ClientIdentity, Credentials, LedgerPage,
    RedisAccess, RedisClock, RedisPolicyError, RedisStore, RedisStoreConfig, RedisTarget, RedisTls,
    Secret, TableSnapshot, check_certificates, check_identity, check_redis_policy, check_redis_url,
    check_server_name, hash_slot, redacted,
};
pub use regional::{MAX_REPORTED_KEYS, RegionalStore, Regions, ShareEvents, region_floor};
pub use store::{
    BackingStore, Check, Key, Layer, LeaseStore, SETTLEMENTS_REMEMBERED, Settled, ShareStore,
    SlotStore, SlotTake, SlotsFree, Store, StoreFuture, Wraps,
};
/// The lease types of [`LeaseStore::take`] and [`LeaseStore::give_back`], from weir-core.
pub use weir_core::{Closing, Grant, LeaseId, Take};
