//! One server thread per core, each with its own single-threaded runtime and listening
//! socket.

use std::future::Future;

use tokio::net::TcpListener;

use super::listen::{ConnectionLimits, Handler, serve, serve_main};
use crate::edge::ConnectionSlots;
use crate::reloadable::Reloadable;

/// A server thread's handle: its result once it has finished its work in flight.
type Worker = std::thread::JoinHandle<std::io::Result<()>>;

/// Serves `handler` on each listener from its own thread, each with a single-threaded
/// runtime: a request, its checks and its upstream connection stay on one thread
/// (no hand-offs between threads), as nginx's workers do. The threads share `slots`.
/// Returns when `stopped` fires and every thread has finished its requests in flight.
pub fn serve_on_threads(
    listeners: Vec<std::net::TcpListener>,
    handler: impl Handler,
    limits: ConnectionLimits,
    slots: ConnectionSlots,
    stopped: tokio::sync::watch::Receiver<()>,
) -> std::io::Result<Vec<Worker>> {
    on_threads(
        "weir-http",
        listeners,
        stopped,
        move |listener, shutdown| serve(listener, handler.clone(), limits, slots.clone(), shutdown),
    )
}

/// Serves `handler` on the main listener's sockets as [`serve_on_threads`] serves
/// HTTP/1.1, speaking HTTP/1.1 and HTTP/2, over TLS when `tls` is given
/// ([`serve_main`]).
pub fn serve_main_on_threads(
    listeners: Vec<std::net::TcpListener>,
    handler: impl Handler,
    limits: ConnectionLimits,
    tls: Option<Reloadable<rustls::ServerConfig>>,
    slots: ConnectionSlots,
    stopped: tokio::sync::watch::Receiver<()>,
) -> std::io::Result<Vec<Worker>> {
    on_threads(
        "weir-http",
        listeners,
        stopped,
        move |listener, shutdown| {
            serve_main(
                listener,
                handler.clone(),
                limits,
                tls.clone(),
                slots.clone(),
                shutdown,
            )
        },
    )
}

/// Serves the Envoy door on each listener from its own thread, each with a
/// single-threaded runtime, as [`serve_on_threads`] serves HTTP: a gRPC connection's
/// calls and their store checks stay on one thread. The threads share `slots`.
/// Returns when `stopped` fires and every thread has finished its calls in flight.
pub fn serve_grpc_on_threads(
    listeners: Vec<std::net::TcpListener>,
    door: crate::envoy::RateLimitDoor,
    slots: ConnectionSlots,
    stopped: tokio::sync::watch::Receiver<()>,
) -> std::io::Result<Vec<Worker>> {
    on_threads(
        "weir-grpc",
        listeners,
        stopped,
        move |listener, shutdown| {
            let door = door.clone();
            crate::envoy::serve_grpc(listener, door, slots.clone(), shutdown)
        },
    )
}

/// Runs `serve` on each listener from a thread of its own (named `name-<i>`), each
/// with a single-threaded runtime, until `stopped` fires.
fn on_threads<S, F>(
    name: &str,
    listeners: Vec<std::net::TcpListener>,
    stopped: tokio::sync::watch::Receiver<()>,
    serve: S,
) -> std::io::Result<Vec<Worker>>
where
    S: Fn(TcpListener, std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F
        + Clone
        + Send
        + 'static,
    F: Future<Output = std::io::Result<()>>,
{
    listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let (serve, mut stopped) = (serve.clone(), stopped.clone());
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    runtime.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        let shutdown = Box::pin(async move {
                            let _ = stopped.changed().await;
                        });
                        serve(listener, shutdown).await
                    })
                })
        })
        .collect()
}
