//! The state a store keeps under a key, between checks.

use crate::algorithm::{FixedWindow, Gcra, SlidingLog, SlidingWindow, TokenBucket};
use crate::share::{Home, Regional};

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

    /// Until when (ns since the Unix epoch) a store must keep this state even if its
    /// algorithm reports it full: a region's share record lives until its share's
    /// deadline and its claim's end, the records of a key's home until the last
    /// expires (`crate::share`). 0 for every other state, which lives until full.
    pub fn live_until(&self) -> u64 {
        match &self.0 {
            Inner::Regional(regional) => regional.live_until(),
            Inner::Home(home) => home.live_until(),
            _ => 0,
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
    /// A region's bucket for its share of a global limit, and the share.
    Regional(Box<Regional>),
    /// The shares the regions hold of one key, at the key's home.
    Home(Box<Home>),
}
