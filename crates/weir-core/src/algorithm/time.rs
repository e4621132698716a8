//! Exact conversions between the algorithms' integer units and `Duration`.

use std::time::Duration;

/// `numerator / denominator` nanoseconds, rounded up, as a `Duration` (saturating).
///
/// Waits are rounded up so that a client retrying after the reported time is admitted.
pub(crate) fn ceil_nanos(numerator: u128, denominator: u64) -> Duration {
    let nanos = numerator.div_ceil(u128::from(denominator));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// `nanos` as a `Duration`.
pub(crate) fn nanos(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}
