//! The gRPC server: `RateLimitService` and `grpc.health.v1.Health` on one listener.
//!
//! Health: the server (`""`) is SERVING while it runs; the rate limit service is
//! SERVING while the engine's store is ready and NOT_SERVING while it is not (looked
//! at every [`HEALTH_EVERY`]), so that a health-checking Envoy or Kubernetes sees a
//! weir whose Redis is lost. On a stop both turn NOT_SERVING, and `Watch` streams end
//! with `UNAVAILABLE` once they have said so.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use futures_util::FutureExt;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use socket2::{SockRef, TcpKeepalive};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::Status;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tower::Service;

use super::RateLimitDoor;
use super::preface::PrefaceDeadline;
use super::stopping::EndsAtStop;
use super::streams::ConnectionStreams;
use crate::edge::{ConnectionSlots, SEND_TIMEOUT, WriteStall};

/// How often the rate limit service's health follows the store's readiness.
pub const HEALTH_EVERY: Duration = Duration::from_millis(500);

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
/// ([`ConnectionStreams`]), and tonic's generated services called directly, rather than
/// through tonic's server (a task per call, a router and layers a call here does not
/// need): the same calls cost less CPU (BENCHMARKS.md).
pub async fn serve_grpc(
    listener: TcpListener,
    door: RateLimitDoor,
    slots: ConnectionSlots,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let name = <RateLimitServiceServer<RateLimitDoor> as NamedService>::NAME;
    let engine = door.engine.clone();
    let watched = reporter.clone();
    let watcher = tokio::spawn(async move {
        let reporter = watched;
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
    let rate_limit = RateLimitServiceServer::new(door);
    let graceful = GracefulShutdown::new();
    let (stopping, watching_stop) = watch::channel(false);
    let keepalive = TcpKeepalive::new().with_time(KEEPALIVE);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(%error, "cannot accept a gRPC connection");
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
        // Answers go out as soon as they are written; a peer gone silent is found.
        let _ = stream.set_nodelay(true);
        let _ = SockRef::from(&stream).set_tcp_keepalive(&keepalive);
        let (rate_limit, health) = (rate_limit.clone(), health.clone());
        let watching_stop = watching_stop.clone();
        let calls = service_fn(move |call: hyper::Request<Incoming>| {
            let answer = if call.method() != Method::POST {
                // gRPC calls are POSTs. Anything else (a CONNECT, which a 2xx would
                // turn into a tunnel) is refused in HTTP, as gRPC servers do.
                let mut refused = hyper::Response::new(tonic::body::Body::empty());
                *refused.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                Box::pin(std::future::ready(Ok(refused)))
            } else if call.uri().path().starts_with(HEALTH_PATH) {
                // A `Watch` never ends by itself: it ends at the stop.
                let (answer, stop) = (health.clone().call(call), watching_stop.clone());
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
            // A client that stops reading its answers is closed after SEND_TIMEOUT.
            .serve_connection(
                TokioIo::new(PrefaceDeadline::new(WriteStall::new(stream, SEND_TIMEOUT))),
                calls,
            );
        // The slot is given back when the connection ends.
        tokio::spawn(
            streams
                .drive(graceful.watch(connection))
                .map(|_| drop(slot)),
        );
    }
    drop(listener);
    // Health watchers are told NOT_SERVING, then their streams end (a graceful stop
    // waits for every call): no status after this one.
    watcher.abort();
    let _ = watcher.await;
    reporter
        .set_service_status("", ServingStatus::NotServing)
        .await;
    reporter
        .set_service_status(name, ServingStatus::NotServing)
        .await;
    let _ = stopping.send(true);
    graceful.shutdown().await;
    Ok(())
}
