//! A fixed window's one-unit check on the instances' clocks, without Lua: `INCRBY` of
//! the window's own counter and `PEXPIRE`, pipelined, as envoyproxy/ratelimit counts.
//! Those two commands cost Redis about what the cheapest Lua call does, and a fifth of
//! what a fixed window decided in Lua does.
//!
//! `INCRBY` counts a denied unit too, but a one-unit check is denied only once the
//! window holds its limit, so a count above the limit means the limit: every path reads
//! it so (the Lua's `fixed_counter` reads `min(count, limit)`), and decisions, refunds
//! and previews stay exactly weir-core's within a window. Checks of another cost go by
//! the Lua: a denied check of several units would otherwise hold back units the window
//! still has. A window's counter is its own key (see `keys`), so a clock that steps
//! back into an earlier window counts in that window's counter, where the other
//! algorithms' single state stays in the newest window.
//!
//! The two commands are not one step: a connection lost between them leaves the
//! counter without expiry until its next check sets it again, and forever if that was
//! its window's last check (one small key, never read again).

use std::time::Duration;

use redis::Pipeline;
use weir_core::Decision;

use super::params::ScriptPolicy;
use crate::Check;

/// Whether `check` goes by the pipeline: one unit of a fixed window kept in counters.
pub(super) fn applies(check: &Check<'_>, policy: &ScriptPolicy) -> bool {
    check.cost == 1 && policy.window.is_some()
}

/// `INCRBY key 1` and `PEXPIRE key` to a second past the window's end (by Redis's clock,
/// as the Lua's `expiry_ms` keeps state with the instances' clocks); replies the count.
pub(super) fn pipeline(key: &str, policy: &ScriptPolicy, now_us: u64) -> Pipeline {
    let expiry_ms = until_next(policy, now_us).div_ceil(1_000).max(1) + 1_000;
    let mut pipeline = redis::pipe();
    pipeline
        .cmd("INCRBY")
        .arg(key)
        .arg(1)
        .cmd("PEXPIRE")
        .arg(key)
        .arg(expiry_ms)
        .ignore();
    pipeline
}

/// The decision for a window whose counter `INCRBY` took to `count`.
pub(super) fn decision(count: i64, policy: &ScriptPolicy, now_us: u64) -> Decision {
    let limit = policy.limit;
    let count = u64::try_from(count).unwrap_or(0);
    let allowed = count <= limit;
    let until_next = Duration::from_micros(until_next(policy, now_us));
    Decision {
        allowed,
        limit,
        remaining: limit - count.min(limit),
        reset_after: until_next,
        retry_after: (!allowed).then_some(until_next),
        delay: Duration::ZERO,
    }
}

/// Microseconds from `now_us` to the end of its window.
fn until_next(policy: &ScriptPolicy, now_us: u64) -> u64 {
    policy.period_us - now_us % policy.period_us
}
