//! Random jitter for retry pauses, so that many instances do not retry in step.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// A small, lock-free pseudo-random source (SplitMix64), seeded at random per instance.
/// Not for anything secret: it only spreads pauses apart.
#[derive(Debug)]
pub(crate) struct Jitter(AtomicU64);

impl Jitter {
    /// A source seeded from the process's random hasher keys.
    pub(crate) fn new() -> Self {
        Self(AtomicU64::new(RandomState::new().hash_one(0x6a09_e667_u64)))
    }

    /// A source that gives the same numbers for the same `seed`: for simulations that
    /// must replay.
    pub(crate) fn seeded(seed: u64) -> Self {
        Self(AtomicU64::new(seed))
    }

    /// The next pseudo-random number.
    pub(crate) fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
