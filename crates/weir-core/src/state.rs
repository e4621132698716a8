//! The state a store keeps under a key, between checks.

use crate::algorithm::{FixedWindow, Gcra, SlidingLog, SlidingWindow, TokenBucket};

/// What an algorithm remembers about one key. Opaque: stores keep it and hand it back.
///
/// A key whose state is absent is "full" (nothing counted); the algorithms report
/// `reset_after == 0` exactly when the state is full again, which is when a store drops
/// it. State left by a different algorithm (after a configuration change) is ignored and
/// the key starts full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State(pub(crate) Inner);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inner {
    FixedWindow(FixedWindow),
    SlidingWindow(SlidingWindow),
    SlidingLog(Box<SlidingLog>),
    TokenBucket(TokenBucket),
    /// GCRA and the leaky bucket share one state: the theoretical arrival time.
    Gcra(Gcra),
}
