//! Connections to the upstream, plain or TLS (an `https://` upstream, verified as
//! configured), in HTTP/1.1 or HTTP/2 (`http2: true`, or an `https://` upstream that
//! chooses `h2` by ALPN).
//!
//! HTTP/1.1: connections kept alive, each carrying one request at a time, and kept in
//! a small pool between requests. Each server thread has its own pool, so a
//! connection stays on the thread (and runtime) that opened it and taking one locks
//! nothing another thread holds. A connection goes back to the pool when the response
//! that used it has been read to its end: the response body hands it back as it is
//! dropped. One cut short leaves the connection mid-message, so it is closed instead.
//! (hyper-util's pooled client does the same job for any number of hosts and
//! protocols, but locks a shared pool twice and spawns a task per request to wait for
//! the connection to be idle again.)
//!
//! HTTP/2: one connection per thread carries every request as a stream of its own
//! (the upstream's concurrent-stream limit makes the rest wait), opened again when it
//! closes. gRPC upstreams need it: their answers end in trailers. Without `http2:
//! true`, an `https://` upstream is offered `h2` and `http/1.1`, and the first
//! connection that it answers with `h2` makes the pool HTTP/2's from then on.
//! WebSocket handshakes offer `http/1.1` alone: an upgrade is HTTP/1.1's.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response, Uri, header};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::config::Upstream;

/// The most idle connections a pool keeps: a burst may open more, but no more than
/// this many wait around afterwards.
const MAX_IDLE: usize = 64;

/// How long an idle connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the upstream could not be asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum UpstreamError {
    /// No connection within the connect timeout.
    #[error("connecting to {0} timed out")]
    ConnectTimeout(String),
    /// The connection was refused, or the address does not resolve.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    /// The TLS handshake failed: the upstream's certificate is not verified (its
    /// reason), or it speaks no TLS weir accepts.
    #[error("TLS with {0} failed: {1}")]
    Tls(String, std::io::Error),
    /// The request's Host and target make no URL to name to an HTTP/2 upstream.
    #[error("`{0}` is not a URL an HTTP/2 upstream can be asked")]
    Target(String),
    /// The connection failed while the request was sent or its answer read.
    #[error(transparent)]
    Http(#[from] hyper::Error),
}

/// One server thread's connections to one upstream.
#[derive(Debug)]
pub(super) struct UpstreamPool {
    /// `host:port`, to connect to.
    address: String,
    /// The scheme and authority of the upstream's URL: what an HTTP/2 request names
    /// when the client sent no Host.
    base: Uri,
    /// For an `https://` upstream: its TLS settings and the name its certificate must
    /// have (sent by SNI).
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    /// The same TLS settings offering `http/1.1` alone, for WebSocket handshakes.
    upgrade_tls: Option<Arc<rustls::ClientConfig>>,
    connect_timeout: Duration,
    /// HTTP/1.1's idle connections.
    idle: Mutex<Vec<Idle>>,
    /// Whether the upstream speaks HTTP/2: `http2: true`, or it chose `h2` by ALPN.
    speaks_h2: AtomicBool,
    /// HTTP/2's connection, when it does (none until the first request, or after it
    /// closed).
    http2: Mutex<Option<http2::SendRequest<Body>>>,
}

/// A new connection, in the protocol the upstream chose.
enum Connection {
    Http1(SendRequest<Body>),
    Http2(http2::SendRequest<Body>),
}

#[derive(Debug)]
struct Idle {
    sender: SendRequest<Body>,
    since: Instant,
}

impl Idle {
    /// Open, and idle for no longer than the idle timeout.
    fn usable(&self) -> bool {
        self.since.elapsed() <= IDLE_TIMEOUT && !self.sender.is_closed()
    }
}

/// A connection opened to the upstream, before HTTP.
enum Opened {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl UpstreamPool {
    /// An empty pool for `upstream`, with a task that closes connections idle for
    /// longer than the idle timeout. Call it inside a Tokio runtime.
    pub(super) fn new(upstream: &Upstream) -> Arc<Self> {
        let base = &upstream.base;
        let authority = base.authority().map_or("", |a| a.as_str());
        let address = match (base.port_u16(), upstream.tls.is_some()) {
            (Some(_), _) => authority.to_owned(),
            (None, true) => format!("{authority}:443"),
            (None, false) => format!("{authority}:80"),
        };
        let tls = upstream
            .tls
            .as_ref()
            .map(|tls| (Arc::clone(&tls.config), tls.name.clone()));
        let upgrade_tls = upstream.tls.as_ref().map(|tls| {
            let mut config = rustls::ClientConfig::clone(&tls.config);
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        });
        let pool = Arc::new(Self {
            address,
            base: base.clone(),
            tls,
            upgrade_tls,
            connect_timeout: upstream.connect_timeout,
            idle: Mutex::new(Vec::new()),
            speaks_h2: AtomicBool::new(upstream.http2),
            http2: Mutex::new(None),
        });
        tokio::spawn(close_idle(Arc::downgrade(&pool)));
        pool
    }

    /// Sends `request` (in origin form) on an idle connection, or a new one, and
    /// returns the upstream's answer as it starts.
    pub(super) async fn send(
        self: &Arc<Self>,
        mut request: Request<Body>,
    ) -> Result<Response<Body>, UpstreamError> {
        if self.speaks_h2.load(Ordering::Relaxed) {
            return self.send_http2(request).await;
        }
        loop {
            let (mut sender, reused) = match self.take_idle().await {
                Some(sender) => (sender, true),
                None => match self.connect().await? {
                    Connection::Http1(sender) => (sender, false),
                    // The upstream chose h2: this connection is the pool's from now on.
                    Connection::Http2(sender) => {
                        *lock(&self.http2) = Some(sender);
                        self.speaks_h2.store(true, Ordering::Relaxed);
                        return self.send_http2(request).await;
                    }
                },
            };
            match sender.try_send_request(request).await {
                Ok(response) => return Ok(self.lend(sender, response)),
                Err(mut error) => match error.take_message() {
                    // The upstream closed an idle connection as it was taken: the
                    // request was not sent, so it can go on another.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(error.into_error().into()),
                },
            }
        }
    }

    /// Sends `request` as a stream of the HTTP/2 connection (opened if there is none
    /// open): its target absolute, its Host as `:authority`.
    async fn send_http2(&self, request: Request<Body>) -> Result<Response<Body>, UpstreamError> {
        let shared = &self.http2;
        let (mut parts, body) = request.into_parts();
        let authority = parts
            .headers
            .remove(header::HOST)
            .and_then(|host| host.to_str().ok().map(str::to_owned))
            .or_else(|| self.base.authority().map(|a| a.as_str().to_owned()))
            .unwrap_or_default();
        let scheme = self.base.scheme_str().unwrap_or("http");
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let absolute = format!("{scheme}://{authority}{target}");
        parts.uri = absolute
            .parse()
            .map_err(|_| UpstreamError::Target(absolute))?;
        // HTTP/2 has no connection-specific fields (its TE may only be `trailers`).
        parts.headers.remove(header::CONNECTION);
        parts.version = axum::http::Version::HTTP_2;
        let open = lock(shared).clone().filter(|sender| !sender.is_closed());
        let mut sender = match open {
            Some(sender) => sender,
            None => {
                let sender = self.connect_http2().await?;
                *lock(shared) = Some(sender.clone());
                sender
            }
        };
        sender.ready().await?;
        let response = sender
            .send_request(Request::from_parts(parts, body))
            .await?;
        Ok(response.map(Body::new))
    }

    /// Sends an upgrade request (a WebSocket handshake) on a connection of its own,
    /// never pooled: once the upstream answers `101`, the connection is the
    /// upgraded one's (`hyper::upgrade::on` of the answer).
    pub(super) async fn send_upgrade(
        &self,
        request: Request<Body>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let mut sender = match self.open(self.upgrade_tls.as_ref()).await? {
            Opened::Plain(stream) => upgradable_over(stream).await?,
            Opened::Tls(stream) => upgradable_over(stream).await?,
        };
        Ok(sender.send_request(request).await?)
    }

    /// The most recently used idle connection that is still open, ready for a request.
    async fn take_idle(&self) -> Option<SendRequest<Body>> {
        loop {
            let idle = self.lock().pop()?;
            if !idle.usable() {
                continue;
            }
            let mut sender = idle.sender;
            // Back in the pool only once its last answer was read, so ready at once
            // unless it is closing.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    /// A new connection to the upstream, TLS's handshake done (within the connect
    /// timeout, the TCP connection's and the handshake's each).
    /// With TLS, `alpn` replaces the pool's settings (a WebSocket's, `http/1.1` only).
    async fn open(
        &self,
        alpn: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Opened, UpstreamError> {
        let stream = tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.address))
            .await
            .map_err(|_| UpstreamError::ConnectTimeout(self.address.clone()))?
            .map_err(|error| UpstreamError::Connect(self.address.clone(), error))?;
        let _ = stream.set_nodelay(true);
        let Some((config, name)) = &self.tls else {
            return Ok(Opened::Plain(stream));
        };
        let connector = TlsConnector::from(Arc::clone(alpn.unwrap_or(config)));
        let stream = tokio::time::timeout(
            self.connect_timeout,
            connector.connect(name.clone(), stream),
        )
        .await
        .map_err(|_| UpstreamError::ConnectTimeout(self.address.clone()))?
        .map_err(|error| UpstreamError::Tls(self.address.clone(), error))?;
        Ok(Opened::Tls(Box::new(stream)))
    }

    /// A new connection in the protocol the upstream chose by ALPN (cleartext:
    /// HTTP/1.1).
    async fn connect(&self) -> Result<Connection, UpstreamError> {
        Ok(match self.open(None).await? {
            Opened::Plain(stream) => Connection::Http1(http1_over(stream).await?),
            Opened::Tls(stream) if stream.get_ref().1.alpn_protocol() == Some(b"h2") => {
                Connection::Http2(http2_over(stream).await?)
            }
            Opened::Tls(stream) => Connection::Http1(http1_over(stream).await?),
        })
    }

    async fn connect_http2(&self) -> Result<http2::SendRequest<Body>, UpstreamError> {
        match self.open(None).await? {
            Opened::Plain(stream) => http2_over(stream).await,
            Opened::Tls(stream) => http2_over(stream).await,
        }
    }

    /// The response, with a body that returns `sender` to the pool once read to its end
    /// (at once, when the answer has no body).
    fn lend(
        self: &Arc<Self>,
        sender: SendRequest<Body>,
        response: Response<Incoming>,
    ) -> Response<Body> {
        response.map(|body| {
            Body::new(Lent {
                body,
                ended: false,
                lease: Some((sender, Arc::clone(self))),
            })
        })
    }

    fn put(&self, sender: SendRequest<Body>) {
        let mut idle = self.lock();
        if idle.len() < MAX_IDLE && !sender.is_closed() {
            idle.push(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        lock(&self.idle)
    }

    /// How many connections are idle in the pool.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.lock().len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An HTTP/1.1 connection over `io`, driven by a task of its own.
async fn http1_over<I>(io: I) -> Result<SendRequest<Body>, UpstreamError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "an upstream connection failed");
        }
    });
    Ok(sender)
}

/// An HTTP/1.1 connection over `io` that may be upgraded, driven by a task of its
/// own.
async fn upgradable_over<I>(io: I) -> Result<SendRequest<Body>, UpstreamError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!(%error, "an upstream connection failed");
        }
    });
    Ok(sender)
}

/// An HTTP/2 connection over `io`, driven by a task of its own.
async fn http2_over<I>(io: I) -> Result<http2::SendRequest<Body>, UpstreamError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(TokioIo::new(io))
        .await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "an upstream connection failed");
        }
    });
    Ok(sender)
}

/// Every half idle timeout, closes the connections idle for longer (until the pool goes).
async fn close_idle(pool: Weak<UpstreamPool>) {
    let mut every = tokio::time::interval(IDLE_TIMEOUT / 2);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(pool) = pool.upgrade() else { break };
        pool.lock().retain(Idle::usable);
    }
}

/// An upstream response body that holds the connection it came on, and hands it back
/// to the pool when dropped after its end.
struct Lent {
    body: Incoming,
    ended: bool,
    lease: Option<(SendRequest<Body>, Arc<UpstreamPool>)>,
}

impl HttpBody for Lent {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if (self.ended || self.body.is_end_stream())
            && let Some((sender, pool)) = self.lease.take()
        {
            pool.put(sender);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::http::StatusCode;
    use http_body_util::BodyExt;
    use hyper::service::service_fn;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// An upstream answering every request with `status` and `body_bytes` bytes; it
    /// counts the connections it accepted. With `keep_alive` off it closes each after
    /// one answer.
    async fn upstream(status: u16, body_bytes: usize, keep_alive: bool) -> (Uri, Arc<AtomicUsize>) {
        let (listener, base) = listen().await;
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                let answer = service_fn(move |_| async move {
                    let mut response = Response::new(http_body_util::Full::new(
                        bytes::Bytes::from(vec![b'x'; body_bytes]),
                    ));
                    *response.status_mut() = StatusCode::from_u16(status).unwrap();
                    Ok::<_, std::convert::Infallible>(response)
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .keep_alive(keep_alive)
                        .serve_connection(TokioIo::new(stream), answer),
                );
            }
        });
        (base, accepted)
    }

    /// A loopback listener and its `http://` address.
    async fn listen() -> (TcpListener, Uri) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        (listener, base.parse().unwrap())
    }

    /// A pool for the HTTP/1.1 upstream at `base`.
    fn plain(base: &Uri) -> Arc<UpstreamPool> {
        UpstreamPool::new(&Upstream {
            base: base.clone(),
            tls: None,
            http2: false,
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            max_body_bytes: 1,
            max_buffered_bytes: 1,
            body_timeout: Duration::from_secs(1),
            websocket_idle_timeout: Duration::from_secs(1),
        })
    }

    fn get() -> Request<Body> {
        Request::get("/")
            .header("host", "upstream")
            .body(Body::empty())
            .unwrap()
    }

    async fn read_all(pool: &Arc<UpstreamPool>) -> (StatusCode, usize) {
        let response = pool.send(get()).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body.len())
    }

    #[tokio::test]
    async fn sequential_requests_share_one_connection() {
        let (base, accepted) = upstream(200, 10_000, true).await;
        let pool = plain(&base);
        for _ in 0..20 {
            assert_eq!(read_all(&pool).await, (StatusCode::OK, 10_000));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(), 1);
    }

    #[tokio::test]
    async fn answers_without_a_body_give_the_connection_back_at_once() {
        let (base, accepted) = upstream(204, 0, true).await;
        let pool = plain(&base);
        for _ in 0..5 {
            let response = pool.send(get()).await.unwrap();
            assert_eq!(response.status(), StatusCode::NO_CONTENT);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn concurrent_requests_open_connections_and_keep_them() {
        let (base, accepted) = upstream(200, 100, true).await;
        let pool = plain(&base);
        let (a, b) = tokio::join!(pool.send(get()), pool.send(get()));
        drop((a.unwrap(), b.unwrap()));
        // Both bodies were dropped before their end: neither connection is reused.
        assert_eq!(pool.idle_count(), 0);
        let (a, b) = tokio::join!(read_all(&pool), read_all(&pool));
        assert_eq!((a, b), ((StatusCode::OK, 100), (StatusCode::OK, 100)));
        assert_eq!(accepted.load(Ordering::SeqCst), 4);
        assert_eq!(pool.idle_count(), 2);
    }

    #[tokio::test]
    async fn at_most_64_connections_wait_idle_after_a_burst() {
        let (base, accepted) = upstream(200, 10, true).await;
        let pool = plain(&base);
        // Every answer held until all have started: 80 connections at once.
        let responses: Vec<Response<Body>> = {
            let mut burst = tokio::task::JoinSet::new();
            for _ in 0..80 {
                let pool = Arc::clone(&pool);
                burst.spawn(async move { pool.send(get()).await.unwrap() });
            }
            burst.join_all().await
        };
        assert_eq!(accepted.load(Ordering::SeqCst), 80);
        for response in responses {
            response.into_body().collect().await.unwrap();
        }
        assert_eq!(pool.idle_count(), MAX_IDLE);
    }

    #[tokio::test]
    async fn a_body_cut_short_closes_its_connection() {
        let (base, accepted) = upstream(200, 4 << 20, true).await;
        let pool = plain(&base);
        let mut body = pool.send(get()).await.unwrap().into_body();
        body.frame().await.unwrap().unwrap();
        drop(body);
        assert_eq!(pool.idle_count(), 0);
        assert_eq!(read_all(&pool).await, (StatusCode::OK, 4 << 20));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn connections_the_upstream_closes_are_not_reused() {
        let (base, accepted) = upstream(200, 10, false).await;
        let pool = plain(&base);
        for _ in 0..5 {
            assert_eq!(read_all(&pool).await, (StatusCode::OK, 10));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn an_idle_connection_closed_by_the_upstream_is_replaced() {
        // Answers one request per connection, keep-alive as far as the client can
        // tell, then closes it while it is idle.
        // The test waits for each close (no sleeps: they raced under load).
        let (listener, base) = listen().await;
        let (closed, mut was_closed) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request).await.unwrap();
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await
                    .unwrap();
                stream.shutdown().await.unwrap();
                drop(stream);
                closed.send(()).unwrap();
            }
        });
        let pool = plain(&base);
        for _ in 0..3 {
            assert_eq!(read_all(&pool).await, (StatusCode::OK, 2));
            was_closed.recv().await.unwrap();
        }
    }

    #[tokio::test]
    async fn chunked_answers_give_the_connection_back_at_their_end() {
        // A chunked answer has no length: only its last chunk tells that it ended.
        let (listener, base) = listen().await;
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = [0u8; 1024];
                    // One GET per read: the client sends the next only after this answer.
                    while stream.read(&mut request).await.is_ok_and(|n| n > 0) {
                        let answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                                       2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n";
                        stream.write_all(answer).await.unwrap();
                    }
                });
            }
        });
        let pool = plain(&base);
        for _ in 0..5 {
            assert_eq!(read_all(&pool).await, (StatusCode::OK, 5));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(), 1);
    }

    #[tokio::test]
    async fn an_upstream_that_is_not_there_is_an_error() {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let base: Uri = format!("http://127.0.0.1:{port}").parse().unwrap();
        let pool = plain(&base);
        let error = pool.send(get()).await.unwrap_err();
        assert!(matches!(error, UpstreamError::Connect(..)), "{error}");
    }
}
