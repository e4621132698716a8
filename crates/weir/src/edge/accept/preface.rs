//! A deadline on a connection's first bytes: an HTTP/2 client sends its preface and
//! SETTINGS at once, so a connection that has not sent them within its deadline
//! ([`PREFACE_TIMEOUT`] on the gRPC listener, the header timeout on the main one) is
//! not a client weir can serve (a port scan, a half-open connection, a slow drip
//! holding a descriptor), and reading it fails. hyper's HTTP/2 server has no such
//! bound of its own, and its keepalive pings start only once the handshake is done.
//!
//! A connection whose first bytes stop matching the preface is not HTTP/2: the
//! deadline is lifted there, and the HTTP/1.1 server that reads it holds it to its own
//! header deadline (a listener serving both sees which one a client speaks by these
//! bytes, as hyper-util's `auto` server does).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Sleep;

/// How long a client of the gRPC listener has to send the bytes of [`PREFACE_BYTES`].
pub(super) const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

/// The client preface (`PRI * HTTP/2.0...`, 24 bytes), what every HTTP/2 client
/// sends first.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The preface and its SETTINGS frame's header (9 bytes).
const PREFACE_BYTES: usize = PREFACE.len() + 9;

/// `inner`, whose reads fail with [`io::ErrorKind::TimedOut`] if its first
/// [`PREFACE_BYTES`] have not arrived within the deadline (however slowly the client
/// drips them); past them, or once they are not an HTTP/2 preface, it reads and writes
/// as `inner` does.
#[derive(Debug)]
pub(crate) struct PrefaceDeadline<T> {
    inner: T,
    /// Bytes read so far and the deadline; `None` once the preface has come, or once
    /// the bytes are not one.
    pending: Option<(usize, Pin<Box<Sleep>>)>,
    /// Whether the preface has come: the connection speaks HTTP/2.
    http2: bool,
}

impl<T> PrefaceDeadline<T> {
    /// `inner` with `timeout` from now for its preface.
    pub(crate) fn new(inner: T, timeout: Duration) -> Self {
        Self {
            inner,
            pending: Some((0, Box::pin(tokio::time::sleep(timeout)))),
            http2: false,
        }
    }

    /// Whether the connection's first bytes were the HTTP/2 preface.
    pub(crate) fn speaks_http2(&self) -> bool {
        self.http2
    }

    /// Whether the connection's first bytes were not the HTTP/2 preface: it is read
    /// as HTTP/1.1 (or the client closed before they told).
    pub(crate) fn speaks_http1(&self) -> bool {
        self.pending.is_none() && !self.http2
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for PrefaceDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let (before, room) = (buf.filled().len(), buf.remaining() > 0);
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        let Some((seen, deadline)) = &mut this.pending else {
            return read;
        };
        match read {
            Poll::Ready(Ok(())) => {
                let got = &buf.filled()[before..];
                let expected = PREFACE.get(*seen..).unwrap_or_default();
                let common = got.len().min(expected.len());
                let diverged = got[..common] != expected[..common];
                if (got.is_empty() && room) || diverged || *seen + got.len() >= PREFACE_BYTES {
                    // The preface is in, or these bytes are not one (HTTP/1.1), or the
                    // client closed: no deadline any more.
                    this.http2 = !diverged && *seen + got.len() >= PREFACE_BYTES;
                    this.pending = None;
                } else {
                    *seen += got.len();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => match deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no HTTP/2 preface within the deadline",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

writes_through!(PrefaceDeadline);

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    use super::*;

    /// Reads what `connection` gives until it fails or ends; the error kind, if any.
    /// (Within a minute of the clock's: a connection that neither fails nor ends fails
    /// the test rather than hanging it.)
    async fn read_all(
        connection: &mut PrefaceDeadline<tokio::io::DuplexStream>,
    ) -> Option<io::ErrorKind> {
        let mut buf = [0u8; 64];
        let read = async {
            loop {
                match connection.read(&mut buf).await {
                    Ok(0) => return None,
                    Ok(_) => {}
                    Err(error) => return Some(error.kind()),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .expect("the connection neither failed nor ended")
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_fails_at_the_deadline_not_before() {
        let (_client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server, PREFACE_TIMEOUT);
        let start = tokio::time::Instant::now();
        assert_eq!(
            read_all(&mut connection).await,
            Some(io::ErrorKind::TimedOut)
        );
        assert_eq!(start.elapsed(), PREFACE_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_preface_dripped_past_the_deadline_fails() {
        let (mut client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server, PREFACE_TIMEOUT);
        // A byte of the preface every second: 10 in by the deadline, short of it.
        let drip = tokio::spawn(async move {
            for i in 0..PREFACE.len() {
                if client.write_all(&PREFACE[i..=i]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            std::future::pending::<()>().await;
        });
        assert_eq!(
            read_all(&mut connection).await,
            Some(io::ErrorKind::TimedOut)
        );
        drip.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_preface_a_connection_may_stay_quiet() {
        let (mut client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server, PREFACE_TIMEOUT);
        // The preface in two parts, the second just before the deadline.
        client.write_all(&PREFACE[..20]).await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 20);
        tokio::time::sleep(PREFACE_TIMEOUT - Duration::from_millis(1)).await;
        client.write_all(&PREFACE[20..]).await.unwrap();
        client.write_all(&[0; 9]).await.unwrap();
        assert_eq!(connection.read(&mut buf).await.unwrap(), PREFACE_BYTES - 20);
        // Quiet for a long time afterwards: still open, and still reading.
        let quiet = tokio::time::timeout(10 * PREFACE_TIMEOUT, connection.read(&mut buf)).await;
        assert!(
            quiet.is_err(),
            "a read ended while the client was quiet: {quiet:?}"
        );
        client.write_all(b"later").await.unwrap();
        assert_eq!(connection.read(&mut buf).await.unwrap(), 5);
        assert_eq!(&buf[..5], b"later");
        drop(client);
        assert_eq!(read_all(&mut connection).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_that_are_not_a_preface_lift_the_deadline() {
        // An HTTP/1.1 request shorter than the preface, then quiet while it is
        // answered: its own server's header deadline holds it, not this one.
        let (mut client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server, PREFACE_TIMEOUT);
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 18);
        let quiet = tokio::time::timeout(10 * PREFACE_TIMEOUT, connection.read(&mut buf)).await;
        assert!(
            quiet.is_err(),
            "a read ended while the client was quiet: {quiet:?}"
        );
        // `PR` and then not `I`: not a preface either.
        let (mut client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server, PREFACE_TIMEOUT);
        client.write_all(b"PR").await.unwrap();
        assert_eq!(connection.read(&mut buf).await.unwrap(), 2);
        client.write_all(b"OPFIND").await.unwrap();
        assert_eq!(connection.read(&mut buf).await.unwrap(), 6);
        let quiet = tokio::time::timeout(10 * PREFACE_TIMEOUT, connection.read(&mut buf)).await;
        assert!(
            quiet.is_err(),
            "a read ended while the client was quiet: {quiet:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn writes_pass_through() {
        let (mut client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server, PREFACE_TIMEOUT);
        connection.write_all(b"settings").await.unwrap();
        connection.flush().await.unwrap();
        let mut buf = [0u8; 8];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"settings");
    }
}
