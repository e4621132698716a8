//! One server thread per core, each with its own single-threaded runtime and listening
//! socket.

use tokio::net::TcpListener;

use super::listen::{ConnectionLimits, Handler, serve};

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

/// Serves the Envoy door on each listener from its own thread, each with a
/// single-threaded runtime, as [`serve_on_threads`] serves HTTP: a gRPC connection's
/// calls and their store checks stay on one thread. Returns when `stopped` fires and
/// every thread has finished its calls in flight.
pub fn serve_grpc_on_threads(
    listeners: Vec<std::net::TcpListener>,
    door: crate::envoy::RateLimitDoor,
    stopped: tokio::sync::watch::Receiver<()>,
) -> std::io::Result<Vec<std::thread::JoinHandle<std::io::Result<()>>>> {
    listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let (door, mut stopped) = (door.clone(), stopped.clone());
            std::thread::Builder::new()
                .name(format!("weir-grpc-{i}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    runtime.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        let shutdown = async move {
                            let _ = stopped.changed().await;
                        };
                        crate::envoy::serve_grpc(listener, door, shutdown)
                            .await
                            .map_err(std::io::Error::other)
                    })
                })
        })
        .collect()
}
