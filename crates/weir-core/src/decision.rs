//! The answer to one check.

use std::time::Duration;

/// What a check decided, with the numbers a client needs to behave well.
///
/// One type flows from the algorithms out through every front door; the HTTP gateway,
/// the decision API and the gRPC API only translate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed (and its cost was counted).
    pub allowed: bool,
    /// The policy's limit: requests (units of cost) per period.
    pub limit: u64,
    /// Units of cost still available after this request, rounded down.
    pub remaining: u64,
    /// Time until the state is back to full (nothing counted any more).
    pub reset_after: Duration,
    /// For a denied request, when the same cost would be allowed (if nothing else
    /// happens meanwhile). `None` when allowed, and when the cost exceeds what the
    /// policy can ever admit, since retrying can never work.
    pub retry_after: Option<Duration>,
    /// How long an admitted request should wait before it proceeds, so that requests
    /// leave at the steady rate (leaky bucket only; zero otherwise).
    pub delay: Duration,
}
