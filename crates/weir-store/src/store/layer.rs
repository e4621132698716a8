//! Wrappers: what a store in front of another does not change is forwarded to the
//! store it wraps, here, once.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Claim, Decision, Grant, LeaseId, Policy, Renewal, Report, Take};

use super::{
    Check, Key, LeaseStore, Settled, ShareStore, SlotStore, SlotTake, SlotsFree, Store, StoreFuture,
};

/// A store in front of another. Of the capabilities the store it wraps has, those the
/// wrapper does not implement itself are forwarded to it, each call through
/// [`Wraps::around`]: [`LeaseStore`] and [`ShareStore`] by the implementations below,
/// and checking too when the wrapper is a [`Layer`]. So a wrapper writes only what it
/// changes: the leasing and regional stores implement checking and pass leases on.
pub trait Wraps: Send + Sync + 'static {
    /// The store it wraps.
    type Inner: Store + ?Sized;

    /// The store it wraps.
    fn inner(&self) -> &Self::Inner;

    /// A call to the store it wraps, as this wrapper makes it: by default, as it is.
    fn around<'a, T: Send + 'a>(&'a self, call: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        call
    }
}

/// A wrapper that does the same around every call, checks included (the circuit
/// breaker guards each, the fleet simulation watches each for errors, an `Arc` does
/// nothing): a [`Store`] by the implementation below, and a [`LeaseStore`] or
/// [`ShareStore`] when the store it wraps is one.
pub trait Layer: Wraps {
    /// [`Store::is_ready`]: by default, whether the store it wraps is.
    fn ready(&self) -> bool {
        self.inner().is_ready()
    }
}

/// A shared store is a store (`Arc<RedisStore>` behind a breaker, say).
impl<S: Store + ?Sized> Wraps for Arc<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        self
    }
}

impl<S: Store + ?Sized> Layer for Arc<S> {}

/// Every call through [`Wraps::around`] ([`Store::decide_within`] by its default, on
/// [`Store::decide`]).
impl<L: Layer> Store for L {
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        self.around(self.inner().check(key, policy, cost))
    }

    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        self.around(self.inner().check_all(checks))
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        self.around(self.inner().preview_all(checks))
    }

    fn decide<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        within: Option<Duration>,
    ) -> StoreFuture<'a, Vec<Decision>> {
        self.around(self.inner().decide(checks, preview, within))
    }

    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        self.around(self.inner().refund_all(checks))
    }

    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        self.around(self.inner().charge_all(checks))
    }

    fn settle_all<'a>(
        &'a self,
        id: u128,
        refunds: &'a [Check<'a>],
        charges: &'a [Check<'a>],
    ) -> StoreFuture<'a, Settled> {
        self.around(self.inner().settle_all(id, refunds, charges))
    }

    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()> {
        self.around(self.inner().reset(key, policy))
    }

    fn is_ready(&self) -> bool {
        self.ready()
    }
}

impl<W: Wraps + Store> LeaseStore for W
where
    W::Inner: LeaseStore,
{
    fn take<'a>(&'a self, key: Key<'a>, policy: &'a Policy, take: Take) -> StoreFuture<'a, Grant> {
        self.around(self.inner().take(key, policy, take))
    }

    fn give_back<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        lease: LeaseId,
        unspent: u64,
    ) -> StoreFuture<'a, bool> {
        self.around(self.inner().give_back(key, policy, lease, unspent))
    }
}

impl<W: Wraps + Store> ShareStore for W
where
    W::Inner: ShareStore,
{
    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: Report,
    ) -> StoreFuture<'a, Option<Claim>> {
        self.around(self.inner().report_share(key, policy, report))
    }

    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: Duration,
    ) -> StoreFuture<'a, bool> {
        self.around(self.inner().apply_share(key, policy, seq, grant, hold))
    }

    fn renew_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        renewal: Renewal,
    ) -> StoreFuture<'a, Option<u64>> {
        self.around(self.inner().renew_share(key, policy, renewal))
    }
}

impl<W: Wraps + Store> SlotStore for W
where
    W::Inner: SlotStore,
{
    fn take_slots<'a>(
        &'a self,
        takes: &'a [SlotTake<'a>],
        id: u64,
        lease: Duration,
    ) -> StoreFuture<'a, Vec<SlotsFree>> {
        self.around(self.inner().take_slots(takes, id, lease))
    }

    fn release_slots<'a>(&'a self, keys: &'a [Key<'a>], id: u64) -> StoreFuture<'a, ()> {
        self.around(self.inner().release_slots(keys, id))
    }
}
