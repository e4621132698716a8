//! `grpc.health.v1.Health` beside the rate limit service.
//!
//! The server (`""`) is SERVING while it runs; the rate limit service is SERVING while
//! the engine's store is ready and NOT_SERVING while it is not (looked at every
//! [`HEALTH_EVERY`]), so that a health-checking Envoy or Kubernetes sees a weir whose
//! Redis is lost. On a stop both turn NOT_SERVING, and `Watch` streams end with
//! `UNAVAILABLE` once they have said so ([`EndsAtStop`](super::stopping::EndsAtStop)).

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

use super::RateLimitDoor;
use crate::engine::Engine;
use crate::reloadable::Reloadable;

/// How often the rate limit service's health follows the store's readiness.
const HEALTH_EVERY: Duration = Duration::from_millis(500);

/// The name the rate limit service's health is reported under.
const RATE_LIMIT: &str = <RateLimitServiceServer<RateLimitDoor> as NamedService>::NAME;

/// One listener's health service, its status following `engine`'s store until the
/// stop.
pub(super) struct Health {
    reporter: HealthReporter,
    /// Sets the rate limit service's status as the store's readiness changes.
    follower: JoinHandle<()>,
    /// Turns true at the stop, which ends the `Watch` streams.
    stopping: watch::Sender<bool>,
}

impl Health {
    /// The health of a listener whose rate limit service decides with `engine`
    /// (following its store from now on). The service's status is set before this
    /// returns, so that a `Watch` made as soon as the listener serves finds it (not
    /// "service not registered").
    pub(super) async fn start(engine: Reloadable<Engine>) -> Self {
        let reporter = HealthReporter::new();
        let ready = engine.current().store().is_ready();
        reporter.set_service_status(RATE_LIMIT, status(ready)).await;
        let follower = tokio::spawn(follow(engine, reporter.clone(), ready));
        Self {
            reporter,
            follower,
            stopping: watch::channel(false).0,
        }
    }

    /// The service answering health calls.
    pub(super) fn server(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }

    /// Turns true at the stop: what a `Watch` stream is ended by
    /// ([`EndsAtStop`](super::stopping::EndsAtStop)).
    pub(super) fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Health at the stop: watchers are told NOT_SERVING, then their streams end (a
    /// graceful stop waits for every call); no status after this one.
    pub(super) async fn stop(self) {
        self.follower.abort();
        let _ = self.follower.await;
        for service in ["", RATE_LIMIT] {
            self.reporter
                .set_service_status(service, ServingStatus::NotServing)
                .await;
        }
        self.stopping.send_replace(true);
    }
}

/// Reports the rate limit service SERVING while `engine`'s store is ready and
/// NOT_SERVING while it is not.
async fn follow(engine: Reloadable<Engine>, reporter: HealthReporter, mut last: bool) {
    let mut every = tokio::time::interval(HEALTH_EVERY);
    loop {
        every.tick().await;
        let ready = engine.current().store().is_ready();
        if last != ready {
            reporter.set_service_status(RATE_LIMIT, status(ready)).await;
            last = ready;
        }
    }
}

/// The status of a service whose store is `ready` or not.
fn status(ready: bool) -> ServingStatus {
    if ready {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}
