//! Slots: requests in flight per key (`algorithm: concurrency`), taken when a request
//! is decided and released when it ends.

use std::time::Duration;

use super::{Key, Store, StoreFuture};
use crate::StoreError;

/// One slot to take for a request: under which key, of how many.
#[derive(Debug, Clone, Copy)]
pub struct SlotTake<'a> {
    /// The key the slots are counted under.
    pub key: Key<'a>,
    /// How many requests of the key may be in flight at once (at least 1).
    pub limit: u64,
}

/// What a take found for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotsFree {
    /// Whether the request took its slot (every take of the call did, or none).
    pub allowed: bool,
    /// The slots of the key still free, after the take when it was allowed.
    pub free: u64,
}

/// A store that counts requests in flight per key: slots taken at a request's
/// decision and released when it ends.
///
/// A slot is named by the request's id (random, one per request), so a release is
/// exact and idempotent: releasing a slot twice, or one the store no longer holds,
/// changes nothing. A shared store keeps each slot as a lease with a deadline `lease`
/// after the take, which the store renews while the slot is held (every `lease / 3`);
/// a slot whose instance died expires at its deadline, so it stays taken for at most
/// `lease` after its last renewal.
///
/// The defaults, for a store that keeps no slots (a simulation's): every take fails
/// with [`StoreError::NoSlots`], a 503 under any failure policy, never a request let
/// through uncounted.
pub trait SlotStore: Store {
    /// Takes one slot named `id` under each of `takes`, all or nothing: if any key has
    /// no slot free, none is taken. A shared store drops the expired slots of each key
    /// first. Returns what each key has free.
    fn take_slots<'a>(
        &'a self,
        takes: &'a [SlotTake<'a>],
        id: u64,
        lease: Duration,
    ) -> StoreFuture<'a, Vec<SlotsFree>> {
        let _ = (takes, id, lease);
        Box::pin(std::future::ready(Err(StoreError::NoSlots)))
    }

    /// Releases the slot named `id` of each key of `keys` (one not held: nothing).
    fn release_slots<'a>(&'a self, keys: &'a [Key<'a>], id: u64) -> StoreFuture<'a, ()> {
        let _ = (keys, id);
        Box::pin(std::future::ready(Ok(())))
    }
}
