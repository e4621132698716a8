//! What a connection is held to before it is served, by the HTTP version it speaks.
//!
//! HTTP/1.1 reads each request's headers under a deadline (hyper's header read
//! timeout, which also closes a keep-alive connection left idle for that long) and
//! bounds how many bytes of them it reads. HTTP/2 has its first bytes, the client's
//! preface, under a deadline ([`super::preface`]); hyper's HTTP/2 server has no bound
//! of its own on them.

use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};

use super::Io;
use super::preface::{PREFACE_TIMEOUT, PrefaceDeadline};

/// An HTTP version: how it opens a connection for its protocol.
pub(crate) trait Version: Send + 'static {
    /// A connection opened: the bytes `I`, held to this version's deadline.
    type Opened<I: Io>: Send;

    /// `io` opened with this version's deadline.
    fn open<I: Io>(self, io: I) -> Self::Opened<I>;
}

/// HTTP/1.1, with a deadline on each request's headers and a bound on their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Http1 {
    /// The longest a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// The most bytes of request headers read (more is answered `431`).
    pub max_header_bytes: usize,
}

impl Version for Http1 {
    type Opened<I: Io> = Http1Connection<I>;

    fn open<I: Io>(self, io: I) -> Http1Connection<I> {
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_buf_size(self.max_header_bytes.max(8192));
        Http1Connection {
            io: TokioIo::new(io),
            builder,
        }
    }
}

/// An HTTP/1.1 connection opened, its requests' headers held to their deadline: what
/// a protocol speaking HTTP/1.1 serves.
#[derive(Debug)]
pub(crate) struct Http1Connection<I> {
    io: TokioIo<I>,
    builder: http1::Builder,
}

impl<I: Io> Http1Connection<I> {
    /// The connection served by `service`, ready to be watched for a graceful stop.
    pub(crate) fn serve<S, B>(self, service: S) -> http1::Connection<TokioIo<I>, S>
    where
        S: HttpService<Incoming, ResBody = B>,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: Body + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.builder.serve_connection(self.io, service)
    }
}

/// HTTP/2, with a deadline on the client's preface (the gRPC listener's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Http2;

impl Version for Http2 {
    type Opened<I: Io> = TokioIo<PrefaceDeadline<I>>;

    fn open<I: Io>(self, io: I) -> Self::Opened<I> {
        TokioIo::new(PrefaceDeadline::new(io, PREFACE_TIMEOUT))
    }
}
