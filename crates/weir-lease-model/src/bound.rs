//! The bound: what a plain token bucket admits, in this model's tick semantics.
//!
//! The bucket starts full (`C` tokens at tick 0). At the start of every tick `t` with
//! `t > 0` and `t % R == 0` one token is added, never above `C`; within a tick any number
//! of checks may spend tokens. So over the ticks `first..=last` a plain bucket admits at
//! most what it held when `first` began (at most `C`) plus the refills at the ticks
//! `first + 1 ..= last`, which are the multiples of `R` in that range:
//!
//! ```text
//! admitted(first..=last) <= C + floor(last / R) - floor(first / R)      (exact, tight)
//! ```
//!
//! From tick 0 (the cumulative form) that is `C + floor(t / R)` for ticks `0..=t`. Over
//! every window of `W >= 1` consecutive ticks, whatever its phase, it is
//! `C + ceil((W - 1) / R)`: for `R >= 2` that is `C + floor(W / R)` or one more (a window
//! that starts just after a refill and ends just on one), for `R == 1` it is `C + W - 1`.
//!
//! "Leases never admit more than the bucket alone" is checked in two strengths: every
//! window within [`bucket_bound`], and the stronger [`plain_bucket_admits`]: the
//! per-tick admissions of the leased system are a sequence the plain bucket itself
//! could have admitted.

/// The most a plain bucket of `capacity` tokens, refilling one token at every tick that
/// is a multiple of `refill_every`, admits over the ticks `first..=last`
/// (`first <= last`): `capacity + last / refill_every - first / refill_every`.
///
/// This is the one statement of the bound; the properties and the phase-free
/// [`window_bound`] are written in terms of it.
#[must_use]
pub const fn bucket_bound(capacity: u32, refill_every: u32, first: u32, last: u32) -> u32 {
    capacity + last / refill_every - first / refill_every
}

/// The most a plain bucket admits in any `window` consecutive ticks (`window >= 1`),
/// the maximum of [`bucket_bound`] over every phase: `capacity + ceil((window - 1) /
/// refill_every)`.
#[must_use]
pub const fn window_bound(capacity: u32, refill_every: u32, window: u32) -> u32 {
    capacity + (window.saturating_sub(1)).div_ceil(refill_every)
}

/// Whether a plain bucket (full at tick 0) could have admitted `admitted[t]` units at
/// every tick `t`. The bucket is deterministic given what it admits, so replaying the
/// sequence decides it; a sequence it admits meets [`bucket_bound`] over every window.
#[must_use]
pub fn plain_bucket_admits(capacity: u32, refill_every: u32, admitted: &[u8]) -> bool {
    let mut tokens = capacity;
    for (tick, &units) in (0u32..).zip(admitted) {
        if tick > 0 && tick.is_multiple_of(refill_every) {
            tokens = (tokens + 1).min(capacity);
        }
        match tokens.checked_sub(u32::from(units)) {
            Some(left) => tokens = left,
            None => return false,
        }
    }
    true
}
