//! A bound on how long a connection's writes may make no progress.
//!
//! A client that stops reading (answers pipelined and never read, a large response
//! never taken) leaves weir's writes waiting on a full socket buffer forever: hyper
//! has no send timeout, and the header timeout does not run while an answer is being
//! written. Such a connection would hold its descriptor, and its listener's slot
//! ([`super::ConnectionSlots`]), for good. Here a write, flush or shutdown that has
//! waited for longer than the limit without any byte going out fails with
//! [`io::ErrorKind::TimedOut`], and the connection is closed, as nginx's
//! `send_timeout` does. A slow reader is not cut off: any progress starts the wait
//! again.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How long a connection's writes may make no progress, unless configured otherwise
/// (`--send-timeout-ms`; nginx's `send_timeout` is 60 s too).
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// `inner`, whose writes fail once they have made no progress for `limit`.
#[derive(Debug)]
pub(crate) struct WriteStall<T> {
    inner: T,
    limit: Duration,
    /// When the writes waiting now fail; `None` while they make progress.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteStall<T> {
    /// `inner`, its writes allowed to wait `limit` at most without progress.
    pub(crate) fn new(inner: T, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: None,
        }
    }

    /// What a write (or flush, or shutdown) that returned `result` returns: progress
    /// lifts the deadline, waiting starts it (or fails once it has passed).
    fn follow<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if result.is_ready() {
            self.deadline = None;
            return result;
        }
        let limit = self.limit;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer took nothing written for longer than the send timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteStall<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteStall<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.follow(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.follow(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.follow(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let shut = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.follow(cx, shut)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    use super::*;

    const LIMIT: Duration = Duration::from_secs(60);

    /// Writes to `connection` until a write waits; then how long a write of one more
    /// byte takes to fail (on the paused clock), if it does within two limits.
    async fn stalls_for(connection: &mut WriteStall<tokio::io::DuplexStream>) -> Option<Duration> {
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(2 * LIMIT, connection.write_all(&[0; 64 * 1024])).await {
            Ok(Err(error)) => {
                assert_eq!(error.kind(), io::ErrorKind::TimedOut);
                Some(started.elapsed())
            }
            Ok(Ok(())) => panic!("everything was written"),
            Err(_) => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn writes_no_one_takes_fail_after_the_limit() {
        let (near, _far) = duplex(1024);
        let mut connection = WriteStall::new(near, LIMIT);
        let failed_after = stalls_for(&mut connection).await.expect("the write fails");
        assert!(
            failed_after >= LIMIT && failed_after < LIMIT + Duration::from_secs(1),
            "{failed_after:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_is_not_cut_off() {
        let (near, mut far) = duplex(1024);
        let mut connection = WriteStall::new(near, LIMIT);
        // The reader takes 512 bytes every 40 s: the writes wait, but never a limit.
        let reader = tokio::spawn(async move {
            let mut buffer = [0; 512];
            let mut taken = 0;
            while taken < 16 * 1024 {
                tokio::time::sleep(Duration::from_secs(40)).await;
                taken += far.read(&mut buffer).await.unwrap();
            }
            far
        });
        connection
            .write_all(&[0; 16 * 1024])
            .await
            .expect("a slow reader takes it all");
        let _far = reader.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn progress_starts_the_wait_again() {
        let (near, mut far) = duplex(1024);
        let mut connection = WriteStall::new(near, LIMIT);
        connection.write_all(&[0; 1024]).await.unwrap();
        // A write waits 50 s, then the reader takes some: the write goes on.
        let mut buffer = [0; 1024];
        let written =
            tokio::spawn(async move { connection.write_all(&[0; 512]).await.map(|()| connection) });
        tokio::time::sleep(Duration::from_secs(50)).await;
        far.read_exact(&mut buffer[..512]).await.unwrap();
        let mut connection = written.await.unwrap().expect("written once there was room");
        // The next wait has its own full limit.
        assert!(
            stalls_for(&mut connection)
                .await
                .is_some_and(|after| after >= LIMIT)
        );
    }
}
