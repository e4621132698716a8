//! WebSocket through the gateway: an HTTP/1.1 `Upgrade: websocket` handshake is
//! decided like any request (with the handshake's identity); if allowed it goes on to
//! the upstream on a connection of its own, and when the upstream answers `101` both
//! connections are upgraded and spliced (`copy_bidirectional`) until either side
//! closes, or nothing has passed either way for `upstream.websocket_idle_timeout`.
//! The request's slots of `concurrency` rules are held until then: an upgraded
//! connection is one request in flight.
//!
//! What a client that never reads can cost: the splice's buffers are fixed (8 KiB
//! each way), writes to the client fail after the listener's send timeout, and a
//! connection quiet both ways closes at the idle timeout.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::pool::UpstreamPool;
use super::proxy::{FailureLog, origin_form, strip_hop_by_hop};
use crate::config::Upstream;
use crate::edge::Problem;
use crate::engine::HeldSlots;
use crate::step::{Unsettled, until_sent};

/// Whether `request` asks to become a WebSocket: HTTP/1.1, `GET`, `Connection`
/// naming `upgrade` and `Upgrade: websocket` (RFC 6455 4.1).
pub(super) fn is_websocket(request: &Request<Body>) -> bool {
    let headers = request.headers();
    let names_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    let websocket = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"));
    request.version() == Version::HTTP_11
        && request.method() == Method::GET
        && names_upgrade
        && websocket
}

/// Passes an allowed handshake on and answers with the upstream's answer; on `101`,
/// splices the two connections in a task of its own, which holds the request's slots.
pub(super) async fn forward(
    pool: &Arc<UpstreamPool>,
    upstream: &Upstream,
    mut request: Request<Body>,
    mut unsettled: Unsettled<'_>,
    failures: &FailureLog,
) -> Response {
    let client = hyper::upgrade::on(&mut request);
    let (mut parts, body) = request.into_parts();
    let Some(uri) = origin_form(std::mem::take(&mut parts.uri)) else {
        let answer =
            Problem::invalid_request("the request target cannot be forwarded").into_response();
        return unsettled.finish(Err(answer)).await;
    };
    parts.uri = uri;
    if !parts.headers.contains_key(header::HOST)
        && let Some(host) = upstream.base.authority()
        && let Ok(host) = HeaderValue::try_from(host.as_str())
    {
        parts.headers.insert(header::HOST, host);
    }
    strip_hop_by_hop(&mut parts.headers);
    upgrade_headers(&mut parts.headers);
    let request = Request::from_parts(parts, body);
    let answer = match tokio::time::timeout(upstream.timeout, pool.send_upgrade(request)).await {
        Err(_) => {
            let reason = format!("the upstream did not answer within {:?}", upstream.timeout);
            failures.log(504, &reason);
            Err(Problem::gateway_timeout(reason).into_response())
        }
        Ok(Err(error)) => {
            failures.log(502, &error);
            Err(Problem::bad_gateway("the upstream could not be reached").into_response())
        }
        Ok(Ok(response)) => Ok(response),
    };
    let slots = unsettled.take_slots();
    let mut response = match answer {
        Ok(mut response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
            let upstream_side = hyper::upgrade::on(&mut response);
            let (mut parts, _) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            upgrade_headers(&mut parts.headers);
            parts.version = Version::HTTP_11;
            let idle = upstream.websocket_idle_timeout;
            tokio::spawn(splice(client, upstream_side, slots, idle));
            return unsettled
                .finish(Ok(Response::from_parts(parts, Body::empty())))
                .await;
        }
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            parts.version = Version::default();
            unsettled
                .finish(Ok(Response::from_parts(parts, Body::new(body))))
                .await
        }
        Err(own) => unsettled.finish(Err(own)).await,
    };
    // Not upgraded: the slots are held until this answer has been sent.
    if let Some(slots) = slots {
        response = until_sent(response, slots);
    }
    response
}

/// `Connection: upgrade` and `Upgrade: websocket`, as the hop the handshake takes
/// (the rest of the connection's fields were dropped).
fn upgrade_headers(headers: &mut axum::http::HeaderMap) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
}

/// Carries bytes both ways until either side closes or both are idle for `idle`;
/// the slots are released when it ends.
async fn splice(client: OnUpgrade, upstream: OnUpgrade, slots: Option<HeldSlots>, idle: Duration) {
    let _slots = slots;
    let (client, upstream) = match (client.await, upstream.await) {
        (Ok(client), Ok(upstream)) => (client, upstream),
        (Err(error), _) | (_, Err(error)) => {
            tracing::debug!(%error, "a WebSocket upgrade did not complete");
            return;
        }
    };
    let activity = Activity::new();
    let mut client = Active {
        io: TokioIo::new(client),
        activity: Arc::clone(&activity),
    };
    let mut upstream = TokioIo::new(upstream);
    tokio::select! {
        ended = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
            if let Err(error) = ended {
                tracing::debug!(%error, "a WebSocket connection ended");
            }
        }
        () = activity.idle_for(idle) => {
            tracing::debug!(?idle, "a WebSocket connection was idle: closed");
        }
    }
}

/// When bytes last passed, in milliseconds from `origin`.
struct Activity {
    origin: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Returns once nothing has passed for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.last_ms.load(Ordering::Relaxed);
            let until = self.origin + Duration::from_millis(last) + idle;
            tokio::time::sleep_until(until.into()).await;
            if self.last_ms.load(Ordering::Relaxed) == last {
                return;
            }
        }
    }
}

/// The client's side of a splice, noting each time bytes pass either way: what
/// comes from the upstream is written to it, what goes to the upstream read from it.
struct Active<I> {
    io: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Active<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Active<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
