//! A small table every instance shares, beside the limit state: one Redis hash of
//! records and a version counter that every change increments, in one slot (the
//! table's name is their hash tag), so that a change and its version are one atomic
//! script and an instance polls a single `GET` to learn that the table changed.
//!
//! Keys: `<prefix>:table{<name>}` (the hash) and `<prefix>:table{<name>}:version`.
//! Limit state keys are `<prefix>:{...`: a `{` right after the prefix's `:`, never a
//! `t`, so the two never meet. weir keeps its runtime overrides here.

use redis::Value;

use super::{RedisStore, classify};
use crate::StoreError;

/// Writes one record, bumps the version; answers the record it replaced, if any.
const PUT: &str = "local old = redis.call('HGET', KEYS[1], ARGV[1]) \
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) redis.call('INCR', KEYS[2]) return old";

/// Removes one record (and bumps the version) when it is there, or only when it holds
/// `ARGV[2]` if that is given; answers the record removed, if any.
const REMOVE: &str = "local old = redis.call('HGET', KEYS[1], ARGV[1]) \
if not old or (ARGV[2] and ARGV[2] ~= old) then return false end \
redis.call('HDEL', KEYS[1], ARGV[1]) redis.call('INCR', KEYS[2]) return old";

/// The version and every record, read at one instant.
const READ: &str = "return {redis.call('GET', KEYS[2]) or '0', redis.call('HGETALL', KEYS[1])}";

/// A table's records at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSnapshot {
    /// The version: it changes with every write.
    pub version: u64,
    /// Every record, field and value.
    pub records: Vec<(String, String)>,
}

impl RedisStore {
    /// Writes `value` under `field` in the shared table `name`; returns the value it
    /// replaced.
    pub async fn table_put(
        &self,
        name: &str,
        field: &str,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        let reply = self.table_script(PUT, name, &[field, value]).await?;
        text_or_nil(reply)
    }

    /// Removes `field` from the shared table `name` (only if it still holds `expected`,
    /// when given: a record that changed meanwhile is kept); returns the value removed.
    pub async fn table_remove(
        &self,
        name: &str,
        field: &str,
        expected: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        let mut args = vec![field];
        args.extend(expected);
        let reply = self.table_script(REMOVE, name, &args).await?;
        text_or_nil(reply)
    }

    /// The version of the shared table `name` (0 before its first write): what an
    /// instance polls to learn that it changed.
    pub async fn table_version(&self, name: &str) -> Result<u64, StoreError> {
        let mut command = redis::cmd("GET");
        command.arg(table_keys(&self.prefix, name).1);
        let reply = self.query(&command).await?.map_err(classify)?;
        match text_or_nil(reply)? {
            None => Ok(0),
            Some(text) => text
                .parse()
                .map_err(|_| StoreError::Protocol(format!("table version `{text}`"))),
        }
    }

    /// Every record of the shared table `name`, with its version.
    pub async fn table_read(&self, name: &str) -> Result<TableSnapshot, StoreError> {
        let reply = self.table_script(READ, name, &[]).await?;
        let bad = || StoreError::Protocol("an unexpected answer to a table read".into());
        let Value::Array(parts) = reply else {
            return Err(bad());
        };
        let [version, Value::Array(flat)] = parts.as_slice() else {
            return Err(bad());
        };
        let version = text_or_nil(version.clone())?
            .and_then(|v| v.parse().ok())
            .ok_or_else(bad)?;
        let mut records = Vec::with_capacity(flat.len() / 2);
        for pair in flat.chunks(2) {
            let [field, value] = pair else {
                return Err(bad());
            };
            match (text_or_nil(field.clone())?, text_or_nil(value.clone())?) {
                (Some(field), Some(value)) => records.push((field, value)),
                _ => return Err(bad()),
            }
        }
        Ok(TableSnapshot { version, records })
    }

    async fn table_script(
        &self,
        script: &str,
        name: &str,
        args: &[&str],
    ) -> Result<Value, StoreError> {
        let (records, version) = table_keys(&self.prefix, name);
        self.refuse_lost(&records)?;
        let mut command = redis::cmd("EVAL");
        command.arg(script).arg(2).arg(records).arg(version);
        for arg in args {
            command.arg(*arg);
        }
        self.query(&command).await?.map_err(classify)
    }
}

/// The hash and the version counter of table `name`, in one slot.
fn table_keys(prefix: &str, name: &str) -> (String, String) {
    let records = format!("{prefix}:table{{{name}}}");
    let version = format!("{records}:version");
    (records, version)
}

fn text_or_nil(value: Value) -> Result<Option<String>, StoreError> {
    match value {
        Value::Nil | Value::Boolean(false) => Ok(None),
        Value::BulkString(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| StoreError::Protocol("a table record is not UTF-8".into())),
        Value::SimpleString(text) => Ok(Some(text)),
        Value::Int(n) => Ok(Some(n.to_string())),
        other => Err(StoreError::Protocol(format!(
            "an unexpected table answer: {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::table_keys;
    use crate::redis_store::hash_slot;

    #[test]
    fn a_tables_keys_share_a_slot_and_meet_no_state_key() {
        let (records, version) = table_keys("weir", "overrides");
        assert_eq!(records, "weir:table{overrides}");
        assert_eq!(hash_slot(records.as_bytes()), hash_slot(version.as_bytes()));
        assert!(!records.starts_with("weir:{"));
    }
}
