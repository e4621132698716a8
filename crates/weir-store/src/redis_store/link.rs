//! The connection to one server: a connection manager, which reconnects on its own,
//! or, when the server is reached under a TLS server name apart from its address, a
//! multiplexed connection with the resolver that name needs (a connection manager
//! takes none; see `server_name`), which the health loop replaces when it fails.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A connection to one server (or the primary the sentinels name).
#[derive(Clone)]
pub(super) enum Link {
    /// Reconnects by itself when the server comes back.
    Managed(ConnectionManager),
    /// One connection, under a server name.
    Named(MultiplexedConnection),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Managed(c) => c.req_packed_command(cmd),
            Self::Named(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Managed(c) => c.req_packed_commands(cmd, offset, count),
            Self::Named(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Managed(c) => c.get_db(),
            Self::Named(c) => c.get_db(),
        }
    }
}
