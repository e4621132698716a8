//! Running the service: the store the configuration asks for, the engine and gateway on
//! it, and reloading them without dropping requests. `listen` answers connections,
//! `workers` runs one server thread per core, `reload` swaps the configuration.

mod listen;
mod reload;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use weir_core::Clock;
use weir_store::{Breaker, BreakerConfig, MemoryStore, RedisStore, Store, StoreError, SystemClock};

pub use self::listen::{ConnectionLimits, Handler, bind_shared, serve};
pub use self::reload::ReloadError;
pub use self::workers::{serve_grpc_on_threads, serve_on_threads};
use crate::auth::AuthDoor;
use crate::config::{AdminConfig, Config, StoreConfig};
use crate::engine::{Engine, EngineHandle};
use crate::envoy::{RateLimitDoor, SharedDescriptors};
use crate::gateway::Gateway;
use crate::metrics::{Metrics, StoreWatch};

/// How often the memory store gives back the memory of keys that are full again.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// A value that handlers read per request and a reload replaces whole: requests in
/// flight keep the value they started with.
pub type Shared<T> = Arc<ArcSwap<T>>;

/// Wraps a value for [`Shared`] use.
pub fn shared<T>(value: T) -> Shared<T> {
    Arc::new(ArcSwap::from_pointee(value))
}

/// What `weir serve` runs: the engine (decision API) and, with an upstream, the gateway.
pub struct Service {
    /// The engine behind every door.
    pub engine: EngineHandle,
    /// The gateway, when the configuration has an `upstream`.
    pub gateway: Option<Shared<Gateway>>,
    /// The admin API's settings, when configured: a reload may change the token, not
    /// add or remove the section (the listener is opened at start).
    pub admin: Option<Shared<AdminConfig>>,
    /// The descriptors of Envoy's rate limit service, when the configuration has an
    /// `envoy` section: a reload may change them, not add or remove the section (the
    /// gRPC listener is opened at start).
    pub envoy: Option<SharedDescriptors>,
    /// The forward-auth door, when the configuration has an `auth` section: a reload
    /// may change it, not add or remove the section (`--auth-listen` is opened at
    /// start).
    pub auth: Option<Shared<AuthDoor>>,
    /// What the service counts, kept across reloads.
    pub metrics: Arc<Metrics>,
    store: Arc<dyn Store>,
    store_config: StoreConfig,
    /// The SHA-256 of the configuration serving now (a reload compares the file's).
    /// (`Config::fingerprint`: with an `envoy` section, its directory's too.)
    config_sha256: String,
    /// The envoy directory serving now, watched for changes with the file.
    envoy_dir: Option<std::path::PathBuf>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("gateway", &self.gateway.is_some())
            .field("store", &self.store_config)
            .finish_non_exhaustive()
    }
}

/// Builds the service the configuration describes, on one store: connects to Redis, or
/// starts the memory store's sweeper (so call it inside a Tokio runtime).
pub async fn service(config: &Config) -> Result<Service, StoreError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let (store, watch) = store(&config.store, clock.clone()).await?;
    let service = Service::with_store(config, store, clock);
    service.metrics.watch_store(watch);
    Ok(service)
}

impl Service {
    /// The service of `config` on a store made by the caller, reading time from
    /// `clock`: how tests run the gateway in process, on a memory store with a manual
    /// clock. Reloads are not available without the store's configuration.
    pub fn with_store(config: &Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let metrics = Arc::new(Metrics::new(clock.clone()));
        metrics.serving_config(&config.sha256);
        let ready = Arc::clone(&store);
        metrics.watch_store(StoreWatch {
            kind: config.store.kind().label(),
            up: Box::new(move || ready.is_ready()),
            breaker_open: None,
            slots_lost: None,
        });
        let engine = Arc::new(Engine::with_metrics(
            &config.engine,
            store.clone(),
            clock.clone(),
            Arc::clone(&metrics),
        ));
        Service {
            admin: config.admin.clone().map(shared),
            envoy: config
                .envoy
                .as_ref()
                .map(|envoy| shared(envoy.descriptors.clone())),
            metrics,
            gateway: config
                .gateway
                .clone()
                .map(|g| shared(Gateway::new(g, Arc::clone(&engine)))),
            auth: config
                .auth
                .clone()
                .map(|auth| shared(AuthDoor::new(auth, &config.client_ip, Arc::clone(&engine)))),
            engine: EngineHandle::from_arc(engine),
            store,
            store_config: config.store.clone(),
            config_sha256: config.fingerprint(),
            envoy_dir: config.envoy.as_ref().map(|envoy| envoy.dir.clone()),
            clock,
        }
    }
}

/// The decision API, `/healthz`, `/readyz` and `/metrics`; with an `envoy` section,
/// envoyproxy/ratelimit's `POST /json` too: what `--listen` answers when there is no
/// gateway.
pub fn decision_router(service: &Service) -> axum::Router {
    let api = crate::api::router(service.engine.clone());
    match envoy_door(service) {
        Some(door) => api.merge(crate::envoy::json_router(door)),
        None => api,
    }
}

/// What the admin listener answers: [`decision_router`]'s routes, and the admin API
/// and status page when the configuration has an `admin` section.
pub fn admin_router(service: &Service) -> axum::Router {
    let api = decision_router(service);
    match &service.admin {
        Some(admin) => api.merge(crate::admin::router(
            service.engine.clone(),
            Arc::clone(admin),
        )),
        None => api,
    }
}

/// The Envoy door of the service, when the configuration has an `envoy` section:
/// what `serve_grpc` serves.
pub fn envoy_door(service: &Service) -> Option<RateLimitDoor> {
    let descriptors = service.envoy.as_ref()?;
    Some(RateLimitDoor::new(
        service.engine.clone(),
        Arc::clone(descriptors),
    ))
}

/// The store the configuration describes, and how the metrics watch it.
pub(crate) async fn store(
    config: &StoreConfig,
    clock: Arc<dyn Clock>,
) -> Result<(Arc<dyn Store>, StoreWatch), StoreError> {
    Ok(match config {
        StoreConfig::Redis(redis, _) => {
            // Start connected when Redis is there; serve degraded (each rule's failure
            // policy) when it is not: the store's health loop connects in the
            // background, logs the loss and the return, and closes the breaker as soon
            // as Redis answers.
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
