//! Running the service: the store the configuration asks for, and the HTTP server.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use weir_core::Clock;
use weir_store::{MemoryStore, RedisStore, Store, StoreError, SystemClock};

use crate::api;
use crate::config::{Config, StoreConfig};
use crate::engine::Engine;

/// How often the memory store gives back the memory of keys that are full again.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Builds the engine the configuration describes, with its store: connects to Redis,
/// or starts the memory store's sweeper (so call it inside a Tokio runtime).
pub async fn engine(config: &Config) -> Result<Arc<Engine>, StoreError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let store: Arc<dyn Store> = match &config.store {
        StoreConfig::Redis(redis) => Arc::new(RedisStore::connect(redis, clock).await?),
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
            store
        }
    };
    Ok(Arc::new(Engine::new(config, store)))
}

/// Serves the API on `listener` until `shutdown` completes, then finishes the requests
/// in flight and returns.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, api::router(engine))
        .with_graceful_shutdown(shutdown)
        .await
}
