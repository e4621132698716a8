//! Running the service: the store the configuration asks for, and the HTTP server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use weir_core::Clock;
use weir_store::{MemoryStore, RedisStore, Store, StoreError, SystemClock};

use axum::Router;

use crate::config::{Config, StoreConfig};
use crate::engine::Engine;
use crate::gateway::Gateway;

/// How often the memory store gives back the memory of keys that are full again.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// What `weir serve` runs: the engine (decision API) and, with an upstream, the gateway.
#[derive(Debug)]
pub struct Service {
    /// The engine behind the decision API.
    pub engine: Arc<Engine>,
    /// The gateway, when the configuration has an `upstream`.
    pub gateway: Option<Arc<Gateway>>,
}

/// Builds the service the configuration describes, on one store: connects to Redis, or
/// starts the memory store's sweeper (so call it inside a Tokio runtime).
pub async fn service(config: &Config) -> Result<Service, StoreError> {
    let engine = engine(config).await?;
    let gateway = config
        .gateway
        .clone()
        .map(|gateway| Arc::new(Gateway::new(gateway, engine.store().clone())));
    Ok(Service { engine, gateway })
}

/// Builds the engine the configuration describes, with its store.
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

/// Serves `router` on `listener` until `shutdown` completes, then finishes the requests
/// in flight and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}
