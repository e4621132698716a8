//! Sliding window counter: the current and previous fixed windows' counts.
//!
//! The count over the trailing period is estimated as
//! `previous × (1 − elapsed / period) + current`, and a request is allowed iff
//! `estimate + cost <= limit`. Everything is compared multiplied by `period`, in 128-bit
//! integers, so the weighting is exact.
//!
//! A refund takes its cost off the newest stored window's count, the one the recent
//! consumption went into. That is exact when no other request was counted in between.
//! The approximation is at a window boundary: when the reservation was counted in one
//! window and another request has since been counted in the next, the stored windows
//! have moved on and the refund comes out of the new window's count. The estimate then
//! falls by the whole cost, where the reservation only weighed
//! `cost × (1 − elapsed / period)` in it, so up to `cost × elapsed / period` more may be
//! admitted in the rest of that window; and if that count is below the cost, less is
//! given back. Once two windows have passed, nothing is left to give.

use super::AlgorithmState;
use super::time::nanos;
use crate::{Decision, Policy};

/// The current window's start and the two windows' counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlidingWindow {
    window: u64,
    previous: u64,
    current: u64,
}

impl AlgorithmState for SlidingWindow {
    fn full(policy: &Policy, now: u64) -> Self {
        Self {
            window: now - now % policy.period_ns(),
            previous: 0,
            current: 0,
        }
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let period = policy.period_ns();
        let limit = policy.limit();
        let window = now - now % period;
        let mut seen = self.clone();
        if window > seen.window {
            let previous = if window - seen.window == period {
                seen.current
            } else {
                0
            };
            seen = Self {
                window,
                previous,
                current: 0,
            };
        }
        // Before the stored window, the clock went backwards: weigh as if no time had
        // passed (waits still count from `now`).
        let elapsed = now.max(seen.window) - seen.window;
        // estimate × period, for a current count of `current`.
        let scaled = |current: u64| {
            u128::from(seen.previous) * u128::from(period - elapsed)
                + u128::from(current) * u128::from(period)
        };
        let ceiling = u128::from(limit) * u128::from(period);
        let allowed = scaled(seen.current + cost) <= ceiling;
        if allowed && cost > 0 {
            seen.current += cost;
            *self = seen.clone();
        }
        let estimate = scaled(seen.current).div_ceil(u128::from(period));
        let reset_after = if seen.current > 0 {
            seen.window.saturating_add(2 * period) - now
        } else if seen.previous > 0 {
            seen.window.saturating_add(period) - now
        } else {
            0
        };
        Decision {
            allowed,
            limit,
            remaining: u64::try_from(u128::from(limit).saturating_sub(estimate)).unwrap_or(0),
            reset_after: nanos(reset_after),
            retry_after: (!allowed).then(|| nanos(seen.retry_at(period, limit, cost) - now)),
            delay: nanos(0),
        }
    }

    fn refund(&mut self, _policy: &Policy, _now: u64, cost: u64) {
        // The newest stored window, whatever `now` (see the module docs).
        self.current -= cost.min(self.current);
    }
}

impl SlidingWindow {
    /// The first instant at which `cost` fits, if nothing else is counted meanwhile.
    /// The estimate only falls as time passes, so this is where it crosses the line.
    fn retry_at(&self, period: u64, limit: u64, cost: u64) -> u64 {
        // Within window `start`, with `weighted` as the previous count and room `room`
        // left beside the current count, the cost fits once
        // weighted × (period − elapsed) <= room × period.
        let first_fit = |start: u64, weighted: u64, room: u64| {
            if weighted == 0 {
                return start;
            }
            let keep = u128::from(room) * u128::from(period) / u128::from(weighted);
            // keep < period here, since the cost does not fit at elapsed = 0.
            start + (period - u64::try_from(keep).unwrap_or(period).min(period))
        };
        if self.current + cost <= limit {
            first_fit(self.window, self.previous, limit - self.current - cost)
        } else {
            first_fit(
                self.window.saturating_add(period),
                self.current,
                limit - cost,
            )
        }
    }
}
