//! The gRPC server: `RateLimitService` and `grpc.health.v1.Health` on one listener.
//!
//! Health: the server (`""`) is SERVING while it runs; the rate limit service is
//! SERVING while the engine's store is ready and NOT_SERVING while it is not (looked
//! at every [`HEALTH_EVERY`]), so that a health-checking Envoy or Kubernetes sees a
//! weir whose Redis is lost.

use std::future::Future;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

use super::RateLimitDoor;

/// How often the rate limit service's health follows the store's readiness.
pub const HEALTH_EVERY: Duration = Duration::from_millis(500);

/// Calls answered at once on one connection; more wait (HTTP/2 flow control slows the
/// client) rather than pile up as tasks.
const CALLS_PER_CONNECTION: usize = 1_024;
/// The longest a call may take, for clients that send no deadline (Envoy sends its
/// own, and the shorter wins): past the longest store timeout (60 s), so that a call
/// always gets its fallback or `UNAVAILABLE` first, and is never held for ever.
const CALL_TIMEOUT: Duration = Duration::from_secs(65);
/// HTTP/2 pings to find connections whose peer vanished without closing them, and
/// TCP keepalive below them.
const KEEPALIVE: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before its connection is closed.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Streams a client may reset before being answered, per connection (HTTP/2
/// "rapid reset"): beyond, the connection is closed.
const PENDING_RESETS: usize = 100;
/// The largest header block a call may send.
const MAX_HEADER_BYTES: u32 = 16 * 1024;

/// Serves `door` and the health service on `listener` until `shutdown` completes, then
/// finishes the calls in flight.
pub async fn serve_grpc(
    listener: TcpListener,
    door: RateLimitDoor,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let name = <RateLimitServiceServer<RateLimitDoor> as NamedService>::NAME;
    let engine = door.engine.clone();
    let watcher = tokio::spawn(async move {
        let mut every = tokio::time::interval(HEALTH_EVERY);
        let mut last = None;
        loop {
            every.tick().await;
            let ready = engine.current().store().is_ready();
            if last != Some(ready) {
                let status = if ready {
                    ServingStatus::Serving
                } else {
                    ServingStatus::NotServing
                };
                reporter.set_service_status(name, status).await;
                last = Some(ready);
            }
        }
    });
    // Bounds on what one client can make the server hold: calls in flight per
    // connection, a call's time, dead connections (keepalive), reset floods, headers.
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(KEEPALIVE));
    let served = Server::builder()
        .concurrency_limit_per_connection(CALLS_PER_CONNECTION)
        .max_concurrent_streams(Some(CALLS_PER_CONNECTION as u32))
        .timeout(CALL_TIMEOUT)
        .http2_keepalive_interval(Some(KEEPALIVE))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .http2_max_pending_accept_reset_streams(Some(PENDING_RESETS))
        .http2_max_header_list_size(MAX_HEADER_BYTES)
        .add_service(health)
        .add_service(RateLimitServiceServer::new(door))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    watcher.abort();
    served
}
