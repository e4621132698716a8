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
    let served = Server::builder()
        .add_service(health)
        .add_service(RateLimitServiceServer::new(door))
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await;
    watcher.abort();
    served
}
