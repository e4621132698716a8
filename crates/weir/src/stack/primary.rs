//! The bottom of the store stack: the primary store the configuration names, opened.

use std::sync::Arc;
use std::time::Duration;

use weir_core::Clock;
use weir_store::{BackingStore, Breaker, BreakerConfig, MemoryStore, RedisStore, StoreError};

use crate::config::StoreConfig;
use crate::metrics::StoreWatch;

/// How often the memory store gives back the memory of keys that are full again.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// The store the configuration describes, and how the metrics watch it: Redis behind
/// its circuit breaker (which follows the store's health loop), or the memory store
/// with its sweeper (so call it inside a Tokio runtime).
pub(crate) async fn open(
    config: &StoreConfig,
    clock: Arc<dyn Clock>,
) -> Result<(Arc<dyn BackingStore>, StoreWatch), StoreError> {
    Ok(match config {
        StoreConfig::Redis(redis, _) => {
            // Start connected when Redis is there; serve degraded (each rule's failure
            // policy) when it is not: the store's health loop connects in the
            // background, logs the loss and the return, and closes the breaker as soon
            // as Redis answers. A Redis that refuses weir (its certificate, the
            // credentials) is not waited for: the service does not start.
            RedisStore::admitted(redis, Arc::clone(&clock)).await?;
            let store = RedisStore::start(redis, clock);
            store
                .wait_connected(redis.timeout.max(Duration::from_secs(2)))
                .await;
            let health = store.health();
            let breaker =
                Arc::new(Breaker::new(store, BreakerConfig::default()).following(health.clone()));
            let closed = Arc::clone(&breaker);
            let lost = Arc::clone(&health);
            let watch = StoreWatch {
                kind: config.kind().label(),
                up: Box::new(move || health.is_whole()),
                breaker_open: Some(Box::new(move || !closed.is_closed())),
                slots_lost: Some(Box::new(move || lost.slots_lost())),
            };
            (breaker, watch)
        }
        StoreConfig::Memory(memory) => {
            let store = Arc::new(MemoryStore::new(*memory, clock));
            let weak = Arc::downgrade(&store);
            tokio::spawn(async move {
                let mut every = tokio::time::interval(SWEEP_EVERY);
                every.tick().await;
                loop {
                    every.tick().await;
                    let Some(store) = weak.upgrade() else { break };
                    store.sweep_expired();
                }
            });
            let watch = StoreWatch {
                kind: config.kind().label(),
                up: Box::new(|| true),
                breaker_open: None,
                slots_lost: None,
            };
            (store, watch)
        }
    })
}
