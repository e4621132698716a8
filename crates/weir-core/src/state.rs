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

impl State {
    /// The state as one word, when it is GCRA's theoretical arrival time in whole
    /// nanoseconds (always so under a policy that [`Policy::packs`](crate::Policy::packs)):
    /// the instant the key is full again, never 0. `None` for any other state.
    pub fn word(&self) -> Option<u64> {
        match &self.0 {
            Inner::Gcra(gcra) => gcra.word(),
            _ => None,
        }
    }

    /// The state that [`State::word`] gave as `word`; `None` for 0 (no state: full).
    pub fn from_word(word: u64) -> Option<Self> {
        (word != 0).then(|| State(Inner::Gcra(Gcra::from_word(word))))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inner {
    FixedWindow(FixedWindow),
    SlidingWindow(SlidingWindow),
    SlidingLog(Box<SlidingLog>),
    TokenBucket(TokenBucket),
    /// GCRA and the leaky bucket share one state: the theoretical arrival time.
    Gcra(Gcra),
}
