//! An HTTP/2 connection with no stream in flight for [`IDLE_TIMEOUT`] is closed, as
//! nginx closes one after its `keepalive_timeout`: else a client could hold connection
//! slots with connections that ask nothing (its PINGs answered, its preface and
//! SETTINGS sent in time), until no other client gets one.
//!
//! An HTTP/1.1 connection with no request in flight must send a request's whole head
//! within the header timeout (of its opening, or of its last answer's end): a client
//! that drips its headers (slowloris) or keeps a connection open asking nothing is
//! closed there. This is the deadline hyper's `header_read_timeout` keeps, kept here
//! instead because hyper's costs a timer per request (a boxed `Sleep` made, entered in
//! tokio's timer wheel and taken out again: about 1,600 instructions of a 30,000
//! instruction request, `BENCHMARKS.md`). Here each connection has one timer, left
//! where it is while requests come (each moves the deadline later) and set again only
//! when it fires: a connection that is served wakes once a header timeout at most.
//!
//! A connection's streams are counted from a request's arrival to the end of its
//! answer's body (a guard in the body, dropped when it ends or the stream is reset).
//! Its reads fail with [`io::ErrorKind::TimedOut`] once none has been in flight for
//! the timeout, whatever else the client sends (PINGs and SETTINGS do not count); hyper
//! then closes it. A stream whose answer only waits for the client to take it (its
//! headers made, its body not asked for: hyper asks for a frame only when the client's
//! flow-control window has room) is not kept busy by that: when every stream in
//! flight has waited so for the timeout, the connection is closed too, or a client
//! announcing a window of 0 would hold its connection for ever. An HTTP/1.1 request is
//! in flight from its head's arrival to its answer's end: its body's end, or when its
//! last bytes left for the socket if they had to wait for the client to read; a
//! client that stops reading is the send timeout's. A connection upgraded to another protocol
//! (WebSocket: answered `101`) is never closed here.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::Service;
use hyper::{Request, Response, StatusCode, Version};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
    /// Whether a request was answered `101`: the connection is another protocol's from
    /// then on (a WebSocket's), with bounds of its own.
    upgraded: AtomicBool,
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
            upgraded: AtomicBool::new(false),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn moved(&self) {
        self.moved_ms.fetch_max(self.now_ms(), Ordering::AcqRel);
    }

    /// The last bytes waiting on the socket went out: with no request in flight, the
    /// next head's deadline counts from now (an answer ends when the client has it,
    /// not when its body was made).
    fn sent(&self) {
        self.idle_since_ms
            .fetch_max(self.now_ms(), Ordering::AcqRel);
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

    /// A request in flight; `http2` for a stream, whose waits for the client are
    /// counted too (an HTTP/1.1 client that does not take its answer is the send
    /// timeout's).
    fn began(self: &Arc<Self>, http2: bool) -> InFlight {
        self.open.fetch_add(1, Ordering::AcqRel);
        if http2 {
            self.moved();
        }
        InFlight {
            streams: Arc::clone(self),
            http2,
        }
    }
}

/// One request (an HTTP/2 stream) in flight, until dropped.
#[derive(Debug)]
struct InFlight {
    streams: Arc<Streams>,
    http2: bool,
}

impl InFlight {
    /// Counts the stream as waiting for the client (`true`) or not (HTTP/2's only).
    fn wait_on_client(&self, waiting: bool) {
        if !self.http2 {
            return;
        }
        let streams = &self.streams;
        if waiting {
            streams.waiting_on_client.fetch_add(1, Ordering::AcqRel);
        } else {
            streams.waiting_on_client.fetch_sub(1, Ordering::AcqRel);
        }
        streams.moved();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let streams = &self.streams;
        streams
            .idle_since_ms
            .fetch_max(streams.now_ms(), Ordering::AcqRel);
        streams.open.fetch_sub(1, Ordering::AcqRel);
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
        let in_flight = Some(self.streams.began(request.version() == Version::HTTP_2));
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
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            in_flight.streams.upgraded.store(true, Ordering::Release);
        }
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
/// HTTP/2 and has had no stream in flight for `timeout`, or speaks HTTP/1.1 and has
/// had no request in flight for `header_timeout`.
#[derive(Debug)]
pub(crate) struct IdleDeadline<T> {
    inner: PrefaceDeadline<T>,
    streams: Arc<Streams>,
    timeout: Duration,
    header_timeout: Duration,
    /// Wakes the reader at the deadline (or at the next check while a stream is in
    /// flight). HTTP/1.1's is never later than its deadline: it starts at the first
    /// one (the header timeout from the opening), and each request moves the
    /// deadline later.
    timer: Pin<Box<Sleep>>,
    /// Whether the last write (or flush) waited on the socket: an answer still going
    /// out to a client that reads slowly, whose head deadline has not started (the
    /// send timeout bounds that wait).
    sending: bool,
}

impl<T> IdleDeadline<T> {
    pub(crate) fn new(
        inner: PrefaceDeadline<T>,
        streams: Arc<Streams>,
        timeout: Duration,
        header_timeout: Duration,
    ) -> Self {
        Self {
            timer: Box::pin(tokio::time::sleep(timeout.min(header_timeout))),
            inner,
            streams,
            timeout,
            header_timeout,
            sending: false,
        }
    }

    /// Whether an HTTP/1.1 connection is past its head's deadline: checked when the
    /// timer fires, and the timer set again to the deadline as it is then (the header
    /// timeout from now while a request is in flight). Not at all once upgraded.
    fn head_late(&mut self, cx: &mut Context<'_>) -> bool {
        if self.streams.upgraded.load(Ordering::Acquire) {
            return false;
        }
        while self.timer.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            let due = if self.sending {
                None
            } else {
                self.streams.idle_deadline(self.header_timeout)
            };
            let due = due.unwrap_or(now + self.header_timeout);
            if due <= now {
                return true;
            }
            self.timer.as_mut().reset(due);
        }
        false
    }

    /// What a write or flush that returned `result` returns, noting (HTTP/1.1 only)
    /// whether it waits on the socket; the wait's end is an answer's end
    /// ([`Streams::sent`]). HTTP/2's idle deadline counts streams alone: a client
    /// must not keep its connection by making weir's writes (its PINGs' answers) wait.
    fn follow<R>(&mut self, result: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if !self.inner.speaks_http1() {
            return result;
        }
        match (&result, self.sending) {
            (Poll::Pending, _) => self.sending = true,
            (Poll::Ready(_), true) => {
                self.sending = false;
                self.streams.sent();
            }
            (Poll::Ready(_), false) => {}
        }
        result
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
        if this.inner.speaks_http1() {
            // Checked only when nothing is there to read: a head that keeps coming
            // fills the header bound first (431).
            return match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Pending if this.head_late(cx) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request head within the header timeout",
                ))),
                read => read,
            };
        }
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

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.follow(result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.follow(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.follow(result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

    use super::*;

    const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

    /// An HTTP/1.1 connection whose first bytes (part of a request's head) were read at
    /// its opening, its requests counted in the `Streams` returned.
    async fn http1() -> (DuplexStream, IdleDeadline<DuplexStream>, Arc<Streams>) {
        let (mut client, server) = duplex(1024);
        let streams = Streams::new();
        let mut connection = IdleDeadline::new(
            PrefaceDeadline::new(server, HEADER_TIMEOUT),
            Arc::clone(&streams),
            IDLE_TIMEOUT,
            HEADER_TIMEOUT,
        );
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 16);
        (client, connection, streams)
    }

    /// How long the next read of `connection` takes to fail with `TimedOut` (a
    /// connection that neither fails nor ends within ten idle timeouts fails the test).
    async fn fails_after(connection: &mut (impl AsyncRead + Unpin)) -> Duration {
        let start = Instant::now();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(10 * IDLE_TIMEOUT, connection.read(&mut buf))
            .await
            .expect("the read neither failed nor ended");
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::TimedOut);
        start.elapsed()
    }

    /// Whether the next read of `connection` is still waiting after `wait`.
    async fn still_open_after(connection: &mut (impl AsyncRead + Unpin), wait: Duration) -> bool {
        let mut buf = [0u8; 64];
        tokio::time::timeout(wait, connection.read(&mut buf))
            .await
            .is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_not_in_by_the_header_timeout_fails_there_not_before() {
        let (_client, mut connection, _streams) = http1().await;
        assert_eq!(fails_after(&mut connection).await, HEADER_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_has_no_deadline_and_its_end_starts_the_next() {
        let (_client, mut connection, streams) = http1().await;
        // The head came: answering it takes three header timeouts.
        let in_flight = streams.began(false);
        assert!(still_open_after(&mut connection, 3 * HEADER_TIMEOUT).await);
        drop(in_flight);
        // The next head has the header timeout from the answer's end.
        assert_eq!(fails_after(&mut connection).await, HEADER_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_moves_the_deadline() {
        let (_client, mut connection, streams) = http1().await;
        // A request every 8 s (each answered at once) for 40 s: never closed between.
        for _ in 0..5 {
            assert!(still_open_after(&mut connection, Duration::from_secs(8)).await);
            drop(streams.began(false));
        }
        assert_eq!(fails_after(&mut connection).await, HEADER_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_dripped_do_not_move_the_deadline() {
        // A head sent a byte a second (slowloris) is cut at the header timeout.
        let (mut client, mut connection, _streams) = http1().await;
        let drip = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if client.write_all(b"x").await.is_err() {
                    return;
                }
            }
        });
        let start = Instant::now();
        let mut buf = [0u8; 64];
        let failed = loop {
            match connection.read(&mut buf).await {
                Ok(n) => assert_eq!(n, 1),
                Err(error) => break error,
            }
        };
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), HEADER_TIMEOUT);
        drip.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waiting_on_a_slow_reader_has_no_deadline_until_it_is_out() {
        let (mut client, connection, streams) = http1().await;
        let (mut reader, mut writer) = tokio::io::split(connection);
        // An answer of 64 KiB on a socket that holds 1 KiB: its body ends (the request
        // is no longer in flight) while most of it waits for the client to read.
        let in_flight = streams.began(false);
        let sending = tokio::spawn(async move {
            writer.write_all(&[b'a'; 64 * 1024]).await.unwrap();
            writer
        });
        tokio::task::yield_now().await;
        drop(in_flight);
        // The client reads nothing for three header timeouts: not closed.
        assert!(still_open_after(&mut reader, 3 * HEADER_TIMEOUT).await);
        let mut answer = vec![0u8; 64 * 1024];
        client.read_exact(&mut answer).await.unwrap();
        let _writer = sending.await.unwrap();
        // The next head has the header timeout from the answer's last bytes.
        assert_eq!(fails_after(&mut reader).await, HEADER_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn an_http2_answer_waiting_on_the_client_does_not_move_the_idle_deadline() {
        let (mut client, server) = duplex(1024);
        let connection = IdleDeadline::new(
            PrefaceDeadline::new(server, HEADER_TIMEOUT),
            Streams::new(),
            IDLE_TIMEOUT,
            HEADER_TIMEOUT,
        );
        let opened = Instant::now();
        // The preface and a SETTINGS frame's header: HTTP/2 from here.
        client
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        client
            .write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
            .await
            .unwrap();
        let (mut reader, mut writer) = tokio::io::split(connection);
        reader.read_exact(&mut [0u8; 33]).await.unwrap();
        // 64 KiB written (PINGs' answers, say) wait half the idle timeout for the
        // client to read them; no stream is in flight all along.
        let sending = tokio::spawn(async move {
            writer.write_all(&[0u8; 64 * 1024]).await.unwrap();
            writer
        });
        tokio::time::sleep(IDLE_TIMEOUT / 2).await;
        client.read_exact(&mut vec![0u8; 64 * 1024]).await.unwrap();
        let _writer = sending.await.unwrap();
        // Still closed at the idle timeout from the opening.
        fails_after(&mut reader).await;
        assert_eq!(opened.elapsed(), IDLE_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn an_upgraded_connection_has_no_deadline() {
        let (mut client, mut connection, streams) = http1().await;
        drop(streams.began(false));
        // Answered 101: a WebSocket from now on, quiet as long as it likes.
        streams.upgraded.store(true, Ordering::Release);
        assert!(still_open_after(&mut connection, 10 * IDLE_TIMEOUT).await);
        client.write_all(b"frame").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 5);
    }
}
