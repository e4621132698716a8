//! One request through the gateway: read its facts, ask the engine, answer 429 or 503
//! or forward, then settle with the upstream's status.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::Request;
use axum::response::Response;

use super::pool::UpstreamPool;
use super::proxy::{FailureLog, forward};
use super::websocket;
use crate::config::GatewayConfig;
use crate::edge::{self, BodyReader};
use crate::engine::Engine;
use crate::step::{GoOn, RequestStep, Step};

/// The gateway: the engine that decides, and where allowed requests go.
pub struct Gateway {
    config: GatewayConfig,
    engine: Arc<Engine>,
    /// What every request is taken through before it is forwarded.
    step: RequestStep,
    /// weir's own 502 and 504, logged now and then.
    failures: FailureLog,
    /// Tells this gateway's upstream clients apart from a reloaded one's.
    id: u64,
}

/// Gateways made so far, for their ids.
static GATEWAYS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Each server thread's connections to upstreams, by gateway id: a connection
    /// stays on the thread (and runtime) that opened it.
    static POOLS: RefCell<Vec<(u64, Arc<UpstreamPool>)>> = const { RefCell::new(Vec::new()) };
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstream", &self.config.upstream.base)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway for `config`, asking `engine` about every request.
    pub(crate) fn new(config: GatewayConfig, engine: Arc<Engine>) -> Self {
        let upstream = &config.upstream;
        let bodies = BodyReader::new(
            upstream.max_body_bytes,
            upstream.body_timeout,
            upstream.max_buffered_bytes,
        );
        let mut step = RequestStep::new(config.client_ip.clone(), bodies);
        if let Some(shedding) = config.shedding.clone() {
            step = step.shedding(shedding, &engine);
        }
        Self {
            step,
            failures: FailureLog::new(),
            config,
            engine,
            id: GATEWAYS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// This thread's connections to the upstream.
    fn pool(&self) -> Arc<UpstreamPool> {
        POOLS.with(|pools| {
            let mut pools = pools.borrow_mut();
            if let Some((_, found)) = pools.iter().find(|(id, _)| *id == self.id) {
                return Arc::clone(found);
            }
            // Pools of gateways replaced by reloads go, oldest first.
            if pools.len() >= 4 {
                pools.remove(0);
            }
            let made = UpstreamPool::new(&self.config.upstream);
            pools.push((self.id, Arc::clone(&made)));
            made
        })
    }
}

/// The gateway's handler: every request on its listener, from `peer`.
///
/// The request is taken through the request step (read once, canonically; decided);
/// what is forwarded is what was decided on: the canonical target, and forwarding
/// headers rewritten from the client address weir keyed. A request that cannot be
/// read one way is refused (400), whether or not a rule applies to it. A gRPC call
/// stopped by weir is answered as gRPC ([`edge::for_grpc`]).
pub(crate) async fn handle(gateway: Arc<Gateway>, peer: SocketAddr, request: Request) -> Response {
    let engine = &gateway.engine;
    let counted = engine.metrics().gateway_request();
    // gRPC runs over HTTP/2 only: an HTTP/1.1 request saying it is gRPC is answered
    // as HTTP (a denial as a 429), never as a 200 a cache could keep.
    let grpc = request.version() == axum::http::Version::HTTP_2 && edge::is_grpc(request.headers());
    let websocket = websocket::is_websocket(&request);
    let (step, route) = gateway.step.run(engine, peer.ip(), request).await;
    let response = match step {
        Step::Stop(answer) => answer,
        Step::GoOn(GoOn { request, unsettled }) if websocket => {
            let pool = gateway.pool();
            let upstream = &gateway.config.upstream;
            websocket::forward(&pool, upstream, request, unsettled, &gateway.failures).await
        }
        Step::GoOn(GoOn { request, unsettled }) => {
            let pool = gateway.pool();
            let started = Instant::now();
            let answer = forward(&pool, &gateway.config.upstream, request, &gateway.failures).await;
            engine.metrics().upstream_latency(started.elapsed());
            unsettled.finish(answer).await
        }
    };
    counted.answered(route, response.status().as_u16());
    // A gRPC client reads weir's own answers (a denial, a refusal, a 502) only as gRPC
    // statuses; the upstream's answers go as they are.
    if grpc {
        return edge::for_grpc(response);
    }
    response
}
