//! The six algorithms, and the two entry points that dispatch to them.
//!
//! Each algorithm is a small state type with a `check` method that computes the decision
//! for `cost` at `now` and updates the state only when it consumes the cost, and a
//! `refund` method that gives consumed units back. The entry points add what all of
//! them share: a cost that can never fit, a cost of zero (a peek), and dropping the
//! state once it is full again.

mod fixed_window;
mod gcra;
mod sliding_log;
mod sliding_window;
mod time;
mod token_bucket;
mod word;

pub(crate) use fixed_window::FixedWindow;
pub(crate) use gcra::Gcra;
pub(crate) use sliding_log::SlidingLog;
pub(crate) use sliding_window::SlidingWindow;
pub(crate) use token_bucket::TokenBucket;
pub use word::check_word;

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
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Algorithm, Policy, check};
///
/// // Two a second, as GCRA spaces them: a burst of two, then one every 500 ms.
/// let policy = Policy::new(Algorithm::Gcra, 2, Duration::from_secs(1), None)?;
/// let mut state = None; // a key never seen: full
/// let now = 1_796_083_200_000_000_000; // nanoseconds since the Unix epoch
/// assert!(check(&policy, &mut state, now, 1).allowed);
/// assert!(check(&policy, &mut state, now, 1).allowed);
/// let denied = check(&policy, &mut state, now, 1);
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Some(Duration::from_millis(500)));
/// // Time is handed in: 500 ms later, one unit is back.
/// assert!(check(&policy, &mut state, now + 500_000_000, 1).allowed);
/// # Ok::<(), weir_core::PolicyError>(())
/// ```
pub fn check(policy: &Policy, state: &mut Option<State>, now: u64, cost: u64) -> Decision {
    if policy.region_floor().is_some() {
        return crate::share::check(policy, state, now, cost);
    }
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

/// Gives back `cost` units that an earlier allowed [`check`] of the same key consumed,
/// as far as `state` still holds them, at `now` (nanoseconds since the Unix epoch).
///
/// For limits settled after the fact: a request reserves its cost up front (so that
/// concurrent requests cannot all pass a limit that only some of them should reach),
/// and the reservation is given back when its outcome turns out not to count (a login
/// that succeeded). Rules every algorithm follows:
///
/// - nothing beyond what the state holds is given back: a refund never leaves more
///   than a full state, and units that have already expired (a window that has rolled,
///   a bucket that refilled) are not given twice;
/// - a cost of zero, or above [`Policy::capacity`] (which [`check`] never consumes),
///   gives back nothing;
/// - a clock stepping backwards gives back at most `cost` units (the refund works on
///   what the state holds, not on the time that seems to have passed);
/// - the state comes out `None` exactly when it is full again, as from [`check`]; state
///   left by another algorithm is stale, so the key is full and comes out `None`.
///
/// Per algorithm: GCRA, leaky bucket and token bucket undo the consumption exactly
/// (the theoretical arrival time moves back by `cost` emission intervals, or `cost`
/// tokens come back), floored at full now; a refund late enough that part of the
/// reservation has refilled by itself cannot tell the units counted since from the
/// reservation's, and gives back at most that refilled part more. A fixed window takes `cost` off its count
/// while its window is current. A sliding window takes `cost` off the newest stored
/// window's count, and a sliding log takes `cost` units off its newest entries: both
/// exact when the refund follows its check with nothing in between, approximate
/// otherwise (see their modules).
pub fn refund(policy: &Policy, state: &mut Option<State>, now: u64, cost: u64) {
    if policy.region_floor().is_some() {
        return crate::share::refund(policy, state, now, cost);
    }
    if cost == 0 || cost > policy.capacity() {
        return;
    }
    let full = match (policy.algorithm(), state.as_mut().map(|s| &mut s.0)) {
        (_, None) => return,
        (Algorithm::FixedWindow, Some(Inner::FixedWindow(s))) => give_back(s, policy, now, cost),
        (Algorithm::SlidingWindow, Some(Inner::SlidingWindow(s))) => {
            give_back(s, policy, now, cost)
        }
        (Algorithm::SlidingLog, Some(Inner::SlidingLog(s))) => {
            give_back(&mut **s, policy, now, cost)
        }
        (Algorithm::TokenBucket, Some(Inner::TokenBucket(s))) => give_back(s, policy, now, cost),
        (Algorithm::Gcra | Algorithm::LeakyBucket, Some(Inner::Gcra(s))) => {
            give_back(s, policy, now, cost)
        }
        // Another algorithm's state: stale, and the key is full.
        _ => true,
    };
    if full {
        *state = None;
    }
}

/// Consumes `cost` units at `now` whether or not they are left: the rest of a cost known
/// only once the request has been answered (the tokens a model generated), charged on
/// top of an estimate reserved by an allowed [`check`]. What the key does not have is a
/// debt: later checks are denied until the rate has refilled it, then refill as usual;
/// so over any stretch of time the key admits, charges included, no more than a check
/// alone would have let through, debts outstanding excepted.
///
/// Only the algorithms that measure a debt in time carry one: token bucket, GCRA and
/// the leaky bucket ([`Algorithm::carries_debt`]). Windows and logs have no way to
/// hold one past their window, so for them a charge consumes `cost` only where a check
/// would allow it. A cost above [`Policy::capacity`] is charged as the capacity: one
/// charge owes at most a full bucket, which keeps every store's arithmetic exact. A
/// cost of zero changes nothing; the state comes out `None` exactly when full.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Algorithm, Policy, charge, check};
///
/// // 10 tokens a second; a request reserved 2 and turned out to cost 12.
/// let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(1), None)?;
/// let (mut state, now) = (None, 1_796_083_200_000_000_000);
/// assert!(check(&policy, &mut state, now, 2).allowed);
/// charge(&policy, &mut state, now, 10); // 8 left, so 2 owed
/// // 200 ms to pay them back, then 100 ms for the next token.
/// let denied = check(&policy, &mut state, now, 1);
/// assert_eq!(denied.retry_after, Some(Duration::from_millis(300)));
/// assert!(check(&policy, &mut state, now + 300_000_000, 1).allowed);
/// # Ok::<(), weir_core::PolicyError>(())
/// ```
pub fn charge(policy: &Policy, state: &mut Option<State>, now: u64, cost: u64) {
    let cost = cost.min(policy.capacity());
    if cost == 0 {
        return;
    }
    if policy.region_floor().is_some() || !policy.algorithm().carries_debt() {
        check(policy, state, now, cost);
        return;
    }
    let owed = match (policy.algorithm(), state.as_mut().map(|s| &mut s.0)) {
        (Algorithm::TokenBucket, Some(Inner::TokenBucket(s))) => {
            s.charge(policy, now, cost);
            None
        }
        (Algorithm::TokenBucket, _) => {
            let mut fresh = TokenBucket::full(policy, now);
            fresh.charge(policy, now, cost);
            Some(Inner::TokenBucket(fresh))
        }
        (_, Some(Inner::Gcra(s))) => {
            s.charge(policy, now, cost);
            None
        }
        _ => {
            let mut fresh = Gcra::full(policy, now);
            fresh.charge(policy, now, cost);
            Some(Inner::Gcra(fresh))
        }
    };
    if let Some(inner) = owed {
        *state = Some(State(inner));
    }
}

/// Refunds `cost` on `state`; returns whether it is full again (a peek says so).
fn give_back<S: AlgorithmState>(state: &mut S, policy: &Policy, now: u64, cost: u64) -> bool {
    state.refund(policy, now, cost);
    state.check(policy, now, 0).reset_after.is_zero()
}

/// The state of one algorithm: how it starts, and how it decides.
pub(crate) trait AlgorithmState: Sized {
    /// The state of a key that has nothing counted, first seen at `now`.
    fn full(policy: &Policy, now: u64) -> Self;

    /// Decides `cost` (at most the policy's capacity) at `now`; changes `self` only
    /// when it consumes the cost.
    fn check(&mut self, policy: &Policy, now: u64, cost: u64) -> Decision;

    /// Gives back `cost` (at most the policy's capacity) at `now`, never beyond what
    /// the state holds; the caller drops a state that is full afterwards.
    fn refund(&mut self, policy: &Policy, now: u64, cost: u64);
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

/// `state` as a check of a token bucket or GCRA policy reads it with `held` units out
/// in leases: refilled to `now` but never beyond `capacity - held` (see `crate::lease`).
/// Unchanged when nothing is held, so that a key without leases decides exactly as
/// [`check`] does; `None` (a full key) for other algorithms, which the lease functions
/// refuse before asking.
pub(crate) fn capped(policy: &Policy, state: &Option<State>, now: u64, held: u64) -> Option<State> {
    if held == 0 {
        return state.clone();
    }
    let inner = match (policy.algorithm(), state.as_ref().map(|s| &s.0)) {
        (Algorithm::TokenBucket, Some(Inner::TokenBucket(s))) => {
            Inner::TokenBucket(s.capped(policy, now, held))
        }
        (Algorithm::TokenBucket, _) => {
            Inner::TokenBucket(TokenBucket::full(policy, now).capped(policy, now, held))
        }
        (Algorithm::Gcra, Some(Inner::Gcra(s))) => Inner::Gcra(s.capped(policy, now, held)),
        (Algorithm::Gcra, _) => Inner::Gcra(Gcra::full(policy, now).capped(policy, now, held)),
        _ => return None,
    };
    Some(State(inner))
}
