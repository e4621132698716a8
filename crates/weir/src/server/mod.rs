//! Running the service: the store the configuration asks for, the engine and gateway on
//! it, and reloading them without dropping requests. `listen` answers connections,
//! `workers` runs one server thread per core, `reload` swaps the configuration.

mod listen;
mod openapi;
mod reload;
mod workers;

use std::sync::Arc;

use weir_core::Clock;
use weir_store::{BackingStore, StoreError, SystemClock};

pub use self::listen::{ConnectionLimits, Handler, bind_shared, serve, serve_main};
pub use self::reload::ReloadError;
pub use self::workers::{serve_grpc_on_threads, serve_main_on_threads, serve_on_threads};
use crate::auth::AuthDoor;
use crate::config::{AdminConfig, Config, StoreConfig, TlsConfig};
use crate::edge::{Certificates, server_config};
use crate::engine::Descriptors;
use crate::engine::{Engine, OverrideBacking, Overrides, Owed};
use crate::envoy::RateLimitDoor;
use crate::gateway::Gateway;
use crate::metrics::{Metrics, StoreWatch};
use crate::reloadable::Reloadable;
use crate::stack;

/// What `weir serve` runs: the engine (decision API) and, with an upstream, the gateway.
pub struct Instance {
    /// The engine behind every door.
    pub engine: Reloadable<Engine>,
    /// The gateway, when the configuration has an `upstream`.
    pub gateway: Option<Reloadable<Gateway>>,
    /// The admin API's settings, when configured: a reload may change the token, not
    /// add or remove the section (the listener is opened at start).
    pub(crate) admin: Option<Reloadable<AdminConfig>>,
    /// The descriptors of Envoy's rate limit service, when the configuration has an
    /// `envoy` section: a reload may change them, not add or remove the section (the
    /// gRPC listener is opened at start).
    pub(crate) envoy: Option<Reloadable<Descriptors>>,
    /// The forward-auth door, when the configuration has an `auth` section: a reload
    /// may change it, not add or remove the section (`--auth-listen` is opened at
    /// start).
    pub(crate) auth: Option<Reloadable<AuthDoor>>,
    /// The main listener's TLS settings, when the configuration has a `tls` section:
    /// a reload may change its certificates, not add or remove the section (the
    /// listener's transport is chosen at start).
    pub tls: Option<Reloadable<rustls::ServerConfig>>,
    /// What the service counts, kept across reloads.
    pub metrics: Arc<Metrics>,
    /// The primary store (the bottom of the stack), kept by a reload that does not
    /// change its section.
    store: Arc<dyn BackingStore>,
    store_config: StoreConfig,
    /// Settlements owed to the shared store, kept across reloads (made with the first
    /// shared store).
    owed: Option<Arc<Owed>>,
    /// The overrides set at runtime, kept across reloads (where they are kept is
    /// chosen at start).
    overrides: Arc<Overrides>,
    /// The file they are kept in, as configured at start.
    overrides_file: Option<std::path::PathBuf>,
    /// The SHA-256 of the configuration serving now (a reload compares the file's).
    /// (`Config::fingerprint`: with an `envoy` section, its directory's too.)
    config_sha256: String,
    /// The envoy directory serving now, watched for changes with the file.
    envoy_dir: Option<std::path::PathBuf>,
    /// The certificate files serving now, watched for changes with the file.
    watched_files: Vec<std::path::PathBuf>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("gateway", &self.gateway.is_some())
            .field("store", &self.store_config)
            .finish_non_exhaustive()
    }
}

/// Builds the service the configuration describes, on one store: connects to Redis, or
/// starts the memory store's sweeper (so call it inside a Tokio runtime).
pub async fn instance(config: &Config) -> Result<Instance, StoreError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let (store, watch) = stack::open(&config.store, clock.clone()).await?;
    let backing = match (&config.store, &config.overrides_file) {
        // Their own connection (and health loop) to the shared store: polls and admin
        // writes never queue behind checks, nor trip the checks' breaker.
        (StoreConfig::Redis(redis, _), _) => {
            let shared = weir_store::RedisStore::start(redis, clock.clone());
            // As the checks' store does: start with what Redis holds when it is there.
            shared
                .wait_connected(redis.timeout.max(std::time::Duration::from_secs(2)))
                .await;
            OverrideBacking::Shared(shared)
        }
        (StoreConfig::Memory(_), Some(file)) => OverrideBacking::File(file.clone()),
        (StoreConfig::Memory(_), None) => OverrideBacking::InProcess,
    };
    let overrides = Overrides::open(backing, clock.clone())
        .await
        .map_err(|e| StoreError::Protocol(format!("overrides: {e}")))?;
    let service = Instance::build(config, store, clock, overrides);
    service.metrics.watch_store(watch);
    Ok(service)
}

impl Instance {
    /// Whether it serves the admin API (the configuration has an `admin` section).
    pub fn has_admin(&self) -> bool {
        self.admin.is_some()
    }

    /// The service of `config` on a primary store made by the caller (the stack of
    /// `config` built on it), reading time from `clock`: how tests run the gateway in
    /// process, on a memory store with a manual clock. Reloads are not available
    /// without the store's configuration.
    pub fn with_store(
        config: &Config,
        store: Arc<dyn BackingStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let initial = match &config.overrides_file {
            Some(file) => crate::engine::read_overrides_file(file).unwrap_or_else(|error| {
                tracing::error!(%error, "overrides: the file cannot be read; starting without");
                Default::default()
            }),
            None => Default::default(),
        };
        let backing = match &config.overrides_file {
            Some(file) => OverrideBacking::File(file.clone()),
            None => OverrideBacking::InProcess,
        };
        let overrides = Arc::new(Overrides::new(backing, initial, clock.clone()));
        Self::build(config, store, clock, overrides)
    }

    /// The service of `config` on `store`, with the process's `overrides`.
    fn build(
        config: &Config,
        store: Arc<dyn BackingStore>,
        clock: Arc<dyn Clock>,
        overrides: Arc<Overrides>,
    ) -> Self {
        let metrics = Arc::new(Metrics::new(clock.clone()));
        metrics.serving_config(&config.sha256);
        let ready = Arc::clone(&store);
        metrics.watch_store(StoreWatch {
            kind: config.store.kind().label(),
            up: Box::new(move || ready.is_ready()),
            breaker_open: None,
            slots_lost: None,
        });
        let owed = config
            .engine
            .store
            .is_shared()
            .then(|| Owed::new(config.engine.max_owed, clock.clone(), &metrics));
        let stack = stack::build(
            &config.engine,
            Arc::clone(&store),
            &clock,
            &metrics,
            owed.as_ref(),
        );
        let counted = Arc::downgrade(&overrides);
        // A rule whose last override went reads 0, rather than losing its series.
        let seen = parking_lot::Mutex::new(std::collections::BTreeSet::new());
        metrics.watch_overrides(Box::new(move || {
            let mut counts = counted
                .upgrade()
                .map(|book| book.in_force_by_rule())
                .unwrap_or_default();
            let mut seen = seen.lock();
            seen.extend(counts.iter().map(|(rule, _)| rule.clone()));
            for rule in seen.iter() {
                if !counts.iter().any(|(r, _)| r == rule) {
                    counts.push((rule.clone(), 0));
                }
            }
            counts
        }));
        let engine = Arc::new(
            Engine::with_stack(&config.engine, stack, clock.clone(), Arc::clone(&metrics))
                .with_overrides(Arc::clone(&overrides)),
        );
        Instance {
            admin: config.admin.clone().map(Reloadable::new),
            envoy: config
                .envoy
                .as_ref()
                .map(|envoy| Reloadable::new(envoy.descriptors.clone())),
            metrics,
            gateway: config
                .gateway
                .clone()
                .map(|g| Reloadable::new(Gateway::new(g, Arc::clone(&engine)))),
            auth: config.auth.clone().map(|auth| {
                Reloadable::new(AuthDoor::new(auth, &config.client_ip, Arc::clone(&engine)))
            }),
            engine: Reloadable::from_arc(engine),
            tls: config
                .tls
                .as_ref()
                .map(|tls| Reloadable::new(tls_settings(tls))),
            store,
            store_config: config.store.clone(),
            owed,
            overrides,
            overrides_file: config.overrides_file.clone(),
            config_sha256: config.fingerprint(),
            envoy_dir: config.envoy.as_ref().map(|envoy| envoy.dir.clone()),
            watched_files: config.watched_files(),
            clock,
        }
    }
}

/// The main listener's TLS settings for the certificates of `tls`.
fn tls_settings(tls: &TlsConfig) -> rustls::ServerConfig {
    let certificates = Certificates::new(tls.certificates.iter().cloned());
    #[expect(
        clippy::expect_used,
        reason = "ring's provider has the cipher suites of TLS 1.2 and 1.3: nothing else fails"
    )]
    server_config(certificates).expect("TLS 1.2 and 1.3 on ring")
}

/// The decision API, `/healthz`, `/readyz` and `/metrics`; with an `envoy` section,
/// envoyproxy/ratelimit's `POST /json` too: what `--listen` answers when there is no
/// gateway.
/// `GET /openapi.json` describes them.
pub fn decision_router(service: &Instance) -> axum::Router {
    let parts = openapi::Parts {
        admin: false,
        auth: service.auth.is_some(),
    };
    decision_routes(service).merge(openapi::route(parts))
}

/// The decision API's routes, and envoyproxy/ratelimit's `POST /json` with an `envoy`
/// section.
fn decision_routes(service: &Instance) -> axum::Router {
    let api = crate::api::router(service.engine.clone());
    match envoy_door(service) {
        Some(door) => api.merge(crate::envoy::json_router(door)),
        None => api,
    }
}

/// What the admin listener answers: [`decision_router`]'s routes, and the admin API
/// and status page when the configuration has an `admin` section; `GET /openapi.json`
/// describes them.
pub fn admin_router(service: &Instance) -> axum::Router {
    let parts = openapi::Parts {
        admin: service.admin.is_some(),
        auth: service.auth.is_some(),
    };
    let api = decision_routes(service).merge(openapi::route(parts));
    match &service.admin {
        Some(admin) => api.merge(crate::admin::router(service.engine.clone(), admin.clone())),
        None => api,
    }
}

/// The forward-auth door's router (`/v1/auth`), when the configuration has an `auth`
/// section: what `--auth-listen` serves.
pub fn auth_router(service: &Instance) -> Option<axum::Router> {
    service
        .auth
        .as_ref()
        .map(|door| crate::auth::router(door.clone()))
}

/// The forward-auth door with a default `auth` section (the `forwarded` convention,
/// loopback proxies), on `service`'s engine, read with `config`'s `client_ip` section:
/// what the door-parity test asks its table of, under a configuration whose rules an
/// `auth` section would refuse (the other doors read bodies and settle outcomes).
pub fn default_auth_router(config: &Config, service: &Instance) -> axum::Router {
    let door = AuthDoor::new(
        crate::config::AuthConfig::default(),
        &config.client_ip,
        service.engine.current(),
    );
    crate::auth::router(Reloadable::new(door))
}

/// The Envoy door of the service, when the configuration has an `envoy` section:
/// what `serve_grpc` serves.
pub fn envoy_door(service: &Instance) -> Option<RateLimitDoor> {
    let descriptors = service.envoy.as_ref()?;
    Some(RateLimitDoor::new(
        service.engine.clone(),
        descriptors.clone(),
    ))
}
