//! Random-looking 128-bit ids, made cheaply: two randomly keyed hashers (std's
//! `RandomState`, seeded from the operating system) over a counter. For the ids of
//! parked settlements (a caller must not guess another's) and of settlements written to
//! a shared store (instances must not collide there).

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes ids; each maker has keys of its own.
#[derive(Default)]
pub(super) struct RandomIds {
    keys: (RandomState, RandomState),
    made: AtomicU64,
}

impl RandomIds {
    /// A new id, and how many this maker made before it.
    pub(super) fn next(&self) -> (u128, u64) {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let half = |key: &RandomState| {
            let mut hasher = key.build_hasher();
            hasher.write_u64(n);
            hasher.finish()
        };
        let id = (u128::from(half(&self.keys.0)) << 64) | u128::from(half(&self.keys.1));
        (id, n)
    }
}
