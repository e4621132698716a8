//! Answering connections: binding the listening sockets, what answers a request (the
//! [`Handler`]), and serving HTTP/1.1 on a listener with bounded headers and a graceful
//! stop.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

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

use super::Shared;
use crate::edge::{ConnectionSlots, SEND_TIMEOUT, WriteStall};
use crate::gateway::Gateway;

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
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            send_timeout: SEND_TIMEOUT,
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
        // Served once a slot is free (every thread shares the slots, and each holds
        // the one connection it accepted: a slot freed on another thread is not kept
        // waiting for a connection queued on this thread's socket).
        let slot = tokio::select! {
            slot = slots.take() => slot,
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
            .serve_connection(
                TokioIo::new(WriteStall::new(stream, limits.send_timeout)),
                service,
            );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
