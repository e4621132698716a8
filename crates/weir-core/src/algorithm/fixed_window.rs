//! Fixed window: a counter per window of `period`, windows aligned to the Unix epoch,
//! or per window of a calendar ([`Policy::window`]): a window is known by its start.
//!
//! Tiny state and simple, at the price of letting up to twice the limit through around a
//! window boundary (the end of one window and the start of the next).
//!
//! A refund takes its cost off the count while the stored window is current; once the
//! window has rolled, the units it counted have expired and there is nothing to give.
//! The approximation is at the boundary: when the reservation was counted in one window
//! and another request has since been counted in the next, the stored window is the new
//! one and the refund comes out of its count, so up to the refunded cost more may be
//! admitted in that window.

use super::AlgorithmState;
use super::time::nanos;
use crate::{Decision, Policy};

/// The current window's start and how much it has admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FixedWindow {
    window: u64,
    count: u64,
}

impl AlgorithmState for FixedWindow {
    fn full(policy: &Policy, now: u64) -> Self {
        Self {
            window: policy.window(now).start,
            count: 0,
        }
    }

    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision {
        let window = policy.window(now);
        // A window earlier than the stored one means the clock went backwards: stay in
        // the stored window, as if no time had passed (waits still count from `now`).
        let (start, end, mut count) = if window.start > self.window {
            (window.start, window.end, 0)
        } else if window.start == self.window {
            (self.window, window.end, self.count)
        } else {
            (self.window, policy.window(self.window).end, self.count)
        };
        let allowed = count + cost <= policy.limit();
        if allowed && cost > 0 {
            count += cost;
            *self = Self {
                window: start,
                count,
            };
        }
        let until_next = nanos(end - now);
        Decision {
            allowed,
            limit: policy.limit(),
            remaining: policy.limit().saturating_sub(count),
            reset_after: if count == 0 { nanos(0) } else { until_next },
            retry_after: (!allowed).then_some(until_next),
            delay: nanos(0),
        }
    }

    fn refund(&mut self, policy: &Policy, now: u64, cost: u64) {
        // A stored window later than `now` means the clock went backwards: the units
        // were counted there, as `check` would count them.
        if policy.window(now).start <= self.window {
            self.count -= cost.min(self.count);
        }
    }
}
