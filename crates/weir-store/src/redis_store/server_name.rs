//! A TLS server name apart from the address (`tls.server_name`): weir connects to the
//! URL's address and checks the server's certificate for the configured name.
//!
//! redis-rs (1.8) checks the certificate against the host it connects to
//! (`connect_tcp_tls` in `src/aio/tokio.rs` makes the rustls `ServerName` from it), and
//! has no setting for another name. It does take a DNS resolver
//! (`AsyncConnectionConfig::set_dns_resolver`), so weir hands it a URL whose host is
//! the name, and a [`Pinned`] resolver that sends that name to the URL's real host.
//! The resolver is used only for connections weir opens with it: a connection
//! manager takes none (it reconnects through the system's resolver), so a connection
//! with a server name is a plain multiplexed one, which the health loop replaces when
//! it fails. A Redis Cluster connects to each node at the address the cluster
//! announces and checks that address: no resolver can name those in advance, so
//! `server_name` is refused for `redis_cluster` (see [`CLUSTER_REFUSAL`]).

use std::net::SocketAddr;

use redis::io::AsyncDNSResolver;
use redis::{AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, RedisResult};

use super::RedisAccess;

/// Why a Redis Cluster cannot take a server name apart from its nodes' addresses.
pub const CLUSTER_REFUSAL: &str = "a Redis Cluster's client connects to every node at the address the cluster announces (CLUSTER SLOTS) and checks the certificate against that address (redis-rs 1.8, get_connection_info in src/cluster_handling/mod.rs), so no one name can be checked instead: give the nodes certificates for their addresses, or have them announce names (cluster-announce-hostname with cluster-preferred-endpoint-type hostname)";

/// Checks a TLS server name: a DNS name rustls can check a certificate against.
pub fn check_server_name(name: &str) -> Result<(), String> {
    match rustls::pki_types::ServerName::try_from(name) {
        Ok(rustls::pki_types::ServerName::DnsName(_)) => Ok(()),
        Ok(_) => Err(format!(
            "`{name}` is an IP address: write the URL with it, and `server_name` only for a DNS name the certificate holds"
        )),
        Err(_) => Err(format!("`{name}` is not a DNS name")),
    }
}

/// Resolves the server name to the host of the URL it stands for (and any other host
/// as the system does).
#[derive(Debug, Clone)]
pub(super) struct Pinned {
    name: String,
    host: String,
}

impl AsyncDNSResolver for Pinned {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> redis::RedisFuture<'a, Box<dyn Iterator<Item = SocketAddr> + Send + 'a>> {
        let target = if host.eq_ignore_ascii_case(&self.name) {
            self.host.as_str()
        } else {
            host
        };
        Box::pin(async move {
            let found = tokio::net::lookup_host((target, port)).await?;
            Ok(Box::new(found) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
}

/// `url` as redis-rs is to reach it under `access`: with a server name, its host
/// replaced by the name, and the resolver that sends the name back to that host.
pub(super) fn named(
    url: &str,
    access: &RedisAccess,
) -> RedisResult<(redis::ConnectionInfo, Option<Pinned>)> {
    let info = url.into_connection_info()?;
    let name = access.tls.as_ref().and_then(|tls| tls.server_name.as_ref());
    match (name, info.addr().clone()) {
        (
            Some(name),
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
        ) => {
            let pinned = Pinned {
                name: name.clone(),
                host: host.trim_start_matches('[').trim_end_matches(']').into(),
            };
            let addr = ConnectionAddr::TcpTls {
                host: name.clone(),
                port,
                insecure,
                tls_params,
            };
            Ok((info.set_addr(addr), Some(pinned)))
        }
        _ => Ok((info, None)),
    }
}

/// `config` with `pinned`, when there is one.
pub(super) fn with_resolver(
    config: AsyncConnectionConfig,
    pinned: Option<Pinned>,
) -> AsyncConnectionConfig {
    match pinned {
        Some(pinned) => config.set_dns_resolver(pinned),
        None => config,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_name_is_a_dns_name() {
        assert!(check_server_name("redis.test").is_ok());
        assert!(check_server_name("127.0.0.1").unwrap_err().contains("IP"));
        assert!(check_server_name("not a name").is_err());
        assert!(check_server_name("").is_err());
    }
}
