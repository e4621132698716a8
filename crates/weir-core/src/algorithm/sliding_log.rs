//! Sliding window log: exact, with a timestamp for every admitted request.
//!
//! A request admitted at `t` counts against every trailing period that contains `t`,
//! that is until `t + period`. Requests admitted at the same instant share one entry
//! (time, cost), so the log holds at most `limit` entries (and usually far fewer).

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
    /// Heap bytes held by the entries.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<(u64, u64)>()
    }

    /// Forgets the entries that have left the trailing period ending at `now`.
    fn trim(&mut self, period: u64, now: u64) {
        while let Some(&(at, cost)) = self.entries.front() {
            if at.saturating_add(period) > now {
                break;
            }
            self.entries.pop_front();
            self.total -= cost;
        }
        if self.entries.is_empty() {
            // Give back the memory of a burst that has passed.
            self.entries.shrink_to(4);
        }
    }

    /// When enough entries will have expired for `cost` to fit.
    fn retry_at(&self, period: u64, limit: u64, cost: u64) -> u64 {
        let must_free = self.total + cost - limit;
        let mut freed = 0;
        for &(at, entry_cost) in &self.entries {
            freed += entry_cost;
            if freed >= must_free {
                return at.saturating_add(period);
            }
        }
        // Unreachable for cost <= limit: freeing everything leaves room for it.
        self.entries
            .back()
            .map_or(0, |&(at, _)| at.saturating_add(period))
    }
}

impl AlgorithmState for SlidingLog {
    fn full(_policy: &Policy, _now: u64) -> Self {
        Self::default()
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let period = policy.period_ns();
        let limit = policy.limit();
        // The clock went backwards if `now` is before the newest entry: no time passed.
        let now = self.entries.back().map_or(now, |&(at, _)| now.max(at));
        self.trim(period, now);
        let allowed = self.total + cost <= limit;
        if allowed && cost > 0 {
            match self.entries.back_mut() {
                Some((at, entry_cost)) if *at == now => *entry_cost += cost,
                _ => self.entries.push_back((now, cost)),
            }
            self.total += cost;
        }
        let reset_after = self
            .entries
            .back()
            .map_or(0, |&(at, _)| at.saturating_add(period) - now);
        Decision {
            allowed,
            limit,
            remaining: limit - self.total,
            reset_after: nanos(reset_after),
            retry_after: (!allowed).then(|| nanos(self.retry_at(period, limit, cost) - now)),
            delay: nanos(0),
        }
    }
}
