//! The six algorithms, and the one entry point that dispatches to them.
//!
//! Each algorithm is a small state type with a `check` method that computes the decision
//! for `cost` at `now` and updates the state only when it consumes the cost. The entry
//! point adds what all of them share: a cost that can never fit, a cost of zero (a peek),
//! and dropping the state once it is full again.

mod fixed_window;
mod gcra;
mod sliding_log;
mod sliding_window;
mod time;
mod token_bucket;

pub(crate) use fixed_window::FixedWindow;
pub(crate) use gcra::Gcra;
pub(crate) use sliding_log::SlidingLog;
pub(crate) use sliding_window::SlidingWindow;
pub(crate) use token_bucket::TokenBucket;

use crate::state::{Inner, State};
use crate::{Algorithm, Decision, Policy};

/// Checks a request of `cost` units at `now` (nanoseconds since the Unix epoch) against
/// `policy`, given the key's `state`, and updates the state in place.
///
/// This is the pure function `(policy, state, now, cost) -> (decision, new state)`
/// written as an in-place update: `state` goes in as the key's state (`None` when the
/// key is full or unknown) and comes out as the new one. Rules every algorithm follows:
///
/// - the state changes only when a cost is consumed, which happens only when the
///   request is allowed (so stores need to write only then);
/// - a cost above [`Policy::capacity`] is denied with `retry_after: None`;
/// - a cost of zero is a peek: it reports the state and changes nothing;
/// - time earlier than what the state has seen counts as no time passing, so a clock
///   stepping backwards never grants anything (waits are still counted from `now`);
/// - the state comes out `None` exactly when it is full again (`reset_after` is zero),
///   so a store can drop the key.
pub fn check(policy: &Policy, state: &mut Option<State>, now: u64, cost: u64) -> Decision {
    let fits_ever = cost <= policy.capacity();
    let cost = if fits_ever { cost } else { 0 };
    let mut decision = match policy.algorithm() {
        Algorithm::FixedWindow => run(state, now, cost, policy, Inner::FixedWindow, |s| match s {
            Inner::FixedWindow(s) => Some(s),
            _ => None,
        }),
        Algorithm::SlidingWindow => run(
            state,
            now,
            cost,
            policy,
            Inner::SlidingWindow,
            |s| match s {
                Inner::SlidingWindow(s) => Some(s),
                _ => None,
            },
        ),
        Algorithm::SlidingLog => run(
            state,
            now,
            cost,
            policy,
            |log: SlidingLog| Inner::SlidingLog(Box::new(log)),
            |s| match s {
                Inner::SlidingLog(s) => Some(&mut **s),
                _ => None,
            },
        ),
        Algorithm::TokenBucket => run(state, now, cost, policy, Inner::TokenBucket, |s| match s {
            Inner::TokenBucket(s) => Some(s),
            _ => None,
        }),
        Algorithm::Gcra | Algorithm::LeakyBucket => {
            run(state, now, cost, policy, Inner::Gcra, |s| match s {
                Inner::Gcra(s) => Some(s),
                _ => None,
            })
        }
    };
    if !fits_ever {
        decision.allowed = false;
        decision.retry_after = None;
        decision.delay = std::time::Duration::ZERO;
    }
    decision
}

/// The state of one algorithm: how it starts, and how it decides.
pub(crate) trait AlgorithmState: Sized {
    /// The state of a key that has nothing counted, first seen at `now`.
    fn full(policy: &Policy, now: u64) -> Self;

    /// Decides `cost` (at most the policy's capacity) at `now`; changes `self` only
    /// when it consumes the cost.
    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision;
}

/// Runs algorithm `S` on the slot: finds its state (or starts full), checks, and writes
/// back what changed.
fn run<S: AlgorithmState>(
    slot: &mut Option<State>,
    now: u64,
    cost: u64,
    policy: &Policy,
    wrap: impl FnOnce(S) -> Inner,
    unwrap: impl FnOnce(&mut Inner) -> Option<&mut S>,
) -> Decision {
    if let Some(existing) = slot.as_mut().and_then(|s| unwrap(&mut s.0)) {
        let decision = existing.check(policy, now, cost);
        if decision.reset_after.is_zero() {
            *slot = None;
        }
        return decision;
    }
    let mut fresh = S::full(policy, now);
    let decision = fresh.check(policy, now, cost);
    if !decision.reset_after.is_zero() {
        *slot = Some(State(wrap(fresh)));
    } else if slot.is_some() {
        // The slot held another algorithm's state: it is stale, and the key is full.
        *slot = None;
    }
    decision
}
