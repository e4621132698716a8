//! The client's one error type.

use std::time::Duration;

/// What the client itself refuses. Transport errors and the server's answers pass
/// through as they came (a refusal given up on is returned as the response it was).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The adaptive throttle refused the request without sending it: the server has
    /// been refusing most requests lately. Try later, or not at all.
    #[error("refused by the client's adaptive throttle: the server has been refusing requests (refusing {:.0}% now)", probability * 100.0)]
    Throttled {
        /// The probability the request was refused with.
        probability: f64,
    },
    /// A policy setting out of its range; the policy is not built.
    #[error("invalid client policy: {0}")]
    InvalidPolicy(&'static str),
}

/// How long a policy setting may be at most, for the settings that are durations:
/// longer ones are refused rather than overflowing a clock.
pub(crate) const MAX_SETTING: Duration = Duration::from_secs(24 * 60 * 60);
