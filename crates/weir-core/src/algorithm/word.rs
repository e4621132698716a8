//! GCRA on one word: the theoretical arrival time in whole nanoseconds.
//!
//! Under a policy that [`Policy::packs`] (GCRA or the leaky bucket, with a period of a
//! whole number `T` of nanoseconds per unit), every tick count of `gcra.rs` is a multiple
//! of `limit`: the arrival time has no remainder, and the algorithm can be written in
//! nanoseconds, with an emission interval of `T` and a tolerance of `capacity × T`. No
//! division by `limit` is left (one by `T`, for `remaining`), and the state is one word
//! that a store can update by compare-and-swap. [`check_word`] decides exactly as
//! [`check`](super::check) does on the same state (`tests/word.rs` holds them together).

use super::time::{div_rem, nanos};
use crate::{Algorithm, Decision, Policy};

/// [`check`](super::check) on a state kept as one word ([`State::word`](crate::State::word),
/// 0 for no state), updated in place: the same decision, and the word of the same new
/// state. `None`, changing nothing, when the policy does not [`Policy::packs`].
pub fn check_word(policy: &Policy, word: &mut u64, now: u64, cost: u64) -> Option<Decision> {
    let interval = policy.word_interval_ns();
    if interval == 0 {
        return None;
    }
    let capacity = policy.capacity();
    let fits_ever = cost <= capacity;
    let cost = if fits_ever { cost } else { 0 };
    let tolerance = u128::from(capacity) * u128::from(interval);
    // An arrival time at or before `now` is a full bucket, as is no state at all; time
    // running backwards only makes `word − now` larger, so it never grants anything.
    let queued = word.saturating_sub(now);
    let after = u128::from(queued) + u128::from(cost) * u128::from(interval);
    let allowed = cost == 0 || after <= tolerance;
    let ahead = if allowed { after } else { u128::from(queued) };
    let reset_after = u64::try_from(ahead).unwrap_or(u64::MAX);
    if reset_after == 0 {
        *word = 0;
    } else if allowed && cost > 0 {
        *word = now.saturating_add(reset_after);
    }
    let fits_now = allowed && fits_ever;
    Some(Decision {
        allowed: fits_now,
        limit: policy.limit(),
        // (tolerance − ahead) / T is at most the capacity: it fits.
        remaining: div_rem(tolerance.saturating_sub(ahead), interval).0 as u64,
        reset_after: nanos(reset_after),
        retry_after: (!allowed && fits_ever)
            .then(|| nanos(u64::try_from(after - tolerance).unwrap_or(u64::MAX))),
        delay: if fits_now && policy.algorithm() == Algorithm::LeakyBucket {
            nanos(queued)
        } else {
            nanos(0)
        },
    })
}
