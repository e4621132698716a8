//! HTTP/1.1 and HTTP/2 on one listener, told apart by a connection's first bytes: the
//! HTTP/2 preface (h2c with prior knowledge, or h2 chosen by TLS ALPN, whose client
//! sends the same preface) or anything else, read as HTTP/1.1. hyper-util's `auto`
//! server reads them; the connection is held to the preface deadline until they tell
//! (a silent connection holds no slot past the header timeout), then to the
//! version's own bounds: HTTP/1.1's header deadline and HTTP/2's idle one, both kept
//! by [`super::idle`].
//!
//! HTTP/2's bounds, each against a known attack on HTTP/2 servers:
//! - at most [`MAX_CONCURRENT_STREAMS`] streams open at once on a connection;
//! - a header list (HPACK-decoded) of at most the HTTP/1.1 header bound (64 KiB by
//!   default): the CONTINUATION flood (a header block never ended) stops there;
//! - at most [`MAX_PENDING_RESET_STREAMS`] streams reset by the client before weir
//!   took them: past it the connection ends with GOAWAY `ENHANCE_YOUR_CALM` (rapid
//!   reset, CVE-2023-44487; a reset stream also keeps its place among the concurrent
//!   ones until weir has seen it go);
//! - at most [`MAX_LOCAL_ERROR_RESETS`] streams weir had to reset for the client's
//!   errors (the "MadeYouReset" variant, CVE-2025-8671);
//! - SETTINGS and PING frames are answered by h2 one at a time as they are read, with
//!   no queue a flood can grow;
//! - a connection with no request in flight for the idle timeout is closed
//!   ([`super::idle`]).

use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;

use super::idle::{Counted, IdleDeadline, Streams};
use super::preface::PrefaceDeadline;
use super::{Io, Version};

/// The most streams a client may have open at once on one HTTP/2 connection (nginx's
/// default is 128, hyper's 200): each is a request in flight, decided on its own.
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 100;

/// The most streams a client may reset before weir has taken them (h2's default):
/// what ends a rapid-reset connection.
pub(crate) const MAX_PENDING_RESET_STREAMS: usize = 20;

/// The most streams weir may reset for a client's errors on one connection (hyper's
/// default).
pub(crate) const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// HTTP/1.1 or HTTP/2, as the client speaks: what the main listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Auto {
    /// The longest a client may take to send a request's headers (HTTP/1.1), or its
    /// preface (HTTP/2).
    pub header_timeout: Duration,
    /// The most bytes of request headers read: HTTP/1.1's buffer (more is answered
    /// `431`) and HTTP/2's header list (a larger one resets the stream).
    pub max_header_bytes: usize,
    /// How long an HTTP/2 connection may have no request in flight before it is
    /// closed ([`super::idle`]).
    pub idle_timeout: Duration,
}

impl Version for Auto {
    type Opened<I: Io> = AutoConnection<I>;

    fn open<I: Io>(self, io: I) -> AutoConnection<I> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // hyper's header timer is off: it costs a timer per request, and the
        // connection's idle deadline keeps HTTP/1.1's header deadline with one timer
        // per connection (`super::idle`).
        builder
            .http1()
            .header_read_timeout(None)
            .max_buf_size(self.max_header_bytes.max(8192));
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX))
            .max_pending_accept_reset_streams(MAX_PENDING_RESET_STREAMS)
            .max_local_error_reset_streams(MAX_LOCAL_ERROR_RESETS);
        let streams = Streams::new();
        let io = PrefaceDeadline::new(io, self.header_timeout);
        AutoConnection {
            io: TokioIo::new(IdleDeadline::new(
                io,
                streams.clone(),
                self.idle_timeout,
                self.header_timeout,
            )),
            builder,
            streams,
        }
    }
}

/// A connection opened, held to its preface deadline until its first bytes tell its
/// version: what a protocol speaking both versions serves.
#[derive(Debug)]
pub(crate) struct AutoConnection<I> {
    io: TokioIo<IdleDeadline<I>>,
    builder: auto::Builder<TokioExecutor>,
    /// Its requests in flight, for the idle deadline.
    streams: std::sync::Arc<Streams>,
}

impl<I: Io> AutoConnection<I> {
    /// Serves the connection with `service` until it ends, or, once `graceful` says
    /// stop, until it has finished what it began.
    pub(crate) async fn serve<S, B>(self, service: S, graceful: Watcher)
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let service = Counted {
            inner: service,
            streams: self.streams,
        };
        // With upgrades: a WebSocket handshake the gateway passed on becomes the
        // spliced connection once answered 101 (the idle deadline, which holds an
        // HTTP/1.1 connection to its heads' deadline, lets it be from then on).
        let connection = self
            .builder
            .serve_connection_with_upgrades(self.io, service);
        let _ = graceful.watch(connection).await;
    }
}
