//! Redis Sentinel: the primary's address, asked of the sentinels.
//!
//! weir connects to the primary the sentinels name, as to a single server. It follows
//! a failover through the health loop: a primary that stops answering, or answers as
//! a replica (`ROLE`; `READONLY` to a check), is lost, and each probe while it is
//! lost opens a fresh connection, which asks the sentinels again (on connections to
//! them kept between asks, [`SentinelLinks`]). Until they name a primary that
//! answers, each rule's failure policy applies.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};

use super::RedisAccess;
use super::{access, server_name};
use crate::StoreError;

/// The URL of the primary that the first of `sentinels` to answer names for
/// `master`, within `timeout` per sentinel, with the sentinels' scheme (`rediss://`
/// for TLS) and without credentials (the data nodes' are added to it). Sentinels are
/// reached with `access`: the sentinels' credentials (see `RedisAccess::with`), else
/// those of their own URLs, and the store's TLS.
pub(super) async fn primary(
    sentinels: &[String],
    master: &str,
    access: &RedisAccess,
    timeout: Duration,
    links: &SentinelLinks,
) -> Result<String, StoreError> {
    let mut failures = Vec::new();
    let mut refused = false;
    for sentinel in sentinels {
        match ask(sentinel, master, access, timeout, links).await {
            Ok(Some((host, port))) => {
                let scheme = if sentinel.starts_with("rediss://") {
                    "rediss"
                } else {
                    "redis"
                };
                return Ok(format!("{scheme}://{host}:{port}"));
            }
            Ok(None) => failures.push(format!(
                "{}: knows no primary named {master}",
                access::redacted(sentinel)
            )),
            Err(Failure::Refused(reason)) => {
                refused = true;
                failures.push(format!("{}: {reason}", access::redacted(sentinel)));
            }
            Err(Failure::Down(error)) => {
                failures.push(format!("{}: {error}", access::redacted(sentinel)));
            }
        }
    }
    let said = format!("no sentinel named a primary: {}", failures.join("; "));
    // A sentinel that refused weir (its certificate, its password) does not mend by
    // waiting, and the others did not answer at all.
    Err(if refused {
        StoreError::Refused(said)
    } else {
        StoreError::Unavailable(said)
    })
}

/// Why a sentinel did not name a primary.
enum Failure {
    /// It refused weir: a certificate that does not verify, a password it rejects.
    Refused(String),
    /// It did not answer, or answered what weir cannot read.
    Down(String),
}

/// The connections to the sentinels, kept from one ask to the next: the health loop
/// asks every 500 ms, and a fresh connection each time would cost a TLS handshake
/// (and redis-rs 1.8 loads the system's roots for each TLS connection, even with a
/// CA given: `create_rustls_config` in its `src/connection.rs`).
#[derive(Default)]
pub(super) struct SentinelLinks(Mutex<HashMap<String, MultiplexedConnection>>);

/// `SENTINEL GET-MASTER-ADDR-BY-NAME master` on `sentinel`: its primary's host and
/// port, none when it knows no such master. On the kept connection, else (none, or
/// it failed) on a fresh one, which is kept.
async fn ask(
    sentinel: &str,
    master: &str,
    access: &RedisAccess,
    timeout: Duration,
    links: &SentinelLinks,
) -> Result<Option<(String, u16)>, Failure> {
    let kept = links.0.lock().get(sentinel).cloned();
    if let Some(mut connection) = kept {
        let answer = tokio::time::timeout(timeout, get_master_addr(&mut connection, master)).await;
        match answer {
            Ok(Ok(answer)) => return read_address(answer).map_err(Failure::Down),
            // A sentinel that does not answer within the timeout is not waited for
            // twice; one that closed the connection (restarted) is asked again on a
            // fresh one.
            Err(_) => {
                links.0.lock().remove(sentinel);
                return Err(Failure::Down(format!("no answer within {timeout:?}")));
            }
            Ok(Err(_)) => {
                links.0.lock().remove(sentinel);
            }
        }
    }
    let user = access::user(access, sentinel);
    let failed = |error: redis::RedisError| match access::refusal(&error, &user) {
        Some(reason) if reason.starts_with("TLS") => Failure::Refused(reason),
        Some(reason) => Failure::Refused(format!("the sentinel refused weir: {reason}")),
        None => Failure::Down(error.to_string()),
    };
    let (client, pinned) = access::single_client(sentinel, access).map_err(failed)?;
    let config = server_name::with_resolver(
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout)),
        pinned,
    );
    let asked = async {
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let answer = get_master_addr(&mut connection, master).await?;
        Ok::<_, redis::RedisError>((connection, answer))
    };
    let (connection, answer) = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| Failure::Down(format!("no answer within {timeout:?}")))?
        .map_err(failed)?;
    links.0.lock().insert(sentinel.to_owned(), connection);
    read_address(answer).map_err(Failure::Down)
}

async fn get_master_addr(
    connection: &mut MultiplexedConnection,
    master: &str,
) -> redis::RedisResult<Value> {
    redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(master)
        .query_async::<Value>(connection)
        .await
}

/// The host and port of an answer to `SENTINEL GET-MASTER-ADDR-BY-NAME`.
fn read_address(answer: Value) -> Result<Option<(String, u16)>, String> {
    match answer {
        Value::Nil => Ok(None),
        Value::Array(parts) => match parts.as_slice() {
            [host, port] => {
                let host: String =
                    redis::from_redis_value(host.clone()).map_err(|e| e.to_string())?;
                let port: String =
                    redis::from_redis_value(port.clone()).map_err(|e| e.to_string())?;
                let port = port.parse().map_err(|_| format!("port `{port}`"))?;
                Ok(Some((host, port)))
            }
            _ => Err(format!("unexpected answer {parts:?}")),
        },
        other => Err(format!("unexpected answer {other:?}")),
    }
}
