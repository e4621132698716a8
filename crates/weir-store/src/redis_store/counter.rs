//! Window counters: a fixed window on the instances' clocks kept as one counter per
//! window (`window_counters`), and its one-unit check without Lua, as
//! envoyproxy/ratelimit counts: `INCRBY` of the window's own counter and `PEXPIRE`, sent
//! together. Those two commands cost Redis what the cheapest Lua call does, and a fifth
//! of what a fixed window decided in Lua does.
//!
//! What changes against the Lua's one atomic step:
//! - A denied unit was counted by `INCRBY`: it is given back (`DECRBY`) once its
//!   answer is read, so the count stays the units admitted, whatever limit each caller
//!   of the key has (plans) and across reloads. Until then a concurrent check sees one
//!   unit more, and may be denied where the Lua would admit it; nothing is admitted
//!   beyond the limit. Checks of several units, refunds, previews and layered checks go
//!   by the Lua's `fixed_counter`, on the same counter.
//! - The window's number comes from the instance's clock and names the key (see
//!   `keys`), as in envoy: instances whose clocks disagree at a boundary count in
//!   different windows' counters, so in the moments of the disagreement a caller can
//!   reach the end of one window and the start of the next two (the Lua's single state
//!   follows the newest window and allows two). A clock that steps back into an
//!   earlier window counts in that window's counter while it lives (a second past the
//!   window's end).
//! - The commands are separate (each routed and redirected on its own on a cluster,
//!   where a slot can move between them): a connection lost between `INCRBY` and
//!   `PEXPIRE`, or a give-back later than the counter's expiry, leaves one small key
//!   without expiry, which no window reads again.

use std::time::Duration;

use weir_core::Decision;

use super::RedisStore;
use super::params::ScriptPolicy;
use crate::{Check, StoreError};

/// Whether `check` goes by the counter: one unit of a fixed window kept in counters.
pub(super) fn applies(check: &Check<'_>, policy: &ScriptPolicy) -> bool {
    check.cost == 1 && policy.window.is_some()
}

impl RedisStore {
    /// One unit of the fixed window `policy` at `now_us`, on its window's counter `key`.
    pub(super) async fn count(
        &self,
        key: &str,
        policy: &ScriptPolicy,
        now_us: u64,
    ) -> Result<Decision, StoreError> {
        let until_next = policy.period_us - now_us % policy.period_us;
        let mut increment = redis::cmd("INCRBY");
        increment.arg(key).arg(1);
        // A second past the window's end by Redis's clock, as the Lua's `expiry_ms`
        // keeps state with the instances' clocks.
        let mut expire = redis::cmd("PEXPIRE");
        expire
            .arg(key)
            .arg(until_next.div_ceil(1_000).max(1) + 1_000);
        // The expiry's answer is not waited on for the decision: the unit is counted.
        let (counted, _) = tokio::join!(self.query(&increment), self.query(&expire));
        let count: i64 = redis::from_redis_value(counted?.map_err(super::classify)?)
            .map_err(|e| StoreError::Protocol(e.to_string()))?;
        let count = u64::try_from(count).unwrap_or(0);
        let allowed = count <= policy.limit;
        if !allowed {
            let mut give_back = redis::cmd("DECRBY");
            give_back.arg(key).arg(1);
            let given = self.query(&give_back).await;
            if let Err(error) = given.and_then(|r| r.map_err(super::classify)) {
                tracing::warn!(%error, "a denied unit could not be given back; it stays counted until its window ends");
            }
        }
        let until_next = Duration::from_micros(until_next);
        Ok(Decision {
            allowed,
            limit: policy.limit,
            remaining: if allowed { policy.limit - count } else { 0 },
            reset_after: until_next,
            retry_after: (!allowed).then_some(until_next),
            delay: Duration::ZERO,
        })
    }
}
