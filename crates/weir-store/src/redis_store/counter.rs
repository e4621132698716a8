//! Window counters: a fixed window on the instances' clocks kept as one counter per
//! window (`window_counters`), and its one-unit check without Lua, as
//! envoyproxy/ratelimit counts: `INCRBY` of the window's own counter and `PEXPIRE`, sent
//! together. Those two commands cost Redis what the cheapest Lua call does, and a fifth
//! of what a fixed window decided in Lua does.
//!
//! What changes against the Lua's one atomic step:
//! - A denied unit stays counted, as in envoy, and takes room for the rest of the
//!   window: units given back, a limit raised by a reload, or the higher limit of a
//!   caller sharing the key come into use only beyond it. Checks of several units,
//!   refunds, previews and layered checks go by the Lua's `fixed_counter`, on the same
//!   counter.
//! - The window's number comes from the instance's clock and names the key (see
//!   `keys`), as in envoy: instances whose clocks disagree at a boundary count in
//!   different windows' counters for the length of the disagreement; a clock that
//!   steps back counts (and refunds) in an earlier window's counter while it lives,
//!   and an instance more than a second behind can find it expired and count it again.
//! - The commands are separate (each routed and redirected on its own on a cluster,
//!   where a slot can move between them): a connection lost between them can leave one
//!   counter without expiry, which no window reads again.

use std::time::Duration;

use weir_core::Decision;

use super::RedisStore;
use super::params::ScriptPolicy;
use crate::{Check, StoreError};

/// Whether `check` goes by the counter: one unit of a fixed window kept in counters.
pub(super) fn applies(check: &Check<'_>, policy: &ScriptPolicy) -> bool {
    check.cost == 1 && policy.window.is_some() && policy.calendar.is_none()
}

impl RedisStore {
    /// One unit of the fixed window `policy` at `now_us`, on its window's counter `key`.
    pub(super) async fn count(
        &self,
        key: &str,
        policy: &ScriptPolicy,
        now_us: u64,
    ) -> Result<Decision, StoreError> {
        self.refuse_lost(key)?;
        let until_next = policy.period_us - now_us % policy.period_us;
        let mut increment = redis::cmd("INCRBY");
        increment.arg(key).arg(1);
        // A second past the window's end by Redis's clock, as the Lua's `expiry_ms`
        // keeps state with the instances' clocks.
        let mut expire = redis::cmd("PEXPIRE");
        expire
            .arg(key)
            .arg(until_next.div_ceil(1_000).max(1) + 1_000);
        // The expiry's answer does not change the decision: the unit is counted.
        let (counted, _) = tokio::join!(self.query(&increment), self.query(&expire));
        let count: i64 = redis::from_redis_value(counted?.map_err(super::classify)?)
            .map_err(|e| StoreError::Protocol(e.to_string()))?;
        let count = u64::try_from(count).unwrap_or(0);
        let allowed = count <= policy.limit;
        let until_next = Duration::from_micros(until_next);
        Ok(Decision {
            allowed,
            limit: policy.limit,
            remaining: policy.limit.saturating_sub(count),
            reset_after: until_next,
            retry_after: (!allowed).then_some(until_next),
            delay: Duration::ZERO,
        })
    }
}
