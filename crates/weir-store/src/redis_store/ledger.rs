//! A ledger every instance shares: one Redis sorted set of members, each scored with
//! the time it ends (milliseconds since the Unix epoch, on the writers' clocks), for
//! things that are in force for a while and must be listed fleet-wide, boundedly.
//! weir keeps a ledger of the bans in force per rule here, so an operator asking any
//! instance sees the bans every instance started.
//!
//! Reading prunes what ended and answers the `cap` longest-lasting members and how
//! many there are: `O(log n + cap)` whatever the ledger holds, never a scan. Writing
//! prunes too, and keeps the set's expiry at its last member's end, so a ledger
//! nobody writes to any more leaves Redis when its last member ends.
//!
//! Key: `<prefix>:ledger{<name>}`, one slot (the name is its hash tag). Limit state
//! keys are `<prefix>:{...` and tables `<prefix>:table{...`: an `l` right after the
//! prefix's `:` meets neither.

use redis::Value;

use super::{RedisStore, classify};
use crate::StoreError;

/// Adds (or moves) `ARGV[1]` to end at `ARGV[2]` (ms), prunes what ended by
/// `ARGV[3]` (now, ms), and keeps the key until its last member ends.
const ADD: &str = "redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) \
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3]) \
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES') \
if last[2] then local ttl = tonumber(last[2]) - tonumber(ARGV[3]) \
if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end end \
return 1";

/// Prunes what ended by `ARGV[1]` (now, ms); answers how many are left and the
/// `ARGV[2]` that end last, with their ends, last first.
const READ: &str = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1]) \
return {redis.call('ZCARD', KEYS[1]), \
redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')}";

/// What a ledger holds at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerPage {
    /// How many members are in force (all of them, not only those answered).
    pub total: u64,
    /// The members that end last, with their ends (ms since the epoch), last first.
    pub members: Vec<(String, u64)>,
}

impl RedisStore {
    /// Records in the shared ledger `name` that `member` is in force until `ends_ms`
    /// (ms since the epoch), as seen at `now_ms`; a member already there takes the new
    /// end.
    pub async fn ledger_add(
        &self,
        name: &str,
        member: &str,
        ends_ms: u64,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let (ends, now) = (ends_ms.to_string(), now_ms.to_string());
        self.ledger_script(ADD, name, &[member, &ends, &now])
            .await
            .map(|_| ())
    }

    /// Removes `member` from the shared ledger `name` (nothing when it is not there).
    pub async fn ledger_remove(&self, name: &str, member: &str) -> Result<(), StoreError> {
        let key = ledger_key(&self.prefix, name);
        self.refuse_lost(&key)?;
        let mut command = redis::cmd("ZREM");
        command.arg(key).arg(member);
        self.query(&command).await?.map(|_| ()).map_err(classify)
    }

    /// The members of the shared ledger `name` in force at `now_ms`: how many, and the
    /// `cap` that end last (pruning those that ended).
    pub async fn ledger_read(
        &self,
        name: &str,
        now_ms: u64,
        cap: usize,
    ) -> Result<LedgerPage, StoreError> {
        let (now, cap) = (now_ms.to_string(), cap.max(1).to_string());
        let reply = self.ledger_script(READ, name, &[&now, &cap]).await?;
        let bad = || StoreError::Protocol("an unexpected answer to a ledger read".into());
        let Value::Array(parts) = reply else {
            return Err(bad());
        };
        let [Value::Int(total), Value::Array(flat)] = parts.as_slice() else {
            return Err(bad());
        };
        let mut members = Vec::with_capacity(flat.len() / 2);
        for pair in flat.chunks(2) {
            let [member, ends] = pair else {
                return Err(bad());
            };
            let member = text(member).ok_or_else(bad)?;
            // A score is sent back as its shortest decimal form (an integer here).
            let ends = text(ends)
                .and_then(|e| e.parse::<f64>().ok())
                .filter(|e| e.is_finite() && *e >= 0.0)
                .ok_or_else(bad)?;
            members.push((member, ends as u64));
        }
        Ok(LedgerPage {
            total: u64::try_from(*total).map_err(|_| bad())?,
            members,
        })
    }

    async fn ledger_script(
        &self,
        script: &str,
        name: &str,
        args: &[&str],
    ) -> Result<Value, StoreError> {
        let key = ledger_key(&self.prefix, name);
        self.refuse_lost(&key)?;
        let mut command = redis::cmd("EVAL");
        command.arg(script).arg(1).arg(key);
        for arg in args {
            command.arg(*arg);
        }
        self.query(&command).await?.map_err(classify)
    }
}

/// The sorted set of ledger `name`.
fn ledger_key(prefix: &str, name: &str) -> String {
    format!("{prefix}:ledger{{{name}}}")
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Double(d) => Some(d.to_string()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::ledger_key;

    #[test]
    fn a_ledger_meets_no_state_key_nor_table() {
        let key = ledger_key("weir", "bans:login");
        assert_eq!(key, "weir:ledger{bans:login}");
        assert!(!key.starts_with("weir:{") && !key.starts_with("weir:table"));
    }
}
