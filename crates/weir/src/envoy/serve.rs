//! The gRPC server: `RateLimitService` and `grpc.health.v1.Health` on one listener,
//! HTTP/2 through the accept loop ([`Accept`]), which holds the connection slots, the
//! send timeout, the preface deadline and the graceful stop.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use futures_util::FutureExt;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioTimer;
use hyper_util::server::graceful::Watcher;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::Status;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::HealthService;
use tower::Service;

use super::RateLimitDoor;
use super::health::Health;
use super::stopping::EndsAtStop;
use super::streams::ConnectionStreams;
use crate::edge::{
    Accept, Connection, ConnectionSlots, Http2, Io, Protocol, SEND_TIMEOUT, Version,
};

/// Calls answered at once on one connection (HTTP/2 concurrent streams); more wait,
/// HTTP/2 flow control slowing the client, rather than pile up.
const CALLS_PER_CONNECTION: u32 = 1_024;
/// The longest a call may take: past the longest store timeout (60 s), so that a call
/// always gets its fallback or `UNAVAILABLE` first. A client's own deadline (Envoy's
/// `timeout`) ends a call sooner: the client resets its stream, which drops the call.
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
/// The path prefix of the health service's calls; every other call goes to the rate
/// limit service (which answers `UNIMPLEMENTED` to a method it does not have).
const HEALTH_PATH: &str = "/grpc.health.v1.Health/";

/// Serves `door` and the health service on `listener`, holding at most as many
/// connections at once as `slots` has, until `shutdown` completes, then finishes the
/// calls in flight.
///
/// HTTP/2 straight from hyper, each connection's calls run in its own task
/// (`ConnectionStreams`), and tonic's generated services called directly, rather than
/// through tonic's server (a task per call, a router and layers a call here does not
/// need): the same calls cost less CPU (BENCHMARKS.md).
pub async fn serve_grpc(
    listener: TcpListener,
    door: RateLimitDoor,
    slots: ConnectionSlots,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let health = Health::start(door.engine.clone()).await;
    let calls = Calls {
        rate_limit: RateLimitServiceServer::new(door),
        health: health.server(),
        stopping: health.stopping(),
    };
    // A peer gone silent is found below the HTTP/2 pings too.
    Accept::new(slots, SEND_TIMEOUT)
        .tcp_keepalive(KEEPALIVE)
        .serve(listener, Grpc { calls, health }, shutdown)
        .await
}

/// HTTP/2 with the rate limit and health services: what the gRPC listener speaks.
struct Grpc {
    calls: Calls,
    health: Health,
}

impl Protocol for Grpc {
    type Version = Http2;
    type Connection = Calls;

    fn version(&self) -> Http2 {
        Http2
    }

    fn connection(&self, _peer: SocketAddr) -> Calls {
        self.calls.clone()
    }

    async fn stop(self) {
        self.health.stop().await;
    }
}

/// What answers one connection's calls.
#[derive(Clone)]
struct Calls {
    rate_limit: RateLimitServiceServer<RateLimitDoor>,
    health: HealthServer<HealthService>,
    /// Turns true at the stop, which ends health `Watch` streams.
    stopping: watch::Receiver<bool>,
}

impl Connection<Http2> for Calls {
    fn serve<I: Io>(
        self,
        connection: <Http2 as Version>::Opened<I>,
        graceful: Watcher,
    ) -> impl Future<Output = ()> + Send {
        let Self {
            rate_limit,
            health,
            stopping,
        } = self;
        let calls = service_fn(move |call: hyper::Request<Incoming>| {
            let answer = if call.method() != Method::POST {
                // gRPC calls are POSTs. Anything else (a CONNECT, which a 2xx would
                // turn into a tunnel) is refused in HTTP, as gRPC servers do.
                let mut refused = hyper::Response::new(tonic::body::Body::empty());
                *refused.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                Box::pin(std::future::ready(Ok(refused)))
            } else if call.uri().path().starts_with(HEALTH_PATH) {
                // A `Watch` never ends by itself: it ends at the stop.
                let (answer, stop) = (health.clone().call(call), stopping.clone());
                Box::pin(async move {
                    let answer = answer.await?;
                    Ok(answer.map(|body| tonic::body::Body::new(EndsAtStop::new(body, stop))))
                })
            } else {
                rate_limit.clone().call(call)
            };
            async move {
                match tokio::time::timeout(CALL_TIMEOUT, answer).await {
                    Ok(answer) => answer,
                    Err(_) => Ok::<_, Infallible>(
                        Status::deadline_exceeded("the call took too long").into_http(),
                    ),
                }
            }
        });
        let streams = ConnectionStreams::default();
        let connection = http2::Builder::new(streams.clone())
            .timer(TokioTimer::new())
            .keep_alive_interval(KEEPALIVE)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .max_concurrent_streams(CALLS_PER_CONNECTION)
            .max_pending_accept_reset_streams(PENDING_RESETS)
            .max_header_list_size(MAX_HEADER_BYTES)
            // gRPC answers carry no `Date` (tonic's server sent one, a changing header
            // to encode in every answer).
            .auto_date_header(false)
            .serve_connection(connection, calls);
        streams.drive(graceful.watch(connection)).map(drop)
    }
}
