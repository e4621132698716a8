//! Regional shares: the three steps of a rebalance of a global rule's key.

use std::time::Duration;

use weir_core::{Claim, Policy, Renewal, Report};

use super::{Key, LeaseStore, SlotStore, Store, StoreFuture};

/// A store that keeps regional shares of global limits (`weir_core`'s share module
/// has the protocol): what the [`RegionalStore`](crate::RegionalStore) rebalances on,
/// its own region's store and the other regions'.
pub trait ShareStore: Store {
    /// Step 1 (`weir_core::report_share`), on the region's own store, atomically with
    /// the key's checks: adds the units an instance was offered, and opens a claim when
    /// the region's renewal is due. `policy` is the region's ([`Policy::regional`]).
    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: Report,
    ) -> StoreFuture<'a, Option<Claim>>;

    /// Step 3 (`weir_core::apply_share`), on the region's own store: puts the share
    /// granted to claim `seq` in force, if that claim is still open and in time.
    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Step 2 (`weir_core::renew_share`), on the store of the key's home region: the
    /// share granted, or `None` for a stale claim. The records live beside the key's
    /// state, under a name of their own.
    fn renew_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        renewal: Renewal,
    ) -> StoreFuture<'a, Option<u64>>;
}

/// A store that keeps the state itself, or a layer over one: it checks, leases, keeps
/// regional shares and counts requests in flight (Redis, the memory store, a breaker
/// in front of either). What the store stack is built on, and what the regions are
/// given.
pub trait BackingStore: LeaseStore + ShareStore + SlotStore {}

impl<S: LeaseStore + ShareStore + SlotStore + ?Sized> BackingStore for S {}
