//! The `Store` trait: one atomic operation, applied to one key or to several at once.

use std::future::Future;
use std::pin::Pin;

use weir_core::{Claim, Decision, Grant, LeaseId, Policy, Renewal, Report, Take, leasable};

use crate::StoreError;

/// The future a [`Store`] returns: boxed, so that stores can be chosen at run time
/// (`Arc<dyn Store>`) from the configuration.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Whose state, under which rule: what a store keys its state by.
///
/// `rule` must not contain `:` (weir's configuration allows only `A-Z a-z 0-9 _ . -`),
/// so that no identity can reach another rule's state. `identity` may be any string:
/// each store encodes it so that it cannot reach another identity's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key<'a> {
    /// The rule's name.
    pub rule: &'a str,
    /// Who is limited: a user, an API key, an IP address...
    pub identity: &'a str,
}

/// One limit to check for a request: the key's state, under a policy, for a cost.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The key the state lives under.
    pub key: Key<'a>,
    /// The policy to apply.
    pub policy: &'a Policy,
    /// Units of cost this request takes (0 peeks).
    pub cost: u64,
}

/// A place where limit state lives, updated atomically per check.
///
/// Every implementation follows one specification (`weir_core::check`), so the same
/// sequence of checks at the same instants gives the same decisions whatever the store.
pub trait Store: Send + Sync + 'static {
    /// Checks one key: reads its state, decides, and writes the new state, atomically.
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision>;

    /// Checks several limits for one request, atomically and all-or-nothing: the cost is
    /// consumed from every key only if every check allows it. When any check denies,
    /// nothing is consumed, and the checks that would have passed report their
    /// unchanged state. Decisions come back in the order of `checks`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use weir_core::{Algorithm, ManualClock, Policy};
    /// use weir_store::{Check, Key, MemoryStore, MemoryStoreConfig, Store};
    ///
    /// let store = MemoryStore::new(MemoryStoreConfig::default(), Arc::new(ManualClock::new(0)));
    /// let second = Policy::new(Algorithm::FixedWindow, 5, Duration::from_secs(1), None)?;
    /// let hour = Policy::new(Algorithm::FixedWindow, 2, Duration::from_secs(3600), None)?;
    /// // A caller's per-second and per-hour limits, decided together.
    /// let checks = |cost| {
    ///     [
    ///         Check { key: Key { rule: "per-second", identity: "ana" }, policy: &second, cost },
    ///         Check { key: Key { rule: "per-hour", identity: "ana" }, policy: &hour, cost },
    ///     ]
    /// };
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// runtime.block_on(async {
    ///     let both = store.check_all(&checks(2)).await?;
    ///     assert!(both.iter().all(|d| d.allowed));
    ///     // The hour is spent: the next unit is denied by it, and the second's window,
    ///     // which would have allowed it, gives nothing up.
    ///     let denied = store.check_all(&checks(1)).await?;
    ///     assert_eq!((denied[0].allowed, denied[1].allowed), (true, false));
    ///     assert_eq!(denied[0].remaining, 3, "nothing consumed from the second's window");
    ///     Ok::<_, weir_store::StoreError>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>>;

    /// What [`Store::check_all`] would decide now, changing nothing: for limits that
    /// count a request only after seeing its outcome (a failed login), and still block
    /// it up front once reached.
    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>>;

    /// [`Store::check_all`], or [`Store::preview_all`] when `preview`, given up after
    /// `timeout` with [`StoreError::Timeout`]: for callers that must wait less than the
    /// store's own timeout. A store that tracks its health counts that as a failure.
    fn decide_within<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        timeout: std::time::Duration,
    ) -> StoreFuture<'a, Vec<Decision>> {
        let call = if preview {
            self.preview_all(checks)
        } else {
            self.check_all(checks)
        };
        Box::pin(async move {
            tokio::time::timeout(timeout, call)
                .await
                .unwrap_or(Err(StoreError::Timeout(timeout)))
        })
    }

    /// Gives back each check's `cost` on its key under its policy, atomically for the
    /// whole call (`weir_core::refund` per check, in order; on a Redis Cluster, per
    /// identity): for limits counted by outcome, reserved by [`Store::check_all`]
    /// before the request and given back when its outcome does not count. Never gives
    /// back more than a key's state holds; a key with nothing counted is left alone, so
    /// a refund never creates a key.
    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()>;

    /// Takes each check's `cost` (at most its policy's capacity) whether or not it is
    /// left, atomically for the whole call (`weir_core::charge` per check, in order; on
    /// a Redis Cluster, per identity): for costs known only once the request has been
    /// answered, charged on top of the estimate [`Store::check_all`] reserved. A token
    /// bucket or GCRA key goes into debt, which its later checks wait out; a window or
    /// log takes the cost only where a check would allow it.
    ///
    /// The default, for wrappers that do not pass charges on: [`StoreError::NoCharges`].
    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        let _ = checks;
        Box::pin(std::future::ready(Err(StoreError::NoCharges)))
    }

    /// Takes units of a `token_bucket` or `gcra` key before spending them: a lease
    /// (`weir_core::take`, whose doc has the protocol). In one atomic step: drops the
    /// key's expired leases (their units count as spent), gives back `take.closing` (a
    /// lease being renewed) if it is still held, and grants between `take.min` and `take.max` units of
    /// what the bucket has available under the cap of the units still out in leases,
    /// recording a lease of them until `take.hold` has passed on the store's clock; or,
    /// with fewer than `min` available, grants nothing and reports the denial of a
    /// check of cost `min`. With a zero hold the units are spent at once: a check of a
    /// leased key that honours every instance's leases.
    ///
    /// Why: an instance that spends a batch without asking the store for each unit
    /// saves a store call per unit, and since leased units count against the capacity
    /// until given back or expired, the key never admits more than the bucket alone.
    ///
    /// The default, for stores that do not lease (the memory store, where every
    /// instance has its own state and nothing is gained): a check of cost `min`,
    /// granting exactly `min` units spent at once with no lease, ignoring `max` and
    /// `hold`; so it never admits more than a check. The engine leases only on shared
    /// stores. Other algorithms are refused ([`StoreError::Lease`]).
    ///
    /// A leased key is checked by `take` with no hold, never by [`Store::check`],
    /// which does not see the leases (and would decide as if no unit were out).
    fn take<'a>(&'a self, key: Key<'a>, policy: &'a Policy, take: Take) -> StoreFuture<'a, Grant> {
        Box::pin(async move {
            leasable(policy)?;
            let decision = self.check(key, policy, take.min).await?;
            Ok(Grant {
                lease: None,
                units: if decision.allowed { take.min } else { 0 },
                decision,
                closed: false,
            })
        })
    }

    /// Gives back lease `lease` of a key with `unspent` of its units not spent
    /// (`weir_core::give_back`): atomically removes its record and refunds `unspent`
    /// (at most its units) under the cap of the leases still out. A lease expired or
    /// unknown changes nothing (its units already count as spent, never twice).
    /// Returns whether the lease was found.
    ///
    /// The default, for stores that do not lease: nothing was leased, so nothing to do
    /// (`false`).
    fn give_back<'a>(
        &'a self,
        _key: Key<'a>,
        policy: &'a Policy,
        _lease: LeaseId,
        _unspent: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            leasable(policy)?;
            Ok(false)
        })
    }

    /// Forgets a key's state under `policy` (where a store keeps a key's state may
    /// depend on its algorithm), its leases included: its next check starts full.
    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()>;

    /// Step 1 of a rebalance of a region's share of a global rule's key
    /// (`weir_core::report_share`, whose module has the protocol), on the region's
    /// own store, atomically with the key's checks: adds the units an instance was
    /// offered, and opens a claim when the region's renewal is due. `policy` is the
    /// region's ([`Policy::regional`]).
    ///
    /// The default, for stores that keep no shares: [`StoreError::NoShares`].
    fn report_share<'a>(
        &'a self,
        _key: Key<'a>,
        _policy: &'a Policy,
        _report: Report,
    ) -> StoreFuture<'a, Option<Claim>> {
        Box::pin(async { Err(StoreError::NoShares) })
    }

    /// Step 3 (`weir_core::apply_share`), on the region's own store: puts the share
    /// granted to claim `seq` in force, if that claim is still open and in time.
    ///
    /// The default: [`StoreError::NoShares`].
    fn apply_share<'a>(
        &'a self,
        _key: Key<'a>,
        _policy: &'a Policy,
        _seq: u64,
        _grant: u64,
        _hold: std::time::Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async { Err(StoreError::NoShares) })
    }

    /// Step 2 (`weir_core::renew_share`), on the store of the key's home region: the
    /// share granted, or `None` for a stale claim. The records live beside the key's
    /// state, under a name of their own.
    ///
    /// The default: [`StoreError::NoShares`].
    fn renew_share<'a>(
        &'a self,
        _key: Key<'a>,
        _policy: &'a Policy,
        _renewal: Renewal,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async { Err(StoreError::NoShares) })
    }

    /// Whether the store is expected to answer now (connected, circuit closed): what
    /// `/readyz` reports. A store in process is always ready.
    fn is_ready(&self) -> bool {
        true
    }
}

/// A shared store is a store (`Arc<RedisStore>` behind a breaker, say).
impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        (**self).check(key, policy, cost)
    }

    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        (**self).check_all(checks)
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        (**self).preview_all(checks)
    }

    fn decide_within<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        timeout: std::time::Duration,
    ) -> StoreFuture<'a, Vec<Decision>> {
        (**self).decide_within(checks, preview, timeout)
    }

    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        (**self).refund_all(checks)
    }

    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        (**self).charge_all(checks)
    }

    fn take<'a>(&'a self, key: Key<'a>, policy: &'a Policy, take: Take) -> StoreFuture<'a, Grant> {
        (**self).take(key, policy, take)
    }

    fn give_back<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        lease: LeaseId,
        unspent: u64,
    ) -> StoreFuture<'a, bool> {
        (**self).give_back(key, policy, lease, unspent)
    }

    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()> {
        (**self).reset(key, policy)
    }

    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: Report,
    ) -> StoreFuture<'a, Option<Claim>> {
        (**self).report_share(key, policy, report)
    }

    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: std::time::Duration,
    ) -> StoreFuture<'a, bool> {
        (**self).apply_share(key, policy, seq, grant, hold)
    }

    fn renew_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        renewal: Renewal,
    ) -> StoreFuture<'a, Option<u64>> {
        (**self).renew_share(key, policy, renewal)
    }

    fn is_ready(&self) -> bool {
        (**self).is_ready()
    }
}
