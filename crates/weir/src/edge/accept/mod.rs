//! The accept loop every listener runs: the one place where a connection is accepted,
//! given a slot, held to the send timeout and to its protocol's first deadline, served,
//! and drained at a stop.
//!
//! A listener is its [`Accept`] (connection slots, send timeout, TCP keepalive, and the
//! [`Transport`] that turns an accepted TCP stream into the bytes a protocol reads)
//! and its [`Protocol`]: the HTTP version it speaks ([`Http1`] with its header
//! deadline, [`Http2`] with its preface deadline, [`Auto`] both, told apart by a
//! connection's first bytes, applied here) and what serves one
//! connection ([`Connection`]). The HTTP listeners (`server`) and the gRPC listener
//! (`envoy`) are protocols of this loop, over plain TCP or TLS ([`Tls`]).
//!
//! `slots` bounds the connections held, `stall` the writes that make no progress,
//! `preface` an HTTP/2 connection's start, `idle` its end when it asks nothing, `version` what a connection is held to
//! before it is served (`auto`: both versions and HTTP/2's bounds), `transport` how
//! its bytes are carried (`tls`: the TLS handshake and the certificate chosen by SNI).

/// `AsyncWrite` for a wrapper `$wrapper<T>` that watches only what is read: every
/// write goes to its `inner` as it is.
macro_rules! writes_through {
    ($wrapper:ident) => {
        impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $wrapper<T> {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }

            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.inner).poll_flush(cx)
            }

            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
            }
        }
    };
}

mod auto;
mod idle;
mod preface;
mod slots;
mod stall;
mod tls;
mod transport;
mod version;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use socket2::{SockRef, TcpKeepalive};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

pub(crate) use self::auto::{Auto, AutoConnection};
pub(crate) use self::idle::IDLE_TIMEOUT;
pub use self::slots::ConnectionSlots;
use self::slots::Slot;
pub(crate) use self::stall::{SEND_TIMEOUT, WriteStall};
pub(crate) use self::tls::{Certificates, OverTls, Tls, server_config};
pub(crate) use self::transport::{Plain, Transport};
pub(crate) use self::version::{Http1, Http1Connection, Http2, Version};

/// The bytes of a connection, as a protocol reads and writes them.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// What a listener speaks: the HTTP version of its connections, what serves each one,
/// and what it does when it stops.
pub(crate) trait Protocol: Send + 'static {
    /// HTTP/1.1 or HTTP/2, and so the deadline a new connection is held to.
    type Version: Version;
    /// What serves one connection.
    type Connection: Connection<Self::Version>;

    /// The version of the next connection (with its deadline's settings).
    fn version(&self) -> Self::Version;

    /// What serves the connection accepted from `peer`.
    fn connection(&self, peer: SocketAddr) -> Self::Connection;

    /// What the protocol does once its listener accepts no more, before the
    /// connections are drained (a graceful stop waits for every one of them): nothing,
    /// unless a protocol has streams that would never end by themselves.
    fn stop(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// Serves one connection of version `V`.
pub(crate) trait Connection<V: Version>: Send + 'static {
    /// Serves `connection` until it ends. `graceful` watches the hyper connection, so
    /// that a stop lets it finish what it has begun and then closes it.
    fn serve<I: Io>(
        self,
        connection: V::Opened<I>,
        graceful: Watcher,
    ) -> impl Future<Output = ()> + Send;
}

/// How a listener accepts connections: at most as many at once as its slots, each
/// connection's writes bounded by the send timeout, carried by the transport `T`.
#[derive(Debug)]
pub(crate) struct Accept<T = Plain> {
    slots: ConnectionSlots,
    send_timeout: Duration,
    keepalive: Option<TcpKeepalive>,
    transport: T,
}

impl Accept {
    /// Plain TCP connections, holding one of `slots` each, whose writes may make no
    /// progress for `send_timeout` at most.
    pub(crate) fn new(slots: ConnectionSlots, send_timeout: Duration) -> Self {
        Self {
            slots,
            send_timeout,
            keepalive: None,
            transport: Plain,
        }
    }
}

impl<T> Accept<T> {
    /// The same connections, carried by `transport` (TLS) instead.
    pub(crate) fn over<U: Transport>(self, transport: U) -> Accept<U> {
        Accept {
            slots: self.slots,
            send_timeout: self.send_timeout,
            keepalive: self.keepalive,
            transport,
        }
    }
}

impl<T: Transport> Accept<T> {
    /// With TCP keepalive probes on a connection quiet for `idle`: a peer that vanished
    /// without closing is found even where the protocol sends nothing.
    pub(crate) fn tcp_keepalive(mut self, idle: Duration) -> Self {
        self.keepalive = Some(TcpKeepalive::new().with_time(idle));
        self
    }

    /// Serves `protocol` on `listener` until `shutdown` completes: then accepts no
    /// more, lets the protocol stop, finishes what the connections have begun, and
    /// returns.
    pub(crate) async fn serve<P: Protocol>(
        self,
        listener: TcpListener,
        protocol: P,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = accept(&listener, self.slots.name()) => accepted,
                () = &mut shutdown => break,
            };
            // Served once a slot is free (every thread shares the slots, and each
            // holds the one connection it accepted: a slot freed on another thread is
            // not kept waiting for a connection queued on this thread's socket).
            let slot = tokio::select! {
                slot = self.slots.take() => slot,
                () = &mut shutdown => break,
            };
            self.start(stream, peer, slot, &protocol, graceful.watcher());
        }
        drop(listener);
        protocol.stop().await;
        graceful.shutdown().await;
        Ok(())
    }

    /// Serves the connection `stream` from `peer` in a task of its own, which gives
    /// `slot` back when the connection ends.
    fn start<P: Protocol>(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        slot: Slot,
        protocol: &P,
        graceful: Watcher,
    ) {
        // Answers go out as soon as they are written (no Nagle delay on small ones); a
        // peer gone silent is found.
        let _ = stream.set_nodelay(true);
        if let Some(keepalive) = &self.keepalive {
            let _ = SockRef::from(&stream).set_tcp_keepalive(keepalive);
        }
        // A client that stops reading its answers is closed after the send timeout.
        let opening = self
            .transport
            .open(WriteStall::new(stream, self.send_timeout));
        let (version, connection) = (protocol.version(), protocol.connection(peer));
        tokio::spawn(async move {
            match opening.await {
                Ok(io) => connection.serve(version.open(io), graceful).await,
                Err(error) => tracing::debug!(%error, %peer, "a connection could not be opened"),
            }
            drop(slot);
        });
    }
}

/// The next connection `listener` (named `name`) accepts, and its peer's address.
async fn accept(listener: &TcpListener, name: &'static str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(error) => {
                // Out of file descriptors, say: wait a little rather than spin.
                tracing::warn!(%error, listener = name, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
