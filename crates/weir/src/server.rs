//! Running the service: the store the configuration asks for, the HTTP servers, and
//! reloading the configuration without dropping requests.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;
use tower::ServiceExt;
use weir_core::Clock;
use weir_store::{Breaker, BreakerConfig, MemoryStore, RedisStore, Store, StoreError, SystemClock};

use crate::config::{Config, ConfigError, StoreConfig};
use crate::engine::Engine;
use crate::gateway::Gateway;

/// How often the memory store gives back the memory of keys that are full again.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// How often the configuration file is looked at for changes.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// A value that handlers read per request and a reload replaces whole: requests in
/// flight keep the value they started with.
pub type Shared<T> = Arc<ArcSwap<T>>;

/// Wraps a value for [`Shared`] use.
pub fn shared<T>(value: T) -> Shared<T> {
    Arc::new(ArcSwap::from_pointee(value))
}

/// What `weir serve` runs: the engine (decision API) and, with an upstream, the gateway.
pub struct Service {
    /// The engine behind the decision API.
    pub engine: Shared<Engine>,
    /// The gateway, when the configuration has an `upstream`.
    pub gateway: Option<Shared<Gateway>>,
    store: Arc<dyn Store>,
    store_config: StoreConfig,
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
    let store = store(&config.store, clock.clone()).await?;
    Ok(Service::with_store(config, store, clock))
}

impl Service {
    /// The service of `config` on a store made by the caller, reading time from
    /// `clock`: how tests run the gateway in process, on a memory store with a manual
    /// clock. Reloads are not available without the store's configuration.
    pub fn with_store(config: &Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let engine = Arc::new(Engine::new(config, store.clone(), clock.clone()));
        Service {
            gateway: config
                .gateway
                .clone()
                .map(|g| shared(Gateway::new(g, Arc::clone(&engine)))),
            engine: Arc::new(ArcSwap::new(engine)),
            store,
            store_config: config.store.clone(),
            clock,
        }
    }
}

/// The store the configuration describes.
async fn store(config: &StoreConfig, clock: Arc<dyn Clock>) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match config {
        StoreConfig::Redis(redis, _) => {
            let store = RedisStore::start(redis, clock);
            // Start connected when Redis is there; serve degraded (each rule's failure
            // policy) when it is not, and connect in the background.
            if !store
                .wait_connected(redis.timeout.max(Duration::from_secs(2)))
                .await
            {
                tracing::warn!(
                    "Redis is unreachable: serving under each rule's failure policy until it is back"
                );
            }
            Arc::new(Breaker::new(store, BreakerConfig::default()))
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
            store
        }
    })
}

/// Why a new configuration was refused (the old one keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Its store cannot be opened.
    #[error("cannot open the new store: {0}")]
    Store(#[from] StoreError),
    /// It would switch between gateway and decision-API mode, which changes listeners.
    #[error("adding or removing `upstream` needs a restart")]
    ModeChange,
}

impl Service {
    /// Replaces the configuration with the one at `path`, if it is valid: requests in
    /// flight finish on the old one, new requests get the new one. The store is kept
    /// (with its state) when its section is unchanged.
    pub async fn reload(&mut self, path: &Path) -> Result<(), ReloadError> {
        let config = Config::load(path)?;
        if config.gateway.is_some() != self.gateway.is_some() {
            return Err(ReloadError::ModeChange);
        }
        if config.store != self.store_config {
            self.store = store(&config.store, self.clock.clone()).await?;
            self.store_config = config.store.clone();
        }
        let engine = Arc::new(Engine::new(&config, self.store.clone(), self.clock.clone()));
        self.engine.store(Arc::clone(&engine));
        if let (Some(shared), Some(gateway)) = (&self.gateway, config.gateway) {
            shared.store(Arc::new(Gateway::new(gateway, engine)));
        }
        Ok(())
    }

    /// Reloads on SIGHUP and whenever the file changes (checked every second), until
    /// the process ends. A refused configuration is logged; the old one keeps serving.
    pub async fn watch(mut self, path: PathBuf) {
        let fingerprint = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        };
        let mut seen = fingerprint(&path);
        let mut hangups = hangups();
        let mut every = tokio::time::interval(WATCH_EVERY);
        loop {
            let cause = tokio::select! {
                _ = hangups.recv() => "SIGHUP",
                _ = every.tick() => {
                    let now = fingerprint(&path);
                    if now == seen { continue }
                    seen = now;
                    "the file changed"
                }
            };
            match self.reload(&path).await {
                Ok(()) => tracing::info!(cause, file = %path.display(), "configuration reloaded"),
                Err(error) => {
                    tracing::error!(cause, %error, "new configuration refused; the old one keeps serving")
                }
            }
        }
    }
}

/// SIGHUPs as a stream (nothing where there are no signals).
fn hangups() -> tokio::sync::mpsc::Receiver<()> {
    let (send, receive) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else {
            return;
        };
        while hangup.recv().await.is_some() {
            if send.send(()).await.is_err() {
                break;
            }
        }
    });
    #[cfg(not(unix))]
    drop(send);
    receive
}

/// Limits on what a client may do with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The longest a client may take to send a request's headers (slow clients, and
    /// idle keep-alive connections, are closed after it).
    pub header_timeout: Duration,
    /// The most bytes of request headers read (more is answered `431`).
    pub max_header_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
        }
    }
}

/// Binds `count` listening sockets to one address (`SO_REUSEPORT`: the kernel spreads
/// connections over them), for one server thread each. Port 0 picks one free port
/// for all.
pub fn bind_shared(
    address: SocketAddr,
    count: usize,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    // SO_REUSEPORT would let a second weir (of the same user) share a port that is
    // already in use and split its traffic silently: refuse a port in use first.
    if address.port() != 0 {
        drop(std::net::TcpListener::bind(address)?);
    }
    let mut listeners: Vec<std::net::TcpListener> = Vec::with_capacity(count.max(1));
    let mut address = address;
    for _ in 0..count.max(1) {
        let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        #[cfg(unix)]
        socket.set_reuse_port(true)?;
        socket.bind(&address.into())?;
        socket.listen(1024)?;
        socket.set_nonblocking(true)?;
        let listener: std::net::TcpListener = socket.into();
        address = listener.local_addr()?;
        listeners.push(listener);
        if cfg!(not(unix)) {
            break;
        }
    }
    Ok(listeners)
}

/// What answers a listener's requests: the decision API's axum [`Router`], or the
/// gateway called directly (every request goes to it, so it needs no routing).
pub trait Handler: Clone + Send + Sync + 'static {
    /// The answer to `request`, which came from `peer`.
    fn call(
        &self,
        request: Request<Body>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<Self>;
}

impl Handler for Router {
    fn call(
        &self,
        mut request: Request<Body>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<> {
        request.extensions_mut().insert(ConnectInfo(peer));
        let answer = self.clone().oneshot(request);
        async move {
            match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

impl Handler for Shared<Gateway> {
    fn call(
        &self,
        request: Request<Body>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<> {
        // The gateway as configured now: a reload while the request runs does not
        // affect it.
        crate::gateway::handle(self.load_full(), peer, request)
    }
}

/// Serves `handler` on each listener from its own thread, each with a single-threaded
/// runtime: a request, its checks and its upstream connection stay on one thread
/// (no hand-offs between threads), as nginx's workers do. Returns when `stopped`
/// fires and every thread has finished its requests in flight.
pub fn serve_on_threads(
    listeners: Vec<std::net::TcpListener>,
    handler: impl Handler,
    limits: ConnectionLimits,
    stopped: tokio::sync::watch::Receiver<()>,
) -> std::io::Result<Vec<std::thread::JoinHandle<std::io::Result<()>>>> {
    listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let (handler, mut stopped) = (handler.clone(), stopped.clone());
            std::thread::Builder::new()
                .name(format!("weir-http-{i}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    runtime.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        let shutdown = async move {
                            let _ = stopped.changed().await;
                        };
                        serve(listener, handler, limits, shutdown).await
                    })
                })
        })
        .collect()
}

/// Serves `handler` on `listener` until `shutdown` completes: then stops accepting,
/// finishes the requests in flight, and returns.
pub async fn serve(
    listener: TcpListener,
    handler: impl Handler,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers go out as soon as they are written (no Nagle delay on small ones).
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let answer = handler.call(request.map(Body::new), peer);
            async move { Ok::<_, std::convert::Infallible>(answer.await) }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(limits.max_header_bytes.max(8192))
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
