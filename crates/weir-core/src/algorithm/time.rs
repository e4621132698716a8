//! Exact integer helpers: division of 128-bit intermediates, and conversion to
//! `Duration`.
//!
//! The algorithms form products in 128 bits so that nothing can overflow, but the
//! values are nearly always small; dividing them in 64 bits when they fit keeps a check
//! at a few nanoseconds (a 128-bit division costs several times more).

use std::time::Duration;

/// `numerator / denominator` and the remainder, exactly.
pub(crate) fn div_rem(numerator: u128, denominator: u64) -> (u128, u64) {
    match u64::try_from(numerator) {
        Ok(small) => (u128::from(small / denominator), small % denominator),
        Err(_) => {
            let wide = u128::from(denominator);
            (numerator / wide, (numerator % wide) as u64)
        }
    }
}

/// `numerator / denominator`, rounded up.
pub(crate) fn div_ceil(numerator: u128, denominator: u64) -> u128 {
    let (quotient, remainder) = div_rem(numerator, denominator);
    quotient + u128::from(remainder > 0)
}

/// `numerator / denominator` nanoseconds, rounded up, as a `Duration` (saturating).
///
/// Waits are rounded up so that a client retrying after the reported time is admitted.
pub(crate) fn ceil_nanos(numerator: u128, denominator: u64) -> Duration {
    nanos(u64::try_from(div_ceil(numerator, denominator)).unwrap_or(u64::MAX))
}

/// `nanos` as a `Duration`.
pub(crate) fn nanos(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}
