//! An HTTP/2 connection with no stream in flight for [`IDLE_TIMEOUT`] is closed, as
//! nginx closes one after its `keepalive_timeout`: else a client could hold connection
//! slots with connections that ask nothing (its PINGs answered, its preface and
//! SETTINGS sent in time), until no other client gets one.
//!
//! A connection's streams are counted from a request's arrival to the end of its
//! answer's body (a guard in the body, dropped when it ends or the stream is reset).
//! Its reads fail with [`io::ErrorKind::TimedOut`] once none has been in flight for
//! the timeout, whatever else the client sends (PINGs and SETTINGS do not count); hyper
//! then closes it. A stream whose answer only waits for the client to take it (its
//! headers made, its body not asked for: hyper asks for a frame only when the client's
//! flow-control window has room) is not kept busy by that: when every stream in
//! flight has waited so for the timeout, the connection is closed too, or a client
//! announcing a window of 0 would hold its connection for ever. HTTP/1.1 connections are left to their header deadline, which
//! closes an idle keep-alive connection sooner; a connection upgraded to another
//! protocol (WebSocket) is HTTP/1.1 and is never closed here.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::Service;
use hyper::{Request, Response};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::preface::PrefaceDeadline;

/// How long an HTTP/2 connection may have no stream in flight before it is closed
/// (nginx's `keepalive_timeout` is 75 s; gRPC clients ping idle channels at most every
/// 5 minutes by default and reconnect when closed).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// A connection's streams in flight, and since when it has had none.
#[derive(Debug)]
pub(crate) struct Streams {
    /// When the connection started: `idle_since` counts from it.
    start: Instant,
    open: AtomicUsize,
    /// Milliseconds from `start` to the end of the last stream.
    idle_since_ms: AtomicU64,
    /// Streams whose answer waits for the client to take it (its headers made, its
    /// next body frame not yet asked for or not yet taken): a client that opens no
    /// flow-control window leaves them so for ever.
    waiting_on_client: AtomicUsize,
    /// Milliseconds from `start` to the last time a stream moved (began, had its
    /// answer, had a body frame asked for).
    moved_ms: AtomicU64,
}

impl Streams {
    /// A connection's count, starting now with none in flight.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            open: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            waiting_on_client: AtomicUsize::new(0),
            moved_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn moved(&self) {
        self.moved_ms.fetch_max(self.now_ms(), Ordering::AcqRel);
    }

    /// When the connection may be closed if no stream starts before: `None` while
    /// one is in flight.
    /// Also when every stream in flight waits for the client to take its answer and
    /// none has moved for the timeout (flow control held shut): nothing is asked of
    /// the connection then either.
    fn idle_deadline(&self, timeout: Duration) -> Option<Instant> {
        let open = self.open.load(Ordering::Acquire);
        let since = if open == 0 {
            self.idle_since_ms.load(Ordering::Acquire)
        } else if self.waiting_on_client.load(Ordering::Acquire) >= open {
            self.moved_ms.load(Ordering::Acquire)
        } else {
            return None;
        };
        Some(self.start + Duration::from_millis(since) + timeout)
    }

    fn began(self: &Arc<Self>) -> InFlight {
        self.open.fetch_add(1, Ordering::AcqRel);
        self.moved();
        InFlight(Arc::clone(self))
    }
}

/// One stream in flight, until dropped.
#[derive(Debug)]
struct InFlight(Arc<Streams>);

impl InFlight {
    /// Counts the stream as waiting for the client (`true`) or not.
    fn wait_on_client(&self, waiting: bool) {
        if waiting {
            self.0.waiting_on_client.fetch_add(1, Ordering::AcqRel);
        } else {
            self.0.waiting_on_client.fetch_sub(1, Ordering::AcqRel);
        }
        self.0.moved();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .idle_since_ms
            .fetch_max(self.0.now_ms(), Ordering::AcqRel);
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's service, each request counted in `streams` until its answer's body
/// ends.
#[derive(Debug, Clone)]
pub(crate) struct Counted<S> {
    pub(crate) inner: S,
    pub(crate) streams: Arc<Streams>,
}

impl<S, B> Service<Request<hyper::body::Incoming>> for Counted<S>
where
    S: Service<Request<hyper::body::Incoming>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: Body + Unpin,
{
    type Response = Response<CountedBody<B>>;
    type Error = S::Error;
    type Future = CountedAnswer<S::Future>;

    fn call(&self, request: Request<hyper::body::Incoming>) -> Self::Future {
        let in_flight = Some(self.streams.began());
        CountedAnswer {
            answer: self.inner.call(request),
            in_flight,
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer being made, its stream counted in flight (no allocation: this
    /// is every HTTP/2 request's path).
    pub(crate) struct CountedAnswer<F> {
        #[pin]
        answer: F,
        in_flight: Option<InFlight>,
    }
}

impl<F, B, E> Future for CountedAnswer<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<CountedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.answer.poll(cx))?;
        // (Polled again once ready, which a future may not be: it stays pending.)
        let Some(in_flight) = this.in_flight.take() else {
            return Poll::Pending;
        };
        // The answer's headers are made: it waits for the client to take them and to
        // ask for its body.
        in_flight.wait_on_client(true);
        Poll::Ready(Ok(response.map(|body| CountedBody {
            inner: body,
            in_flight,
            waiting: true,
        })))
    }
}

/// An answer's body, its stream counted in flight until it ends or is dropped.
#[derive(Debug)]
pub(crate) struct CountedBody<B> {
    inner: B,
    in_flight: InFlight,
    /// Whether it is counted as waiting for the client: from its headers until its
    /// first frame is asked for, and after each frame until the next is.
    waiting: bool,
}

impl<B> Drop for CountedBody<B> {
    fn drop(&mut self) {
        if self.waiting {
            self.in_flight.wait_on_client(false);
        }
    }
}

impl<B: Body + Unpin> Body for CountedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        if this.waiting {
            this.waiting = false;
            this.in_flight.wait_on_client(false);
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        // A frame made waits for the client to take it; a body still pending waits
        // for the upstream (the stream is busy).
        if matches!(polled, Poll::Ready(Some(Ok(_)))) {
            this.waiting = true;
            this.in_flight.wait_on_client(true);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `inner` (a connection whose preface is watched), whose reads fail once it speaks
/// HTTP/2 and has had no stream in flight for `timeout`.
#[derive(Debug)]
pub(crate) struct IdleDeadline<T> {
    inner: PrefaceDeadline<T>,
    streams: Arc<Streams>,
    timeout: Duration,
    /// Wakes the reader at the deadline (or at the next check while a stream is in
    /// flight).
    timer: Pin<Box<Sleep>>,
}

impl<T> IdleDeadline<T> {
    pub(crate) fn new(inner: PrefaceDeadline<T>, streams: Arc<Streams>, timeout: Duration) -> Self {
        Self {
            timer: Box::pin(tokio::time::sleep(timeout)),
            inner,
            streams,
            timeout,
        }
    }

    /// Whether the connection has been idle past its deadline; else the timer is set
    /// to wake the reader when it may be (checked again then).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.inner.speaks_http2() {
            return false;
        }
        loop {
            let due = self
                .streams
                .idle_deadline(self.timeout)
                .unwrap_or_else(|| Instant::now() + self.timeout);
            if due <= Instant::now() {
                return true;
            }
            if self.timer.deadline() != due {
                self.timer.as_mut().reset(due);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no HTTP/2 stream within the idle timeout",
            ))),
            Poll::Ready(Ok(())) if this.expired(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no HTTP/2 stream within the idle timeout",
            ))),
            read => read,
        }
    }
}

writes_through!(IdleDeadline);
