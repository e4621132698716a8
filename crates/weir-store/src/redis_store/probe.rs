//! The health loop's probe: `PING`, and on a cluster each primary by address.

use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisError, Value};

use super::{Connection, RedisStore};
use crate::jitter::Jitter;
use crate::{StoreError, StoreHealth};

/// The health loop: probes when due (see [`StoreHealth`]) until the store is dropped.
pub(super) async fn watch(store: Weak<RedisStore>, health: Arc<StoreHealth>) {
    let jitter = Jitter::new();
    loop {
        let Some(current) = store.upgrade() else {
            return;
        };
        health.record(&current.probe().await);
        drop(current);
        health.next_probe(jitter.next()).await;
    }
}

/// `PING` within `timeout`; on a cluster, every primary that owns slots must answer.
/// A failed probe says the store is unreachable, whatever the client's error.
pub(super) async fn ping(connection: &Connection, timeout: Duration) -> Result<(), StoreError> {
    let reply = match connection {
        Connection::Single(c) => {
            let mut c = c.clone();
            tokio::time::timeout(timeout, redis::cmd("PING").query_async::<Value>(&mut c))
                .await
                .map(|reply| reply.map(|_| ()))
        }
        Connection::Cluster(c) => tokio::time::timeout(timeout, ping_primaries(c.clone())).await,
    };
    reply
        .map_err(|_| StoreError::Timeout(timeout))?
        .map_err(|e| StoreError::Unavailable(e.to_string()))
}

/// Pings each primary that `CLUSTER SLOTS` names, one by one. (The client's own fan-out
/// of `PING` to every primary skips a primary it has no connection to, so a dead one
/// would go unnoticed.) A primary with no address of its own in the reply (announced
/// empty or as a wildcard, which the client resolves to the answering node) is left to
/// the fan-out.
async fn ping_primaries(mut c: ClusterConnection) -> Result<(), RedisError> {
    let slots: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut c)
        .await?;
    for (host, port) in primaries(&slots) {
        let at = SingleNodeRoutingInfo::ByAddress { host, port };
        c.route_command(redis::cmd("PING"), RoutingInfo::SingleNode(at))
            .await?;
    }
    redis::cmd("PING")
        .query_async::<Value>(&mut c)
        .await
        .map(|_| ())
}

/// The addresses of the primaries in a `CLUSTER SLOTS` reply, as the client names its
/// connections, each once.
fn primaries(slots: &Value) -> Vec<(String, u16)> {
    let mut found: Vec<(String, u16)> = Vec::new();
    let Value::Array(ranges) = slots else {
        return found;
    };
    for range in ranges {
        let Value::Array(range) = range else { continue };
        let Some(Value::Array(primary)) = range.get(2) else {
            continue;
        };
        let (Some(Value::BulkString(host)), Some(Value::Int(port))) =
            (primary.first(), primary.get(1))
        else {
            continue;
        };
        let host = String::from_utf8_lossy(host).into_owned();
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        if ["", "?", "0.0.0.0", "::"].contains(&host.as_str()) {
            continue;
        }
        if !found.iter().any(|(h, p)| *h == host && *p == port) {
            found.push((host, port));
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
    fn primaries_are_named_once_without_replicas_or_unknown_hosts() {
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
            [("10.0.0.1".to_owned(), 7000), ("10.0.0.2".to_owned(), 7001)]
        );
        assert!(primaries(&Value::Nil).is_empty());
    }
}
