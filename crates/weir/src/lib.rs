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
//! stack                   the store stack, built in one place: a StoreConfig in, a StoreStack out
//! config   edge           YAML -> the specs | what doors share (answers, bodies, accept loop)
//! engine                  every decision, whichever door asked (EngineSpec in, Verdict out)
//! request  metrics        reading a request one way | what is counted
//! weir-store, weir-core   stores | algorithms
//! ```
//!
//! # What you build with
//!
//! - **An engine in code**: a [`Config`] read from YAML ([`Config::parse`],
//!   [`Config::load`]) or built ([`ConfigBuilder`], [`RuleBuilder`], [`CalendarPeriod`]), then
//!   [`Engine::new`] on a store of `weir_store` and a clock of `weir_core`, and
//!   [`Engine::check`] to ask for one rule and one key, as `POST /v1/check` does.
//! - **An engine on the configured store**: [`instance`] opens the store the
//!   configuration names (memory, or Redis with its health loop and breaker, the
//!   fallback, leases and regions) and builds the engine on it, an [`Instance`] whose
//!   `engine` the layer takes (`examples/axum_app.rs`).
//! - **The tower layer**: [`WeirLayer`] around an axum (or any tower HTTP) service,
//!   deciding every request as the gateway does; [`Reloadable`] lets a reload replace
//!   the engine under it.
//!
//! Everything else this crate exports is what the `weir` binary and weir's own tests
//! are built from (the server, its listeners and routers); it is hidden from these
//! docs and is not a stable API.
//!
//! The binary (`weir serve`, `weir check-config`, and `weir simulate` from the
//! `weir-simulate` crate behind the default `simulate` feature) is a thin layer over
//! this library. An engine is built in process from a configuration:
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
#[doc(hidden)]
pub mod demo;
mod edge;
mod engine;
mod envoy;
#[cfg(feature = "simulate")]
#[doc(hidden)]
pub mod fleet;
mod gateway;
mod layer;
mod metrics;
mod reloadable;
mod request;
mod server;
mod stack;
mod step;

pub use self::config::{CalendarPeriod, Config, ConfigBuilder, ConfigError, RuleBuilder};
pub use self::engine::{Engine, EngineSpec, NamedPolicy};
pub use self::layer::{WeirLayer, WeirService};
pub use self::reloadable::Reloadable;
pub use self::server::{Instance, instance};

// What the binary and the tests are built from: not an embedding API.
#[doc(hidden)]
pub use self::admin::{CommandError, ListsArgs, OverrideArgs, run_lists, run_override};
#[doc(hidden)]
pub use self::api::router as api_router;
#[doc(hidden)]
pub use self::config::{Fallback, StoreConfig};
#[doc(hidden)]
pub use self::edge::ConnectionSlots;
#[doc(hidden)]
pub use self::engine::SETTLE_WITHIN;
#[doc(hidden)]
pub use self::envoy::{RateLimitDoor, serve_grpc};
#[doc(hidden)]
pub use self::gateway::Gateway;
#[doc(hidden)]
pub use self::metrics::{CONTENT_TYPE as METRICS_CONTENT_TYPE, Metrics};
#[doc(hidden)]
pub use self::request::client_ip;
#[doc(hidden)]
pub use self::server::{
    ConnectionLimits, Handler, ReloadError, admin_router, auth_router, bind_shared,
    decision_router, default_auth_router, envoy_door, serve, serve_grpc_on_threads, serve_main,
    serve_main_on_threads, serve_on_threads,
};
