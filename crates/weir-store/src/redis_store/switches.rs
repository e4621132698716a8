//! Sentinel's `+switch-master`: the sentinels announce a failover as they make it
//! (see [`CHANNELS`]), so weir subscribes on each of them and probes at once (the probe asks the
//! sentinels which server is the primary, and moves to it) rather than at its next
//! poll (`SENTINEL_EVERY` in `probe`, which stays, for a subscription that is down).
//!
//! A message is only a reason to ask: weir never takes an address from it. Bounded
//! against a sentinel that floods or sends junk: the connection hands each message
//! to a channel of one, dropping what does not fit, without parsing more than its
//! first word; after a wake the loop waits [`WAKE_GAP`] before the next. A
//! subscription that drops (the sentinel restarts, the link is cut, a `PING` every
//! [`KEEPALIVE`] goes unanswered) is made again after [`RESUBSCRIBE_AFTER`]. The
//! subscription needs RESP3 (Redis 6 or later sentinels); where it fails, the poll
//! alone follows a failover.

use std::sync::Weak;
use std::time::Duration;

use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::{RedisAccess, RedisStore, access, server_name};

/// The channels the sentinels announce a new primary on: `+failover-state-reconf-slaves`
/// (the leader, as it starts pointing the replicas at the promoted one, which is when
/// it starts naming it to clients), then `+switch-master` (each sentinel, once the
/// failover is done or once it learns of it). Each with what the payload begins with
/// for the watched master (its name, after `master ` for the first).
const CHANNELS: [(&str, &str); 2] = [
    ("+failover-state-reconf-slaves", "master "),
    ("+switch-master", ""),
];

/// The least time between two probes a sentinel's messages cause.
const WAKE_GAP: Duration = Duration::from_millis(100);

/// How often a quiet subscription is checked by `PING`.
const KEEPALIVE: Duration = Duration::from_secs(1);

/// How long after a subscription failed or dropped it is made again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// What the connection tells the subscription's loop.
#[derive(Debug)]
enum Event {
    /// A message of [`CHANNELS`] about the watched master.
    Switch,
    /// The connection closed.
    Dropped,
}

/// Subscribes to [`CHANNELS`] on `sentinel` while `store` lives, waking its health
/// loop on each message about `master`; remade when it drops. Reached with `access`:
/// the sentinels' credentials and the store's TLS, as in `sentinel::primary`.
pub(super) async fn watch(
    store: Weak<RedisStore>,
    sentinel: String,
    master: String,
    access: RedisAccess,
    timeout: Duration,
) {
    loop {
        if store.strong_count() == 0 {
            return;
        }
        match subscribe(&sentinel, &master, &access, timeout).await {
            Ok((connection, events)) => {
                tracing::debug!(
                    sentinel = %access::redacted(&sentinel),
                    "subscribed to the sentinel's failover announcements"
                );
                if follow(&store, connection, events, timeout).await.is_none() {
                    return;
                }
            }
            Err(error) => tracing::debug!(
                sentinel = %access::redacted(&sentinel),
                %error,
                "cannot subscribe to the sentinel's failover announcements; asking it every 500 ms instead"
            ),
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

/// Wakes the health loop on each switch until the subscription drops (`Some`) or the
/// store is gone (`None`).
async fn follow(
    store: &Weak<RedisStore>,
    mut connection: redis::aio::MultiplexedConnection,
    mut events: mpsc::Receiver<Event>,
    timeout: Duration,
) -> Option<()> {
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(Event::Switch) => {
                    store.upgrade()?.health.wake();
                    tokio::time::sleep(WAKE_GAP).await;
                }
                Some(Event::Dropped) | None => return Some(()),
            },
            () = tokio::time::sleep(KEEPALIVE) => {
                store.upgrade()?;
                let ping = redis::cmd("PING");
                let answer = ping.query_async::<Value>(&mut connection);
                if !matches!(tokio::time::timeout(timeout, answer).await, Ok(Ok(_))) {
                    return Some(());
                }
            }
        }
    }
}

/// A RESP3 connection to `sentinel` subscribed to [`CHANNELS`], within `timeout`, and
/// the events it gives.
async fn subscribe(
    sentinel: &str,
    master: &str,
    access: &RedisAccess,
    timeout: Duration,
) -> Result<(redis::aio::MultiplexedConnection, mpsc::Receiver<Event>), String> {
    let (client, pinned) = access::single_client(sentinel, access).map_err(|e| e.to_string())?;
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let client =
        redis::Client::open(info.set_redis_settings(settings)).map_err(|e| e.to_string())?;
    let (sender, events) = mpsc::channel(1);
    let master = format!("{master} ");
    let on_push = move |push: PushInfo| {
        let event = match push.kind {
            PushKind::Disconnection => Event::Dropped,
            PushKind::Message if is_switch_of(&push.data, &master) => Event::Switch,
            _ => return Ok::<(), ()>(()),
        };
        // Full: a switch is already waiting to be seen; this one adds nothing.
        let _ = sender.try_send(event);
        Ok(())
    };
    let config = server_name::with_resolver(
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_push_sender(on_push),
        pinned,
    );
    let subscribed = async {
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        connection
            .subscribe(CHANNELS.map(|(channel, _)| channel).as_slice())
            .await?;
        Ok::<_, redis::RedisError>(connection)
    };
    let connection = tokio::time::timeout(timeout, subscribed)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
    Ok((connection, events))
}

/// Whether a message's `data` (channel, payload) is one of [`CHANNELS`] about
/// `master` (its name and a space).
fn is_switch_of(data: &[Value], master: &str) -> bool {
    let [Value::BulkString(channel), Value::BulkString(payload)] = data else {
        return false;
    };
    CHANNELS.iter().any(|(name, before)| {
        channel.as_slice() == name.as_bytes()
            && payload
                .strip_prefix(before.as_bytes())
                .is_some_and(|rest| rest.starts_with(master.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &[u8]) -> Value {
        Value::BulkString(text.to_vec())
    }

    #[test]
    fn only_a_switch_of_the_watched_master_counts() {
        let message = |channel: &[u8], payload: &[u8]| vec![bulk(channel), bulk(payload)];
        let switch = |payload: &[u8]| message(b"+switch-master", payload);
        let watched = "mymaster ";
        assert!(is_switch_of(
            &switch(b"mymaster 127.0.0.1 6379 127.0.0.1 6380"),
            watched
        ));
        assert!(is_switch_of(
            &message(
                b"+failover-state-reconf-slaves",
                b"master mymaster 127.0.0.1 6379"
            ),
            watched
        ));
        assert!(!is_switch_of(
            &message(
                b"+failover-state-reconf-slaves",
                b"master other 127.0.0.1 6379"
            ),
            watched
        ));
        assert!(!is_switch_of(
            &message(b"+failover-state-reconf-slaves", b"mymaster 1 2"),
            watched
        ));
        assert!(!is_switch_of(
            &switch(b"mymaster2 127.0.0.1 6379 127.0.0.1 6380"),
            watched
        ));
        assert!(!is_switch_of(&switch(b"\xff\x00junk"), watched));
        assert!(!is_switch_of(&switch(b""), watched));
        assert!(!is_switch_of(
            &message(b"other", b"mymaster 1 2 3 4"),
            watched
        ));
        assert!(!is_switch_of(&[bulk(b"+switch-master")], watched));
        assert!(!is_switch_of(&[Value::Nil, Value::Int(3)], watched));
    }
}
