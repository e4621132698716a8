//! The health loop's probe: `PING`, and on a cluster each primary by address.

use std::ops::RangeInclusive;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{ConnectionAddr, IntoConnectionInfo, RedisError, Value};

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

/// `PING` within `timeout`; on a cluster, every primary that owns slots, each within
/// `timeout`. Returns the slots whose primary did not answer while the rest of the
/// cluster did (none on a single server); fails when nothing answered. A failed probe
/// says the store is unreachable, whatever the client's error. `seeds` are the
/// cluster's configured nodes, asked for its slots when the node the client picks does
/// not answer.
pub(super) async fn ping(
    connection: &Connection,
    timeout: Duration,
    seeds: &[(String, u16)],
) -> Result<Vec<RangeInclusive<u16>>, StoreError> {
    match connection {
        Connection::Single(c) => {
            let mut c = c.clone();
            within(timeout, redis::cmd("PING").query_async::<Value>(&mut c)).await?;
            Ok(Vec::new())
        }
        Connection::Cluster(c) => ping_primaries(c.clone(), timeout, seeds).await,
    }
}

/// The host and port of each seed URL that names them (a Unix socket does not).
pub(super) fn seed_addresses(urls: &[String]) -> Vec<(String, u16)> {
    urls.iter()
        .filter_map(|url| url.as_str().into_connection_info().ok())
        .filter_map(|info| match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                Some((host.clone(), *port))
            }
            _ => None,
        })
        .collect()
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

/// Pings each primary that `CLUSTER SLOTS` names, by address, and returns the slots
/// of those that did not answer; fails when none answered. (The client's own fan-out of
/// `PING` to every primary skips a primary it has no connection to, so a dead one would
/// go unnoticed.) When every primary named answered, the fan-out too, for any primary
/// with no address of its own in the reply (announced empty or as a wildcard, which
/// the client resolves to the answering node).
async fn ping_primaries(
    mut c: ClusterConnection,
    timeout: Duration,
    seeds: &[(String, u16)],
) -> Result<Vec<RangeInclusive<u16>>, StoreError> {
    let mut slots = within(
        timeout,
        redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut c),
    )
    .await;
    for (host, port) in seeds {
        if slots.is_ok() {
            break;
        }
        let at = SingleNodeRoutingInfo::ByAddress {
            host: host.clone(),
            port: *port,
        };
        let ask = c.route_command(
            redis::cmd("CLUSTER").arg("SLOTS").clone(),
            RoutingInfo::SingleNode(at),
        );
        slots = within(timeout, ask).await;
    }
    let slots: Value = slots?;
    let primaries = primaries(&slots);
    let mut lost = Vec::new();
    let mut failed = None;
    for (host, port, ranges) in &primaries {
        let at = SingleNodeRoutingInfo::ByAddress {
            host: host.clone(),
            port: *port,
        };
        let ping = c.route_command(redis::cmd("PING"), RoutingInfo::SingleNode(at));
        if let Err(error) = within(timeout, ping).await {
            lost.extend(ranges.iter().cloned());
            failed = Some(error);
        }
    }
    match failed {
        Some(error) if lost.len() == primaries.iter().map(|p| p.2.len()).sum::<usize>() => {
            Err(error)
        }
        Some(_) => {
            lost.sort_by_key(|range| *range.start());
            Ok(lost)
        }
        None => {
            within(timeout, redis::cmd("PING").query_async::<Value>(&mut c)).await?;
            Ok(lost)
        }
    }
}

/// The primaries in a `CLUSTER SLOTS` reply, each once, with the slot ranges each
/// holds, addressed as the client names its connections.
fn primaries(slots: &Value) -> Vec<(String, u16, Vec<RangeInclusive<u16>>)> {
    let mut found: Vec<(String, u16, Vec<RangeInclusive<u16>>)> = Vec::new();
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
