//! weir, the service: configuration, the engine, and the HTTP front doors.
//!
//! The modules form a stack; each uses only those below it:
//!
//! ```text
//! server                  listeners, threads, reloads: builds the rest from a Config
//! gateway api admin layer the front doors: HTTP in, the engine asked, HTTP out
//! auth                    the forward-auth door: a proxy's subrequest in, the engine asked
//! envoy                   the Envoy door: gRPC ShouldRateLimit in, the engine asked
//! fleet                   `weir simulate fleet`: gateways' engines on simulated stores
//! step                    the one request step every HTTP door takes (read, decide, go on or stop)
//! config   edge           YAML -> the specs below | what HTTP doors share (answers, bodies)
//! engine                  every decision, whichever door asked (EngineSpec, EngineHandle)
//! request  metrics        reading a request one way | what is counted
//! weir-store, weir-core   stores | algorithms
//! ```
//!
//! The binary (`weir serve`, `weir check-config`, and `weir simulate` from the
//! `weir-simulate` crate behind the default `simulate` feature) is a thin layer over
//! this library, which tests use directly ([`api_router`] serves requests without a
//! socket). An engine is built in process from a configuration:
//!
//! ```
//! use std::path::Path;
//! use std::sync::Arc;
//!
//! use weir::{Config, Engine};
//! use weir_core::ManualClock;
//! use weir_store::{MemoryStore, MemoryStoreConfig};
//!
//! let yaml = "rules:\n  - name: api\n    algorithm: gcra\n    limit: 2\n    period: 1m\n";
//! let config = Config::parse(yaml, Path::new("inline.yaml"))?;
//! let clock = Arc::new(ManualClock::new(0));
//! let store = Arc::new(MemoryStore::new(MemoryStoreConfig::default(), clock.clone()));
//! let engine = Engine::new(&config.engine, store, clock);
//!
//! let rule = engine.rule("api").expect("configured above");
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let allowed: Vec<bool> = runtime.block_on(async {
//!     let mut allowed = Vec::new();
//!     for _ in 0..3 {
//!         allowed.push(engine.check(rule, "user-42", 1).await?.allowed);
//!     }
//!     Ok::<_, weir_store::StoreError>(allowed)
//! })?;
//! assert_eq!(allowed, [true, true, false]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod admin;
mod api;
mod auth;
mod config;
mod edge;
mod engine;
mod envoy;
#[cfg(feature = "simulate")]
pub mod fleet;
mod gateway;
mod layer;
mod metrics;
mod request;
mod server;
mod step;

pub use self::api::{
    MAX_BODY_BYTES, MAX_DECIDE_BYTES, MAX_KEY_BYTES, SETTLE_WITHIN, router as api_router,
};
pub use self::auth::{AuthDoor, router as auth_router};
pub use self::config::EnvoyConfig;
pub use self::config::{AUTH_PATH, AuthConfig, Convention, Reservations};
pub use self::config::{
    AdminConfig, Config, ConfigBuilder, ConfigError, DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT, Fallback,
    GatewayConfig, MAX_RULE_NAME, Period, PeriodError, RuleBuilder, SheddingConfig, StoreConfig,
    Upstream,
};
pub use self::edge::{ConnectionSlots, SHADOW_HEADER};
pub use self::engine::{
    AlsoLimit, CurrentLimit, DescriptorAnswer, DescriptorAsk, DescriptorLimit, Descriptors, Engine,
    EngineHandle, EngineSpec, EnvoyAnswer, EnvoyAsk, NamedPolicy, NodeId, Quota, StoreKind,
    TreeError, Unit,
};
pub use self::envoy::{RateLimitDoor, SharedDescriptors, serve_grpc};
pub use self::gateway::Gateway;
pub use self::layer::{WeirLayer, WeirService};
pub use self::metrics::CONTENT_TYPE as METRICS_CONTENT_TYPE;
pub use self::request::client_ip;
pub use self::server::{
    ConnectionLimits, Handler, ReloadError, Service, Shared, admin_router, bind_shared,
    decision_router, envoy_door, serve, serve_grpc_on_threads, serve_on_threads, service, shared,
};
