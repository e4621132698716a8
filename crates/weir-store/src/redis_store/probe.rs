//! The health loop's probe. On a single server: `PING`, then `ROLE` (a replica cannot
//! take weir's writes). On a cluster: the slot map (`CLUSTER SLOTS`) and state (`CLUSTER
//! INFO`) from the first node that answers, then a `PING` to each primary, all over
//! connections of the probe's own ([`NodeLinks`]); and, when every primary answered, a
//! `PING` over the connection checks use.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::{join_all, select_ok};
use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, FromRedisValue, RedisError, Value,
};

use super::{Connection, RedisAccess, RedisStore, RedisTarget};
use crate::jitter::Jitter;
use crate::{StoreError, StoreHealth};

/// A primary of a cluster: its address, and the slot ranges it holds.
pub(super) type Primary = (String, u16, Vec<RangeInclusive<u16>>);

/// The health loop: probes when due (see [`StoreHealth`]) until the store is dropped.
pub(super) async fn watch(store: Weak<RedisStore>, health: Arc<StoreHealth>) {
    let jitter = Jitter::new();
    loop {
        let Some(current) = store.upgrade() else {
            return;
        };
        health.record(&current.probe().await);
        // Through Sentinel, the sentinels are asked at least this often, busy or idle:
        // a failover can leave the old primary answering (and taking writes) for
        // seconds before it is demoted.
        let sentinel = matches!(current.config.target, RedisTarget::Sentinel { .. });
        drop(current);
        if sentinel {
            let _ = tokio::time::timeout(SENTINEL_EVERY, health.next_probe(jitter.next())).await;
        } else {
            health.next_probe(jitter.next()).await;
        }
    }
}

/// How often the health loop asks the sentinels which server is the primary, at
/// least.
const SENTINEL_EVERY: Duration = Duration::from_millis(500);

/// A single server's probe: `PING`, and `ROLE`, within `timeout` each. A replica
/// answers, but refuses every write (`READONLY`): lost, as far as weir goes. A `ROLE`
/// refused (an ACL user without it) tells nothing: the `PING` decides.
pub(super) async fn ping_single(
    connection: &super::link::Link,
    timeout: Duration,
) -> Result<(), StoreError> {
    let mut c = connection.clone();
    within(timeout, redis::cmd("PING").query_async::<Value>(&mut c)).await?;
    let role = tokio::time::timeout(
        timeout,
        redis::cmd("ROLE").query_async::<Vec<Value>>(&mut c),
    )
    .await
    .map_err(|_| StoreError::Timeout(timeout))?;
    match role {
        Ok(role) => match role.first() {
            Some(Value::BulkString(role)) if role.as_slice() != b"master" => {
                Err(StoreError::Unavailable(
                    "the server is a replica: it cannot take weir's writes".into(),
                ))
            }
            _ => Ok(()),
        },
        Err(error) if super::unreachable(&error) => Err(StoreError::Unavailable(error.to_string())),
        Err(_) => Ok(()),
    }
}

/// A probe of the connection checks use, within `timeout`: on a cluster a `PING`, which
/// the client fans out to every primary it holds a connection to; on a single server
/// [`ping_single`].
pub(super) async fn ping_checks_connection(
    connection: &Connection,
    timeout: Duration,
) -> Result<(), StoreError> {
    match connection {
        Connection::Cluster(c) => {
            let mut c = c.clone();
            within(timeout, redis::cmd("PING").query_async::<Value>(&mut c))
                .await
                .map(|_| ())
        }
        Connection::Single(c) => ping_single(c, timeout).await,
    }
}

/// `call` within `timeout`, its error as an outage.
async fn within<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, RedisError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| StoreError::Timeout(timeout))?
        .map_err(|e| StoreError::Unavailable(e.to_string()))
}

/// What a probe of a cluster found: its slot map, and the slots of the primaries that
/// did not answer.
pub(super) struct ClusterView {
    /// The primaries, in the order `CLUSTER SLOTS` named them.
    pub(super) primaries: Vec<Primary>,
    /// The slots of those that did not answer, in order.
    pub(super) lost: Vec<RangeInclusive<u16>>,
}

/// The probe's own connections to a cluster's nodes, one per address, apart from the
/// connection checks go on: a command sent by address on that one, to a node it holds
/// no connection to (a dead primary), makes the client reconnect to the whole cluster,
/// holding up every check in flight.
pub(super) struct NodeLinks {
    /// The first seed's settings (credentials, TLS), which every node shares.
    template: Option<ConnectionInfo>,
    /// The seeds' addresses, asked in turn for the slot map.
    seeds: Vec<(String, u16)>,
    links: Mutex<HashMap<(String, u16), MultiplexedConnection>>,
}

impl NodeLinks {
    /// Links to the nodes of the cluster whose seeds are `urls` (none made yet).
    pub(super) fn new(urls: &[String], access: &RedisAccess) -> Self {
        let infos: Vec<ConnectionInfo> = urls
            .iter()
            .filter_map(|url| super::access::single_client(url, access).ok())
            .map(|(client, _)| client.get_connection_info().clone())
            .collect();
        let seeds = infos
            .iter()
            .filter_map(|info| match info.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    Some((host.clone(), *port))
                }
                _ => None,
            })
            .collect();
        Self {
            template: infos.into_iter().next(),
            seeds,
            links: Mutex::default(),
        }
    }

    /// `command` on the node at `host:port`, within `timeout`, over its link: made
    /// (within `timeout`) when missing, dropped when the node is not reached on it.
    async fn ask<T: FromRedisValue>(
        &self,
        host: &str,
        port: u16,
        command: &Cmd,
        timeout: Duration,
    ) -> Result<T, StoreError> {
        self.ask_node(host, port, command, timeout)
            .await?
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    /// [`NodeLinks::ask`], with the node's own answer apart: the outer error is the
    /// node not reached in time, the inner one what it answered.
    async fn ask_node<T: FromRedisValue>(
        &self,
        host: &str,
        port: u16,
        command: &Cmd,
        timeout: Duration,
    ) -> Result<Result<T, RedisError>, StoreError> {
        let key = (host.to_owned(), port);
        let cached = self.links.lock().get(&key).cloned();
        let mut link = match cached {
            Some(link) => link,
            None => {
                let template = self
                    .template
                    .clone()
                    .ok_or_else(|| StoreError::Unavailable("no seed node to start from".into()))?;
                let addr = match template.addr() {
                    ConnectionAddr::TcpTls {
                        insecure,
                        tls_params,
                        ..
                    } => ConnectionAddr::TcpTls {
                        host: host.to_owned(),
                        port,
                        insecure: *insecure,
                        tls_params: tls_params.clone(),
                    },
                    _ => ConnectionAddr::Tcp(host.to_owned(), port),
                };
                let client = redis::Client::open(template.set_addr(addr))
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                let link = within(
                    timeout,
                    client.get_multiplexed_async_connection_with_config(&config),
                )
                .await?;
                self.links.lock().insert(key.clone(), link.clone());
                link
            }
        };
        let reply = tokio::time::timeout(timeout, command.query_async::<T>(&mut link))
            .await
            .map_err(|_| StoreError::Timeout(timeout));
        // A link the node was not reached on is made again next time; one it answered
        // on (an ACL refusal included) is kept.
        let unreached = match &reply {
            Err(_) => true,
            Ok(Err(error)) => super::unreachable(error),
            Ok(Ok(_)) => false,
        };
        if unreached {
            self.links.lock().remove(&key);
        }
        reply
    }

    /// The cluster as its nodes tell it, each step within `timeout`: the slot map and
    /// state from the first of the seeds and `known` primaries to answer (all asked at
    /// once; a node that knows no slot is not believed), and a `PING` to every primary
    /// at once. Fails when no node answers with a slot map, when the cluster says it
    /// serves no slot (`cluster_state:fail`: a primary gone past `cluster-node-timeout` while full
    /// coverage is required, every slot answering `CLUSTERDOWN`), or when no primary
    /// answers.
    pub(super) async fn view(
        &self,
        timeout: Duration,
        known: &[Primary],
    ) -> Result<ClusterView, StoreError> {
        let mut slots_of = redis::cmd("CLUSTER");
        slots_of.arg("SLOTS");
        // Every seed and known primary at once, the first answer taken: nodes lost
        // together (the first seeds among them) cost one timeout, not one each.
        let mut nodes: Vec<(&str, u16)> = Vec::new();
        let known = known.iter().map(|(host, port, _)| (host, port));
        for (host, port) in self.seeds.iter().map(|(h, p)| (h, p)).chain(known) {
            if !nodes.contains(&(host.as_str(), *port)) {
                nodes.push((host.as_str(), *port));
            }
        }
        if nodes.is_empty() {
            return Err(StoreError::Unavailable("no cluster node to ask".into()));
        }
        let asks = nodes.into_iter().map(|(host, port)| {
            let slots_of = &slots_of;
            Box::pin(async move {
                let slots = self.ask::<Value>(host, port, slots_of, timeout).await?;
                // A node that knows no slot (reset, or not joined yet) is no one to
                // take the map from.
                let found = primaries(&slots);
                if found.is_empty() {
                    return Err(StoreError::Unavailable(format!(
                        "{host}:{port} knows no slot of the cluster"
                    )));
                }
                Ok::<_, StoreError>((host, port, found))
            })
        });
        let ((host, port, primaries), _) = select_ok(asks).await?;
        let mut info_of = redis::cmd("CLUSTER");
        info_of.arg("INFO");
        // An ACL user refused `CLUSTER INFO` learns nothing of the state here (each
        // slot then answers `CLUSTERDOWN`, an outage, as checks find).
        let info = match self
            .ask_node::<String>(host, port, &info_of, timeout)
            .await?
        {
            Ok(info) => info,
            Err(error) if super::unreachable(&error) => {
                return Err(StoreError::Unavailable(error.to_string()));
            }
            Err(_) => String::new(),
        };
        if info.lines().any(|line| line.trim() == "cluster_state:fail") {
            return Err(StoreError::Unavailable(
                "the cluster is down (cluster_state:fail): no slot is served".into(),
            ));
        }
        let ping = redis::cmd("PING");
        // Every primary at once: primaries lost together (a zone cut off) cost the
        // probe one timeout, not one each, before their slots are refused.
        let pings = join_all(
            primaries
                .iter()
                .map(|(host, port, _)| self.ask::<Value>(host, *port, &ping, timeout)),
        )
        .await;
        let mut lost = Vec::new();
        let mut answered = false;
        for ((_, _, ranges), reply) in primaries.iter().zip(pings) {
            match reply {
                Ok(_) => answered = true,
                Err(_) => lost.extend(ranges.iter().cloned()),
            }
        }
        if !answered {
            return Err(StoreError::Unavailable(
                "no primary of the cluster answered".into(),
            ));
        }
        lost.sort_by_key(|range| *range.start());
        Ok(ClusterView { primaries, lost })
    }
}

/// The primaries in a `CLUSTER SLOTS` reply, each once, with the slot ranges each
/// holds, addressed as the client names its connections.
fn primaries(slots: &Value) -> Vec<Primary> {
    let mut found: Vec<Primary> = Vec::new();
    let Value::Array(ranges) = slots else {
        return found;
    };
    for range in ranges {
        let Value::Array(range) = range else { continue };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(primary))) =
            (range.first(), range.get(1), range.get(2))
        else {
            continue;
        };
        let (Some(Value::BulkString(host)), Some(Value::Int(port))) =
            (primary.first(), primary.get(1))
        else {
            continue;
        };
        let host = String::from_utf8_lossy(host).into_owned();
        let (Ok(port), Ok(start), Ok(end)) = (
            u16::try_from(*port),
            u16::try_from(*start),
            u16::try_from(*end),
        ) else {
            continue;
        };
        if ["", "?", "0.0.0.0", "::"].contains(&host.as_str()) {
            continue;
        }
        match found.iter_mut().find(|(h, p, _)| *h == host && *p == port) {
            Some((_, _, held)) => held.push(start..=end),
            None => found.push((host, port, vec![start..=end])),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    fn range(start: i64, end: i64, primary: Value, replicas: Vec<Value>) -> Value {
        let mut range = vec![Value::Int(start), Value::Int(end), primary];
        range.extend(replicas);
        Value::Array(range)
    }

    #[test]
    fn primaries_are_named_once_with_their_slots_without_replicas_or_unknown_hosts() {
        let slots = Value::Array(vec![
            range(0, 99, node("10.0.0.1", 7000), vec![node("10.0.0.4", 7003)]),
            range(100, 199, node("10.0.0.2", 7001), vec![]),
            range(200, 299, node("10.0.0.1", 7000), vec![]),
            range(300, 399, node("", 7002), vec![]),
            range(400, 499, node("?", 7005), vec![]),
            range(500, 599, node("0.0.0.0", 7006), vec![]),
        ]);
        assert_eq!(
            primaries(&slots),
            [
                ("10.0.0.1".to_owned(), 7000, vec![0..=99, 200..=299]),
                ("10.0.0.2".to_owned(), 7001, vec![100..=199])
            ]
        );
        assert!(primaries(&Value::Nil).is_empty());
    }
}
