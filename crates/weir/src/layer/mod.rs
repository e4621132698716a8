//! weir inside your service: the tower layer (see [`WeirLayer`]).

mod service;

use std::sync::Arc;

use tower::Layer;

pub use self::service::WeirService;
use crate::config::{BODY_TIMEOUT, Config, MAX_BODY_BYTES, MAX_BUFFERED_BYTES};
use crate::edge::BodyReader;
use crate::engine::Engine;
use crate::reloadable::Reloadable;
use crate::step::RequestStep;

/// weir inside your service: a tower [`Layer`] that enforces weir's rules on the
/// requests an axum (or any tower HTTP) service receives, in process.
///
/// It is a front door like the gateway, built on the engine alone: the request's head
/// is read one way (as the gateway reads it: the request step), its body only when a rule keys on
/// a body field, the engine decides, and a stopping verdict is answered as every door
/// answers it (429 with `Retry-After` and the RateLimit fields, 400/415/421, or a 503
/// under each rule's failure policy, all problem+json). An allowed request goes on to
/// the inner service with its canonical target, the RateLimit fields are added to the
/// inner service's answer, and rules counted by outcome (`count_statuses`) are settled
/// with that answer's status.
///
/// Wrap the whole router (`WeirLayer::new(..).layer(router)`, or `ServiceBuilder`), not
/// `Router::layer`: axum runs route layers after routing, so the router would route
/// the target as sent while weir decided on its canonical form.
///
/// The client's address is the connection's (axum's `ConnectInfo<SocketAddr>`, which
/// `into_make_service_with_connect_info::<SocketAddr>()` provides), read through the
/// configuration's `client_ip` section (trusted proxies). Without it no rule could be
/// keyed on the client, so such a request is answered 500: weir never guesses an
/// address.
///
///
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
///
/// use axum::{Router, routing::get};
/// use tower::{Layer, ServiceExt};
/// use weir::{Config, Engine, Reloadable, WeirLayer};
/// use weir_core::ManualClock;
/// use weir_store::{MemoryStore, MemoryStoreConfig};
///
/// let yaml = "rules:\n  - name: api\n    match: { path_prefix: /books }\n    algorithm: gcra\n    limit: 1\n    period: 1m\n";
/// let config = Config::parse(yaml, Path::new("inline.yaml"))?;
/// let clock = Arc::new(ManualClock::new(0));
/// let store = Arc::new(MemoryStore::new(MemoryStoreConfig::default(), clock.clone()));
/// let engine = Reloadable::new(Engine::new(&config.engine, store, clock));
///
/// // Around the whole router: weir decides before it routes.
/// let app = WeirLayer::new(&config, engine).layer(Router::new().route("/books", get(|| async { "a book" })));
///
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let statuses = runtime.block_on(async {
///     let mut statuses = Vec::new();
///     for _ in 0..2 {
///         let request = axum::http::Request::get("/books")
///             .header("host", "api.example")
///             // What `into_make_service_with_connect_info` adds to every request.
///             .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from(([192, 0, 2, 1], 5000))))
///             .body(axum::body::Body::empty())?;
///         statuses.push(app.clone().oneshot(request).await?.status().as_u16());
///     }
///     Ok::<_, Box<dyn std::error::Error>>(statuses)
/// })?;
/// assert_eq!(statuses, [200, 429]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct WeirLayer {
    engine: Reloadable<Engine>,
    step: Arc<RequestStep>,
}

impl WeirLayer {
    /// A layer deciding on `engine` (reloads replace it for every request from then
    /// on), reading clients by `config`'s `client_ip` section. Bodies, read only when a
    /// rule keys on a body field, are bounded by the `upstream` section's
    /// `max_body_bytes`, `body_timeout` and `max_buffered_bytes` when it has them, else
    /// 64 KiB, 10 s and 64 MiB.
    pub fn new(config: &Config, engine: Reloadable<Engine>) -> Self {
        let bodies = match &config.gateway {
            Some(gateway) => {
                let upstream = &gateway.upstream;
                BodyReader::new(
                    upstream.max_body_bytes,
                    upstream.body_timeout,
                    upstream.max_buffered_bytes,
                )
            }
            None => BodyReader::new(MAX_BODY_BYTES, BODY_TIMEOUT, MAX_BUFFERED_BYTES),
        };
        Self {
            engine,
            step: Arc::new(RequestStep::new(config.client_ip.clone(), bodies)),
        }
    }
}

impl<S> Layer<S> for WeirLayer {
    type Service = WeirService<S>;

    fn layer(&self, inner: S) -> WeirService<S> {
        WeirService::new(inner, self.engine.clone(), Arc::clone(&self.step))
    }
}
