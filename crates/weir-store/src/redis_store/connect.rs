//! Opening a connection: to a server, a cluster, or the primary the sentinels name,
//! with the configured TLS and credentials, within a deadline; a refusal (TLS,
//! credentials) told apart from an outage. And the admission a service asks for
//! before it starts ([`RedisStore::admitted`]): whether Redis lets weir in and run
//! its checks.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::{AsyncConnectionConfig, RedisError};

use weir_core::{Algorithm, Clock, Policy};

use super::link::Link;
use super::sentinel::SentinelLinks;
use super::server_name::CLUSTER_REFUSAL;
use super::{Connection, RedisStore, RedisStoreConfig, RedisTarget, access, classify, sentinel};
use crate::{Check, Key, Store, StoreError};

/// How long the first connection may take: the timeout, but at least a second (a
/// handshake across a network, TLS, may take longer than one check). Reconnecting
/// takes at most the timeout, so that probing a frozen server does not slow the noticing
/// of its return.
pub(super) fn first_connect_within(config: &RedisStoreConfig) -> Duration {
    config.timeout.max(Duration::from_secs(1))
}

/// The URL whose user weir logs in to the data nodes as (when none is configured):
/// the server's, or a cluster's first seed. None through Sentinel: the primary's URL
/// is the sentinels' answer, without a user, and a sentinel's URL is the sentinel's.
fn first_url(config: &RedisStoreConfig) -> &str {
    match &config.target {
        RedisTarget::Single(url) => url.as_str(),
        RedisTarget::Cluster(nodes) => nodes.first().map_or("", String::as_str),
        RedisTarget::Sentinel { .. } => "",
    }
}

/// Opens a connection to the configured server or cluster (or the primary the
/// sentinels name) within `within`.
pub(super) async fn open(
    config: &RedisStoreConfig,
    links: &SentinelLinks,
    within: Duration,
) -> Result<(Connection, String), StoreError> {
    let named = config
        .access
        .tls
        .as_ref()
        .and_then(|tls| tls.server_name.as_ref());
    if matches!(config.target, RedisTarget::Cluster(_)) && named.is_some() {
        return Err(StoreError::Refused(format!(
            "TLS: no server name can be checked on a Redis Cluster: {CLUSTER_REFUSAL}"
        )));
    }
    let timeout = config.timeout;
    // Opening a connection (TCP, a TLS handshake, AUTH, HELLO) is not a check: it gets
    // the first connection's time, not a check's (a TLS handshake alone may take
    // longer than the 50 ms default of `timeout`).
    let opening = first_connect_within(config);
    let started = tokio::time::Instant::now();
    // A single server's URL, or the primary's as the sentinels name it now.
    let url = match &config.target {
        RedisTarget::Single(url) => url.clone(),
        RedisTarget::Sentinel {
            sentinels,
            master,
            credentials,
        } => tokio::time::timeout(
            within,
            sentinel::primary(
                sentinels,
                master,
                &config.access.with(credentials),
                timeout,
                links,
            ),
        )
        .await
        .map_err(|_| StoreError::Timeout(within))??,
        RedisTarget::Cluster(_) => String::new(),
    };
    let within = within.saturating_sub(started.elapsed());
    let connect = async {
        match &config.target {
            RedisTarget::Single(_) | RedisTarget::Sentinel { .. } => {
                let (client, pinned) = access::single_client(&url, &config.access)?;
                let link = match pinned {
                    // Under a server name: the resolver it needs, which a connection
                    // manager does not take.
                    Some(pinned) => {
                        let direct = AsyncConnectionConfig::new()
                            .set_connection_timeout(Some(opening))
                            .set_response_timeout(Some(timeout))
                            .set_dns_resolver(pinned);
                        Link::Named(
                            client
                                .get_multiplexed_async_connection_with_config(&direct)
                                .await?,
                        )
                    }
                    None => {
                        let manager = ConnectionManagerConfig::new()
                            .set_connection_timeout(Some(opening))
                            .set_response_timeout(Some(timeout))
                            .set_number_of_retries(1);
                        Link::Managed(ConnectionManager::new_with_config(client, manager).await?)
                    }
                };
                Ok::<_, RedisError>(Connection::Single(link))
            }
            RedisTarget::Cluster(nodes) => {
                let builder = ClusterClient::builder(nodes.iter().map(String::as_str));
                let client = access::cluster_access(builder, &config.access)
                    .connection_timeout(opening)
                    .response_timeout(timeout)
                    .build()?;
                Ok(Connection::Cluster(client.get_async_connection().await?))
            }
        }
    };
    let user = access::user(&config.access, first_url(config));
    let connection = tokio::time::timeout(within, connect)
        .await
        .map_err(|_| StoreError::Timeout(within))?
        .map_err(|error| match access::refusal(&error, &user) {
            Some(reason) => StoreError::Refused(reason),
            None => classify(error),
        })?;
    Ok((connection, url))
}

impl RedisStore {
    /// Whether Redis lets weir in: one connection opened, weir's Lua prepared and one
    /// check previewed (it writes nothing) on a key of weir's own (the connection
    /// within the first connection's time, each step after it within the store's
    /// `timeout`), then dropped. Fails with [`StoreError::Refused`] only,
    /// when Redis refused weir (a certificate that does not verify, credentials it
    /// rejects, an ACL user that may not run what a check runs), which waiting does
    /// not mend; a Redis that cannot be reached is an outage, for the health loop of
    /// [`RedisStore::start`] to wait out. `clock` is used only with
    /// [`RedisClock::Local`].
    pub async fn admitted(
        config: &RedisStoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<(), StoreError> {
        match Self::reached(config, clock).await {
            Err(StoreError::Refused(reason)) => Err(StoreError::Refused(reason)),
            _ => Ok(()),
        }
    }

    /// [`RedisStore::admitted`], and a Redis that cannot be reached within the first
    /// connection's time is an error too (what `weir check-config --connect` asks:
    /// is the store there, and does it let weir in?).
    pub async fn reached(
        config: &RedisStoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<(), StoreError> {
        let store = Self::unconnected(config, clock, true);
        let (connection, _) = open(config, &store.sentinels, first_connect_within(config)).await?;
        store.connection.store(Some(Arc::new(connection)));
        let user = access::user(&config.access, first_url(config));
        // A server that wants a password weir was not given answers `NOAUTH` to a
        // `PING`; asked first, as Redis 7 closes the connection of a client not yet
        // logged in on a command as long as weir's library (a bare "broken pipe").
        // Not on a cluster: opening it sent `CLUSTER SLOTS`, which answered `NOAUTH`
        // already, and a `PING` there waits for every primary. A `PING` not answered
        // in time leaves the verdict to the preview below.
        if !matches!(config.target, RedisTarget::Cluster(_))
            && let Ok(Err(error)) = store.query(&redis::cmd("PING")).await
            && let Some(reason) = access::refusal(&error, &user)
        {
            return Err(StoreError::Refused(reason));
        }
        store.prepare().await;
        let Ok(policy) = Policy::new(Algorithm::Gcra, 1, Duration::from_secs(1), None) else {
            return Ok(());
        };
        let key = Key {
            rule: "admission",
            identity: "weir-start",
        };
        let check = [Check {
            key,
            policy: &policy,
            cost: 1,
        }];
        match store.preview_all(&check).await {
            Err(StoreError::Protocol(said)) => match access::refused_in(&said, &user) {
                Some(reason) => Err(StoreError::Refused(reason)),
                None => Err(StoreError::Protocol(said)),
            },
            Err(error) => Err(error),
            Ok(_) => Ok(()),
        }
    }
}
