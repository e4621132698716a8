//! A deadline on a connection's first bytes: an HTTP/2 client sends its preface and
//! SETTINGS at once, so a connection that has not sent them within
//! [`PREFACE_TIMEOUT`] is not a client weir can serve (a port scan, a half-open
//! connection, a slow drip holding a descriptor), and reading it fails. hyper's HTTP/2
//! server has no such bound of its own, and its keepalive pings start only once the
//! handshake is done.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How long a client has to send the bytes of [`PREFACE_BYTES`].
pub(super) const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

/// The client preface (`PRI * HTTP/2.0...`, 24 bytes) and its SETTINGS frame's header
/// (9 bytes): what every HTTP/2 client sends first.
const PREFACE_BYTES: usize = 24 + 9;

/// `inner`, whose reads fail with [`io::ErrorKind::TimedOut`] if its first
/// [`PREFACE_BYTES`] have not arrived within the deadline (however slowly the client
/// drips them); past them it reads and writes as `inner` does.
#[derive(Debug)]
pub(crate) struct PrefaceDeadline<T> {
    inner: T,
    /// Bytes still to come before the deadline is lifted, and the deadline; `None` once
    /// they have come.
    pending: Option<(usize, Pin<Box<Sleep>>)>,
}

impl<T> PrefaceDeadline<T> {
    /// `inner` with [`PREFACE_TIMEOUT`] from now for its preface.
    pub(crate) fn new(inner: T) -> Self {
        Self {
            inner,
            pending: Some((PREFACE_BYTES, Box::pin(tokio::time::sleep(PREFACE_TIMEOUT)))),
        }
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
        let Some((left, deadline)) = &mut this.pending else {
            return read;
        };
        match read {
            Poll::Ready(Ok(())) => {
                let got = buf.filled().len() - before;
                if (got == 0 && room) || got >= *left {
                    // The preface is in (or the client closed): no deadline any more.
                    this.pending = None;
                } else {
                    *left -= got;
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

impl<T: AsyncWrite + Unpin> AsyncWrite for PrefaceDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

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
        let mut connection = PrefaceDeadline::new(server);
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
        let mut connection = PrefaceDeadline::new(server);
        // A byte every second: 10 in by the deadline, short of the preface.
        let drip = tokio::spawn(async move {
            for _ in 0..PREFACE_BYTES {
                if client.write_all(b"P").await.is_err() {
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
        let mut connection = PrefaceDeadline::new(server);
        // The preface in two parts, the second just before the deadline.
        client.write_all(&[b'x'; 20]).await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 20);
        tokio::time::sleep(PREFACE_TIMEOUT - Duration::from_millis(1)).await;
        client.write_all(&[b'y'; PREFACE_BYTES - 20]).await.unwrap();
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
    async fn writes_pass_through() {
        let (mut client, server) = duplex(1024);
        let mut connection = PrefaceDeadline::new(server);
        connection.write_all(b"settings").await.unwrap();
        connection.flush().await.unwrap();
        let mut buf = [0u8; 8];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"settings");
    }
}
