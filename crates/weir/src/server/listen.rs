//! Answering connections: binding the listening sockets, what answers a request (the
//! [`Handler`]), and HTTP on a listener: the protocol the accept loop ([`Accept`])
//! runs with its bounded headers, send timeout and graceful stop. The admin and auth
//! listeners speak HTTP/1.1 ([`serve`]); the main one HTTP/1.1 and HTTP/2, over TLS
//! when configured ([`serve_main`]).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::server::graceful::Watcher;
use socket2::{Domain, Socket, Type};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::edge::{
    Accept, Auto, AutoConnection, Connection, ConnectionSlots, Http1, Http1Connection,
    IDLE_TIMEOUT, Io, OverTls, Protocol, SEND_TIMEOUT, Tls, Version,
};
use crate::gateway::Gateway;
use crate::reloadable::Reloadable;

/// Limits on what a client may do with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The longest a client may take to send a request's headers (slow clients, and
    /// idle keep-alive connections, are closed after it).
    pub header_timeout: Duration,
    /// The most bytes of request headers read (more is answered `431`).
    pub max_header_bytes: usize,
    /// The longest a connection's writes may make no progress (a client that stops
    /// reading its answers is closed after it).
    pub send_timeout: Duration,
    /// How long an HTTP/2 connection of the main listener may have no request in
    /// flight before it is closed.
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            send_timeout: SEND_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
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

impl Handler for Reloadable<Gateway> {
    fn call(
        &self,
        request: Request<Body>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response> + Send + use<> {
        // The gateway as configured now: a reload while the request runs does not
        // affect it.
        crate::gateway::handle(self.current(), peer, request)
    }
}

/// Serves `handler` on `listener`, holding at most as many connections at once as
/// `slots` has, until `shutdown` completes: then stops accepting, finishes the
/// requests in flight, and returns.
pub async fn serve(
    listener: TcpListener,
    handler: impl Handler,
    limits: ConnectionLimits,
    slots: ConnectionSlots,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let http = Http {
        handler,
        version: Http1 {
            header_timeout: limits.header_timeout,
            max_header_bytes: limits.max_header_bytes,
        },
        tls: false,
    };
    Accept::new(slots, limits.send_timeout)
        .serve(listener, http, shutdown)
        .await
}

/// Serves `handler` on the main listener `listener`: HTTP/1.1 and HTTP/2 (h2c with
/// prior knowledge, or h2 by ALPN), over TLS with the settings `tls` holds now (each
/// handshake within the header timeout), else over plain TCP; otherwise as [`serve`].
pub fn serve_main(
    listener: TcpListener,
    handler: impl Handler,
    limits: ConnectionLimits,
    tls: Option<Reloadable<rustls::ServerConfig>>,
    slots: ConnectionSlots,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = std::io::Result<()>> {
    let http = Http {
        handler,
        version: Auto {
            header_timeout: limits.header_timeout,
            max_header_bytes: limits.max_header_bytes,
            idle_timeout: limits.idle_timeout,
        },
        tls: tls.is_some(),
    };
    let accept = Accept::new(slots, limits.send_timeout);
    async move {
        match tls {
            Some(config) => {
                let tls = Tls::new(config, limits.header_timeout);
                accept.over(tls).serve(listener, http, shutdown).await
            }
            None => accept.serve(listener, http, shutdown).await,
        }
    }
}

/// HTTP answered by a [`Handler`], in the version `V`: what the HTTP listeners speak.
struct Http<H, V> {
    handler: H,
    version: V,
    /// Whether its connections come over TLS (their requests are marked [`OverTls`]).
    tls: bool,
}

impl<H: Handler, V: Version + Copy> Protocol for Http<H, V>
where
    Requests<H>: Connection<V>,
{
    type Version = V;
    type Connection = Requests<H>;

    fn version(&self) -> V {
        self.version
    }

    fn connection(&self, peer: SocketAddr) -> Requests<H> {
        Requests {
            handler: self.handler.clone(),
            peer,
            tls: self.tls,
        }
    }
}

/// One connection's requests, answered by `handler`.
struct Requests<H> {
    handler: H,
    peer: SocketAddr,
    tls: bool,
}

impl<H: Handler> Requests<H> {
    /// The connection's hyper service: each request (each HTTP/2 stream) answered by
    /// the handler on its own.
    fn service(
        self,
    ) -> impl hyper::service::Service<
        Request<Incoming>,
        Response = Response,
        Error = std::convert::Infallible,
        Future = impl Future<Output = Result<Response, std::convert::Infallible>> + Send + 'static,
    > + Send
    + 'static {
        let Self { handler, peer, tls } = self;
        service_fn(move |mut request: Request<Incoming>| {
            if tls {
                request.extensions_mut().insert(OverTls);
            }
            let answer = handler.call(request.map(Body::new), peer);
            async move { Ok::<_, std::convert::Infallible>(answer.await) }
        })
    }
}

impl<H: Handler> Connection<Http1> for Requests<H> {
    async fn serve<I: Io>(self, connection: Http1Connection<I>, graceful: Watcher) {
        let _ = graceful.watch(connection.serve(self.service())).await;
    }
}

impl<H: Handler> Connection<Auto> for Requests<H> {
    async fn serve<I: Io>(self, connection: AutoConnection<I>, graceful: Watcher) {
        connection.serve(self.service(), graceful).await;
    }
}
