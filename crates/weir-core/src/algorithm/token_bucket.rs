//! Token bucket: `burst` tokens (default `limit`), refilled at `limit / period`.
//!
//! Tokens are kept exactly, as a whole count and a fraction in units of
//! `1 / period_ns` of a token: `elapsed` nanoseconds add `elapsed × limit` such units.
//! No refill is ever truncated to whole tokens or whole seconds, so a client retrying
//! every 300 ms against one token per 6 s gets one request through every 6 s.
//!
//! A refund puts `cost` tokens back, up to the capacity; in debt, it pays the debt first.
//!
//! With units out in leases (`crate::lease`), the bucket refills only up to the
//! capacity less those units ([`TokenBucket::capped`]).

use super::AlgorithmState;
use super::time::{ceil_nanos, div_ceil, div_rem, nanos};
use crate::{Decision, Policy};

/// Tokens (whole and fractional part) as of `last`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    whole: u64,
    /// Fractional tokens, in `1 / period_ns` units; below `period_ns`.
    fraction: u64,
    last: u64,
}

impl TokenBucket {
    /// When the tokens were last brought up to date.
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Tokens in `1 / period_ns` units.
    fn scaled(&self, period: u64) -> u128 {
        u128::from(self.whole) * u128::from(period) + u128::from(self.fraction)
    }
}

impl TokenBucket {
    /// The bucket refilled to `now`, but never beyond `capacity - held` tokens: what a
    /// check reads with `held` units out in leases. Refilled up to `max(now, last)`, as
    /// a check refills; with `held == 0` the plain check's refill, made explicit.
    pub(crate) fn capped(&self, policy: &Policy, now: u64, held: u64) -> Self {
        let period = policy.period_ns();
        let at = now.max(self.last);
        let cap = u128::from(policy.capacity().saturating_sub(held)) * u128::from(period);
        let refill = u128::from(at - self.last) * u128::from(policy.limit());
        let tokens = (self.scaled(period) + refill).min(cap);
        // tokens <= capacity <= MAX_LIMIT × period, so the whole part fits a u64.
        let (whole, fraction) = div_rem(tokens, period);
        Self {
            whole: whole as u64,
            fraction,
            last: at,
        }
    }
}

impl TokenBucket {
    /// Consumes `cost` tokens at `now` even when fewer are there: a bucket cannot hold
    /// fewer than none, so what is missing (the debt) moves `last` ahead by the time it
    /// takes to refill, with the fraction of a nanosecond's refill over kept as tokens.
    /// Checks before that instant see a clock behind the state: no refill, and waits
    /// counted from the instant the debt is paid (`crate::charge`).
    pub(crate) fn charge(&mut self, policy: &Policy, now: u64, cost: u64) {
        let period = policy.period_ns();
        let refilled = self.capped(policy, now, 0);
        let tokens = refilled.scaled(period);
        let needed = u128::from(cost) * u128::from(period);
        let (tokens, last) = if tokens >= needed {
            (tokens - needed, refilled.last)
        } else {
            let missing = needed - tokens;
            let wait = div_ceil(missing, policy.limit());
            let over = wait * u128::from(policy.limit()) - missing;
            let wait = u64::try_from(wait).unwrap_or(u64::MAX);
            (over, refilled.last.saturating_add(wait))
        };
        // tokens <= capacity <= MAX_LIMIT × period, so the whole part fits a u64.
        let (whole, fraction) = div_rem(tokens, period);
        *self = Self {
            whole: whole as u64,
            fraction,
            last,
        };
    }
}

impl AlgorithmState for TokenBucket {
    fn full(policy: &Policy, now: u64) -> Self {
        Self {
            whole: policy.capacity(),
            fraction: 0,
            last: now,
        }
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let period = policy.period_ns();
        let wide_period = u128::from(period);
        let limit = u128::from(policy.limit());
        // Time before `last` means the clock went backwards: no refill, and waits
        // count from `now` plus what the state is ahead.
        let at = now.max(self.last);
        let skew = nanos(at - now);
        let capacity = u128::from(policy.capacity()) * wide_period;
        let refill = u128::from(at - self.last) * limit;
        let mut tokens = (self.scaled(period) + refill).min(capacity);
        let needed = u128::from(cost) * wide_period;
        let allowed = tokens >= needed;
        if allowed {
            tokens -= needed;
        }
        // tokens <= capacity <= MAX_LIMIT × period, so the whole part fits a u64.
        let (whole, fraction) = div_rem(tokens, period);
        if allowed && cost > 0 {
            *self = Self {
                whole: whole as u64,
                fraction,
                last: at,
            };
        }
        Decision {
            allowed,
            limit: policy.limit(),
            remaining: whole as u64,
            reset_after: if tokens == capacity {
                nanos(0)
            } else {
                skew + ceil_nanos(capacity - tokens, policy.limit())
            },
            retry_after: (!allowed).then(|| skew + ceil_nanos(needed - tokens, policy.limit())),
            delay: nanos(0),
        }
    }

    fn refund(&mut self, policy: &Policy, now: u64, cost: u64) {
        let period = policy.period_ns();
        let limit = policy.limit();
        let mut added = u128::from(cost) * u128::from(period);
        // A bucket whose `last` is ahead of `now` (a debt from a charge, or a clock gone
        // back) holds its tokens only from `last`: the refund first brings `last` back,
        // at most to `now`, as GCRA's refund moves its arrival time back; what is left
        // over is tokens. Adding the tokens at once would let a debt be spent before it
        // is paid.
        if self.last > now {
            let back = u64::try_from(added / u128::from(limit)).unwrap_or(u64::MAX);
            let back = back.min(self.last - now);
            self.last -= back;
            added -= u128::from(back) * u128::from(limit);
        }
        // Added to the tokens as of `last`, and refilled from there as before: adding
        // first and refilling next gives what refilling first would, since both stop at
        // the capacity.
        let capacity = u128::from(policy.capacity()) * u128::from(period);
        let tokens = (self.scaled(period) + added).min(capacity);
        // tokens <= capacity <= MAX_LIMIT × period, so the whole part fits a u64.
        let (whole, fraction) = div_rem(tokens, period);
        self.whole = whole as u64;
        self.fraction = fraction;
    }
}
