//! GCRA and the leaky bucket (as a queue): one number, the theoretical arrival time.
//!
//! Time is counted in ticks of `1 / limit` nanoseconds, so that one unit of cost spaces
//! requests by exactly `period` ticks (the emission interval) whatever the rate.
//! `tat` is when the bucket will be full again. A request of `cost` is admitted iff
//! `max(tat, now) + cost × period − now <= burst × period`: the token bucket's
//! admission, exactly.
//!
//! The leaky bucket is the same admission seen as a queue of `burst` draining at
//! `limit / period`: `max(tat, now) − now` is how long the queue ahead takes to drain,
//! which an admitted request is told to wait (`delay`) so that requests leave at the
//! steady rate.

use super::AlgorithmState;
use super::time::{ceil_nanos, nanos};
use crate::{Algorithm, Decision, Policy};

/// The theoretical arrival time: `nanos × limit + rem` ticks, with `rem < limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gcra {
    nanos: u64,
    rem: u64,
}

impl Gcra {
    fn ticks(&self, limit: u64) -> u128 {
        u128::from(self.nanos) * u128::from(limit) + u128::from(self.rem)
    }

    fn set_ticks(&mut self, ticks: u128, limit: u64) {
        let limit = u128::from(limit);
        self.nanos = u64::try_from(ticks / limit).unwrap_or(u64::MAX);
        self.rem = (ticks % limit) as u64;
    }
}

impl AlgorithmState for Gcra {
    fn full(policy: &Policy, now: u64) -> Self {
        let _ = policy;
        Self { nanos: now, rem: 0 }
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let limit = policy.limit();
        let interval = u128::from(policy.period_ns());
        let now = u128::from(now) * u128::from(limit);
        let tolerance = u128::from(policy.capacity()) * interval;
        // A `tat` in the past is a full bucket; time running backwards only makes
        // `tat - now` larger, so it never grants anything.
        let start = self.ticks(limit).max(now);
        let queued = start - now;
        let after = start + u128::from(cost) * interval;
        let allowed = after - now <= tolerance;
        let tat = if allowed { after } else { start };
        self.set_ticks(tat, limit);
        let is_queue = policy.algorithm() == Algorithm::LeakyBucket;
        Decision {
            allowed,
            limit,
            remaining: u64::try_from(tolerance.saturating_sub(tat - now) / interval).unwrap_or(0),
            reset_after: ceil_nanos(tat - now, limit),
            retry_after: (!allowed).then(|| ceil_nanos(after - now - tolerance, limit)),
            delay: if is_queue && allowed {
                ceil_nanos(queued, limit)
            } else {
                nanos(0)
            },
        }
    }
}
