//! The Redis store: one limit shared by every weir instance, on Redis or Redis Cluster.
//!
//! Each check (or group of layered checks) is one `EVALSHA` of one Lua script that
//! reads the state, decides, writes the new state and sets its expiry, atomically. The
//! script decides exactly as weir-core does (see `params`), which the conformance
//! suite checks by replaying the same sequences through both.
//!
//! Connections: one multiplexed connection per node (concurrent checks are pipelined
//! on it), reconnecting by itself; every check is bounded by the configured timeout.

mod keys;
mod params;
mod script;

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value};
use weir_core::{Clock, Decision, Policy};

use self::params::ScriptPolicy;
pub use self::params::{RedisPolicyError, check_redis_policy};
use crate::{Check, Key, Store, StoreError, StoreFuture};

/// Where the Redis store's state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis server, e.g. `redis://127.0.0.1:6379`.
    Single(String),
    /// A Redis Cluster, from seed nodes.
    Cluster(Vec<String>),
}

/// Whose clock decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisClock {
    /// The Redis server's `TIME`, read inside the script: one clock per key, so clock
    /// skew between weir instances cannot over-admit (the default).
    #[default]
    Server,
    /// The weir instance's clock, passed to the script.
    Local,
}

/// Configuration of a [`RedisStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisStoreConfig {
    /// The server or cluster.
    pub target: RedisTarget,
    /// Prepended to every key: `<prefix>:{<identity>}:<rule>`.
    pub key_prefix: String,
    /// The longest a check may take, connecting included.
    pub timeout: Duration,
    /// Whose clock decides.
    pub clock: RedisClock,
}

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// Limit state in Redis, shared by every instance that points at it.
pub struct RedisStore {
    /// Set once the first connection is made; the connection reconnects by itself.
    connection: OnceLock<Connection>,
    config: RedisStoreConfig,
    script: script::CheckScript,
    prefix: String,
    timeout: Duration,
    clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the configured server or cluster, failing if it cannot within the
    /// timeout (at least a second). `clock` is used only with [`RedisClock::Local`].
    pub async fn connect(
        config: &RedisStoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let store = Self::unconnected(config, clock);
        let connection = open(config).await?;
        let _ = store.connection.set(connection);
        Ok(store)
    }

    /// A store that connects in the background, retrying with exponential backoff and
    /// jitter until it succeeds; until then every check fails with
    /// [`StoreError::Unavailable`] (and the caller applies its failure policy). Lets a
    /// service start, and serve, while Redis is down. Call inside a Tokio runtime.
    pub fn start(config: &RedisStoreConfig, clock: Arc<dyn Clock>) -> Arc<Self> {
        let store = Arc::new(Self::unconnected(config, clock));
        tokio::spawn(keep_connecting(Arc::downgrade(&store)));
        store
    }

    /// Waits until the first connection is made, for at most `within`; returns whether
    /// it was.
    pub async fn wait_connected(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while self.connection.get().is_none() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    fn unconnected(config: &RedisStoreConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            connection: OnceLock::new(),
            config: config.clone(),
            script: script::CheckScript::new(),
            prefix: config.key_prefix.clone(),
            timeout: config.timeout,
            clock: (config.clock == RedisClock::Local).then_some(clock),
        }
    }

    /// Runs the script on `checks`; writes only if `commit`.
    async fn run(&self, checks: &[Check<'_>], commit: bool) -> Result<Vec<Decision>, StoreError> {
        let prepared = checks
            .iter()
            .map(|c| Ok((*c, ScriptPolicy::new(c.policy)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        if matches!(self.config.target, RedisTarget::Cluster(_))
            && checks
                .iter()
                .any(|c| c.key.identity != checks[0].key.identity)
        {
            return Err(StoreError::Unsupported(
                "layered checks on a Redis Cluster must share one identity (one hash slot)",
            ));
        }
        let now_us = self.clock.as_ref().map(|clock| clock.now() / 1_000);
        let keys: Vec<String> = checks
            .iter()
            .map(|c| keys::redis_key(&self.prefix, c.key))
            .collect();
        let args = script::arguments(now_us, commit, &prepared);
        let reply = match self.query(&self.script.evalsha(&keys, &args)).await? {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.query(&self.script.eval(&keys, &args)).await?
            }
            other => other,
        };
        let reply: Vec<i64> = redis::from_redis_value(reply.map_err(classify)?)
            .map_err(|e| StoreError::Protocol(e.to_string()))?;
        script::decisions(&reply, &prepared)
    }

    /// Sends one command within the timeout. The outer error is the timeout; the inner
    /// one is Redis's answer.
    async fn query(&self, command: &Cmd) -> Result<Result<Value, RedisError>, StoreError> {
        let connection = self
            .connection
            .get()
            .ok_or_else(|| StoreError::Unavailable("not connected to Redis yet".into()))?;
        let reply = match connection {
            Connection::Single(c) => {
                let mut c = c.clone();
                tokio::time::timeout(self.timeout, command.query_async(&mut c)).await
            }
            Connection::Cluster(c) => {
                let mut c = c.clone();
                tokio::time::timeout(self.timeout, command.query_async(&mut c)).await
            }
        };
        reply.map_err(|_| StoreError::Timeout(self.timeout))
    }

    async fn delete(&self, key: Key<'_>) -> Result<(), StoreError> {
        let mut command = redis::cmd("DEL");
        command.arg(keys::redis_key(&self.prefix, key));
        self.query(&command).await?.map(|_| ()).map_err(classify)
    }
}

/// Opens a connection to the configured server or cluster.
async fn open(config: &RedisStoreConfig) -> Result<Connection, StoreError> {
    let timeout = config.timeout;
    let connect = async {
        match &config.target {
            RedisTarget::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                let manager = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1);
                let connection = ConnectionManager::new_with_config(client, manager).await?;
                Ok::<_, RedisError>(Connection::Single(connection))
            }
            RedisTarget::Cluster(nodes) => {
                let client = ClusterClient::builder(nodes.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .build()?;
                Ok(Connection::Cluster(client.get_async_connection().await?))
            }
        }
    };
    tokio::time::timeout(timeout.max(Duration::from_secs(1)), connect)
        .await
        .map_err(|_| StoreError::Timeout(timeout))?
        .map_err(classify)
}

/// Connects in the background until it succeeds or the store is dropped: waits of
/// 100 ms doubling up to 5 s, each with up to a quarter more at random.
async fn keep_connecting(store: Weak<RedisStore>) {
    let mut wait = Duration::from_millis(100);
    let mut warned = false;
    loop {
        let Some(current) = store.upgrade() else {
            return;
        };
        match open(&current.config).await {
            Ok(connection) => {
                let _ = current.connection.set(connection);
                tracing::info!("connected to Redis");
                return;
            }
            Err(error) => {
                if !warned {
                    tracing::warn!(%error, "cannot connect to Redis yet; retrying in the background");
                    warned = true;
                }
            }
        }
        drop(current);
        let jitter = wait.mul_f64(
            f64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos())
                    % 1000,
            ) / 4000.0,
        );
        tokio::time::sleep(wait + jitter).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// Sorts a client error into what the caller acts on.
fn classify(error: RedisError) -> StoreError {
    if error.is_timeout() {
        StoreError::Unavailable(format!("timed out: {error}"))
    } else if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal()
    {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Protocol(error.to_string())
    }
}

impl Store for RedisStore {
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        Box::pin(async move {
            let mut decisions = self.run(&[Check { key, policy, cost }], true).await?;
            decisions
                .pop()
                .ok_or_else(|| StoreError::Protocol("no decision returned".into()))
        })
    }

    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.run(checks, true))
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.run(checks, false))
    }

    fn reset<'a>(&'a self, key: Key<'a>) -> StoreFuture<'a, ()> {
        Box::pin(self.delete(key))
    }

    fn is_ready(&self) -> bool {
        self.connection.get().is_some()
    }
}
