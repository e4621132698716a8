//! The Envoy door: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` over
//! gRPC (tonic), with `grpc.health.v1` beside it, so that Envoy's global rate limit
//! filter can use weir in place of envoyproxy/ratelimit.
//!
//! It translates and nothing more: the protocol's request into the engine's
//! [`EnvoyAsk`](crate::engine::EnvoyAsk) (`translate`), the engine's answer back, and
//! a store that cannot decide into `UNAVAILABLE`, so that Envoy's own failure mode
//! (`failure_mode_deny`) decides, at once rather than after Envoy's timeout. `serve`
//! is the gRPC protocol the accept loop (`edge`) runs on a listener, `streams` runs a
//! connection's calls in its task, `health` is the health service and its status,
//! `stopping` ends health watches at a stop.

mod health;
mod json;
mod serve;
mod stopping;
mod streams;
mod translate;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

pub(crate) use self::json::json_router;
pub use self::serve::serve_grpc;
use crate::engine::{Descriptors, Engine};
use crate::metrics::Door;
use crate::reloadable::Reloadable;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

/// Answers `ShouldRateLimit` with the engine, by the descriptors configured now.
#[derive(Debug, Clone)]
pub struct RateLimitDoor {
    engine: Reloadable<Engine>,
    descriptors: Reloadable<Descriptors>,
}

impl RateLimitDoor {
    /// A door deciding with `engine` by `descriptors`.
    pub(crate) fn new(engine: Reloadable<Engine>, descriptors: Reloadable<Descriptors>) -> Self {
        Self {
            engine,
            descriptors,
        }
    }
}

#[tonic::async_trait]
impl RateLimitService for RateLimitDoor {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.decide(&request.into_inner()).await.map(Response::new)
    }
}

impl RateLimitDoor {
    /// The answer to one request: what gRPC and `/json` both send.
    /// Counted as the door's answers are: over the limit as a 429, a request that
    /// cannot be read as a 400, a store that cannot decide as a 503.
    async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        let engine = self.engine.current();
        let answer: Result<RateLimitResponse, Status> = async {
            let ask = translate::ask(request)?;
            let descriptors = self.descriptors.current();
            // The engine logs the failure (at most every 10 s).
            let answer = engine
                .should_rate_limit(&descriptors, &ask)
                .await
                .map_err(|_| Status::unavailable("the rate limit store cannot decide now"))?;
            Ok(translate::response(&answer, descriptors.response_headers))
        }
        .await;
        let status = match &answer {
            Ok(response) if response.overall_code == Code::OverLimit as i32 => 429,
            Ok(_) => 200,
            Err(status) if status.code() == tonic::Code::Unavailable => 503,
            Err(_) => 400,
        };
        engine.metrics().door_answered(Door::Envoy, status);
        answer
    }
}
