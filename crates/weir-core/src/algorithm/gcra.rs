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
//!
//! A refund is the inverse of consuming: `tat` moves back by `cost × period` ticks, but
//! never before `now` (a bucket cannot be more than full).
//!
//! With units out in leases (`crate::lease`), that clamp rises: `tat` is never before
//! `now` plus their emission intervals ([`Gcra::capped`]).

use super::AlgorithmState;
use super::time::{ceil_nanos, div_rem, nanos};
use crate::{Algorithm, Decision, Policy};

/// The theoretical arrival time: `nanos × limit + rem` ticks, with `rem < limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gcra {
    nanos: u64,
    rem: u64,
}

impl Gcra {
    /// The arrival time as one word, when it is whole nanoseconds (and not 0).
    pub(crate) fn word(&self) -> Option<u64> {
        (self.rem == 0 && self.nanos != 0).then_some(self.nanos)
    }

    /// The arrival time `word`, in whole nanoseconds.
    pub(crate) fn from_word(word: u64) -> Self {
        Self {
            nanos: word,
            rem: 0,
        }
    }

    /// The arrival time with `held` units out in leases: never before `now + held ×
    /// period` ticks, the clamp `tat >= now` of a full bucket raised by what the leases
    /// hold (tokens never above `capacity - held`).
    pub(crate) fn capped(&self, policy: &Policy, now: u64, held: u64) -> Self {
        let floor_ticks = u128::from(held) * u128::from(policy.period_ns());
        let (whole, rem) = div_rem(floor_ticks, policy.limit());
        let floor = Self {
            nanos: now.saturating_add(u64::try_from(whole).unwrap_or(u64::MAX)),
            rem,
        };
        if (floor.nanos, floor.rem) > (self.nanos, self.rem) {
            floor
        } else {
            self.clone()
        }
    }

    /// Consumes `cost` units at `now` however far past the tolerance that puts the
    /// arrival time: a debt, which later checks wait out (`crate::charge`).
    pub(crate) fn charge(&mut self, policy: &Policy, now: u64, cost: u64) {
        let limit = policy.limit();
        let ahead = self.ahead_of(now, limit) + u128::from(cost) * u128::from(policy.period_ns());
        let (whole, rem) = div_rem(ahead, limit);
        self.nanos = now.saturating_add(u64::try_from(whole).unwrap_or(u64::MAX));
        self.rem = rem;
    }

    /// Ticks from `now` until the theoretical arrival time (0 when it has passed).
    fn ahead_of(&self, now: u64, limit: u64) -> u128 {
        if self.nanos < now {
            0
        } else {
            u128::from(self.nanos - now) * u128::from(limit) + u128::from(self.rem)
        }
    }
}

impl AlgorithmState for Gcra {
    fn full(_policy: &Policy, now: u64) -> Self {
        Self { nanos: now, rem: 0 }
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let limit = policy.limit();
        let interval = u128::from(policy.period_ns());
        let tolerance = u128::from(policy.capacity()) * interval;
        // Everything is counted in ticks from `now`. A `tat` in the past is a full
        // bucket; time running backwards only makes `tat − now` larger, so it never
        // grants anything.
        let queued = self.ahead_of(now, limit);
        let after = queued + u128::from(cost) * interval;
        // A peek is allowed even past the tolerance (a debt, `crate::charge`), as a
        // token bucket in debt allows one.
        let allowed = cost == 0 || after <= tolerance;
        let ahead = if allowed { after } else { queued };
        if allowed && cost > 0 {
            let (whole, rem) = div_rem(ahead, limit);
            self.nanos = now.saturating_add(u64::try_from(whole).unwrap_or(u64::MAX));
            self.rem = rem;
        }
        let is_queue = policy.algorithm() == Algorithm::LeakyBucket;
        Decision {
            allowed,
            limit,
            remaining: u64::try_from(
                div_rem(tolerance.saturating_sub(ahead), policy.period_ns()).0,
            )
            .unwrap_or(0),
            reset_after: ceil_nanos(ahead, limit),
            retry_after: (!allowed).then(|| ceil_nanos(after - tolerance, limit)),
            delay: if is_queue && allowed {
                ceil_nanos(queued, limit)
            } else {
                nanos(0)
            },
        }
    }

    fn refund(&mut self, policy: &Policy, now: u64, cost: u64) {
        let limit = policy.limit();
        // Measured from `now`, the ticks ahead include any time the clock went back, so
        // taking `cost` intervals off moves the absolute `tat` back by exactly that.
        let ahead = self
            .ahead_of(now, limit)
            .saturating_sub(u128::from(cost) * u128::from(policy.period_ns()));
        let (whole, rem) = div_rem(ahead, limit);
        self.nanos = now.saturating_add(u64::try_from(whole).unwrap_or(u64::MAX));
        self.rem = rem;
    }
}
