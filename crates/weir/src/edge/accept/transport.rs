//! How an accepted TCP connection becomes the bytes a protocol reads and writes.
//!
//! This is where TLS goes: a TLS transport runs its handshake in [`Transport::open`],
//! in the connection's own task (a slow handshake never holds the accept loop) and
//! holding the connection's slot, over a stream whose writes already have the send
//! timeout; it bounds the handshake with a deadline of its own, and the protocol's
//! deadline then applies to the decrypted bytes.

use std::future::Future;
use std::io;

use tokio::net::TcpStream;

use super::{Io, WriteStall};

/// Turns an accepted connection into what its protocol reads and writes.
pub(crate) trait Transport: Send + 'static {
    /// The connection's bytes, as the protocol reads and writes them.
    type Io: Io;

    /// The connection `stream` opened for its protocol, or why it could not be (the
    /// connection is then closed).
    fn open(
        &self,
        stream: WriteStall<TcpStream>,
    ) -> impl Future<Output = io::Result<Self::Io>> + Send + 'static;
}

/// Plain TCP: the protocol reads and writes the stream as accepted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plain;

impl Transport for Plain {
    type Io = WriteStall<TcpStream>;

    fn open(
        &self,
        stream: WriteStall<TcpStream>,
    ) -> impl Future<Output = io::Result<Self::Io>> + Send + 'static {
        std::future::ready(Ok(stream))
    }
}
