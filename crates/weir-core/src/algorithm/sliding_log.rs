//! Sliding window log: exact, with a timestamp for every admitted request.
//!
//! A request admitted at `t` counts against every trailing period that contains `t`,
//! that is until `t + period`. Requests admitted at the same instant share one entry
//! (time, cost), so the log holds at most `limit` entries (and usually far fewer).
//!
//! A refund takes `cost` units off the newest entries. When nothing was admitted after
//! the reservation, those are the reservation's own, and the refund is exact. When other
//! requests were admitted after it, theirs are taken off instead and the reservation's
//! older timestamp stays: the units still counted then expire up to the time between
//! the reservation and the refund (usually the upstream's latency) too early, so a
//! later trailing period may admit up to the refunded cost more than an exact log
//! would. The total counted right after the refund is exact either way.

use std::collections::VecDeque;

use super::AlgorithmState;
use super::time::nanos;
use crate::{Decision, Policy};

/// Admitted requests in time order, as (time, cost), with their total cost.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SlidingLog {
    entries: VecDeque<(u64, u64)>,
    total: u64,
}

impl SlidingLog {
    /// How many of the oldest entries have left the trailing period ending at `at`,
    /// and their cost.
    fn expired(&self, period: u64, at: u64) -> (usize, u64) {
        let mut count = 0;
        let mut cost = 0;
        for &(time, entry_cost) in &self.entries {
            if time.saturating_add(period) > at {
                break;
            }
            count += 1;
            cost += entry_cost;
        }
        (count, cost)
    }

    /// When enough of the entries after the first `skip` will have expired for `cost`
    /// to fit, given `total` live cost.
    fn retry_at(&self, skip: usize, total: u64, period: u64, limit: u64, cost: u64) -> u64 {
        let must_free = total + cost - limit;
        let mut freed = 0;
        let mut last = 0;
        for &(time, entry_cost) in self.entries.iter().skip(skip) {
            freed += entry_cost;
            last = time.saturating_add(period);
            if freed >= must_free {
                break;
            }
        }
        last
    }
}

impl AlgorithmState for SlidingLog {
    fn full(_policy: &Policy, _now: u64) -> Self {
        Self::default()
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let period = policy.period_ns();
        let limit = policy.limit();
        // Before the newest entry, the clock went backwards: trim as if no time had
        // passed (waits still count from `now`).
        let at = self
            .entries
            .back()
            .map_or(now, |&(newest, _)| now.max(newest));
        let (mut skip, expired_cost) = self.expired(period, at);
        let mut total = self.total - expired_cost;
        let allowed = total + cost <= limit;
        if allowed && cost > 0 {
            self.entries.drain(..skip);
            skip = 0;
            if self.entries.is_empty() {
                // Give back the memory of a burst that has passed.
                self.entries.shrink_to(4);
            }
            match self.entries.back_mut() {
                Some((newest, entry_cost)) if *newest == at => *entry_cost += cost,
                _ => self.entries.push_back((at, cost)),
            }
            total += cost;
            self.total = total;
        }
        let reset_after = if total == 0 {
            0
        } else {
            self.entries
                .back()
                .map_or(0, |&(newest, _)| newest.saturating_add(period) - now)
        };
        Decision {
            allowed,
            limit,
            remaining: limit.saturating_sub(total),
            reset_after: nanos(reset_after),
            retry_after: (!allowed)
                .then(|| nanos(self.retry_at(skip, total, period, limit, cost) - now)),
            delay: nanos(0),
        }
    }

    fn refund(&mut self, _policy: &Policy, _now: u64, cost: u64) {
        let mut left = cost;
        while left > 0 {
            let Some((_, newest)) = self.entries.back_mut() else {
                break;
            };
            let taken = left.min(*newest);
            *newest -= taken;
            left -= taken;
            self.total -= taken;
            if *newest == 0 {
                self.entries.pop_back();
            }
        }
    }
}
