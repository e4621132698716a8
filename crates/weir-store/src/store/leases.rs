//! Leases: units of a bucket taken before they are spent.

use weir_core::{Grant, LeaseId, Policy, Take, leasable};

use super::{Key, Store, StoreFuture};

/// A store that leases units of a `token_bucket` or `gcra` key to the instances
/// (`weir_core::take`, whose doc has the protocol): what the [`LeasingStore`] in front
/// of a shared store takes from.
///
/// Why: an instance that spends a batch without asking the store for each unit saves a
/// store call per unit, and since leased units count against the capacity until given
/// back or expired, the key never admits more than the bucket alone.
///
/// The defaults, for stores that do not lease (the memory store, where every instance
/// has its own state and nothing is gained): see each method. The engine leases only on
/// shared stores.
///
/// [`LeasingStore`]: crate::LeasingStore
pub trait LeaseStore: Store {
    /// Takes units of a key before spending them: a lease. In one atomic step: drops
    /// the key's expired leases (their units count as spent), gives back
    /// `take.closing` (a lease being renewed) if it is still held, and grants between
    /// `take.min` and `take.max` units of what the bucket has available under the cap
    /// of the units still out in leases, recording a lease of them until `take.hold`
    /// has passed on the store's clock; or, with fewer than `min` available, grants
    /// nothing and reports the denial of a check of cost `min`. With a zero hold the
    /// units are spent at once: a check of a leased key that honours every instance's
    /// leases.
    ///
    /// The default: a check of cost `min`, granting exactly `min` units spent at once
    /// with no lease, ignoring `max` and `hold`; so it never admits more than a check.
    /// Other algorithms are refused ([`crate::StoreError::Lease`]).
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
                taken_rate: 0,
            })
        })
    }

    /// Gives back lease `lease` of a key with `unspent` of its units not spent
    /// (`weir_core::give_back`): atomically removes its record and refunds `unspent`
    /// (at most its units) under the cap of the leases still out. A lease expired or
    /// unknown changes nothing (its units already count as spent, never twice).
    /// Returns whether the lease was found.
    ///
    /// The default: nothing was leased, so nothing to do (`false`).
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
}
