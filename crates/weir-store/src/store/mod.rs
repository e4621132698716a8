//! What a store can do, one trait per capability, and the one way a wrapper passes on
//! what it does not change.
//!
//! - [`Store`]: checking (one key or several at once, atomically), previews, refunds,
//!   charges, resets, readiness: what every store does and what the engine decides on.
//! - [`LeaseStore`]: units of a bucket taken before they are spent (`take`, `give_back`).
//! - [`ShareStore`]: the three steps of a regional share's rebalance.
//! - [`SlotStore`]: requests in flight per key, taken and released.
//! - [`BackingStore`]: all three, what a store keeping the state itself offers (Redis,
//!   memory), or a layer over one: what the store stack is built on.
//! - [`Wraps`]: a store in front of another, which forwards to it what it does not
//!   change; a [`Layer`] changes no call, only does the same around each (a breaker).
//!
//! A wrapper that changes checking (the leasing and regional stores) implements
//! [`Store`] and [`Wraps`], and has leases forwarded to the store it wraps.

mod layer;
mod leases;
mod shares;
mod slots;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use weir_core::{Decision, Policy};

pub use self::layer::{Layer, Wraps};
pub use self::leases::LeaseStore;
pub use self::shares::{BackingStore, ShareStore};
pub use self::slots::{SlotStore, SlotTake, SlotsFree};
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

/// How long a store that can fail after writing remembers a settlement's id (see
/// [`Store::settle_all`]): a settlement sent again within this time of its first write
/// is not written twice. The cost is a key per settlement that gives back or charges,
/// for this long (about 130 bytes each on Redis).
pub const SETTLEMENTS_REMEMBERED: Duration = Duration::from_secs(300);

/// What [`Store::settle_all`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Written now.
    Written,
    /// Written by an earlier try of the same settlement (on a Redis Cluster, at least
    /// one identity's part of it): that part was not written again.
    Repeated,
}

/// A place where limit state lives, checked atomically: the capability every store
/// has, and what the engine decides on (`Arc<dyn Store>`).
///
/// Every implementation follows one specification (`weir_core::check`), so the same
/// sequence of checks at the same instants gives the same decisions whatever the store.
///
/// A store keeping state implements [`Store::check_all`] and [`Store::preview_all`]; a
/// store in front of another that decides the three ways a request's checks are
/// decided (committed, previewed, within a timeout) in one function implements
/// [`Store::decide`] instead. Each has a default in terms of the other, so one of the
/// two must be implemented.
pub trait Store: Send + Sync + 'static {
    /// Checks one key: reads its state, decides, and writes the new state, atomically.
    ///
    /// The default: [`Store::check_all`] of the one check.
    fn check<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision> {
        Box::pin(async move {
            let mut decisions = self.check_all(&[Check { key, policy, cost }]).await?;
            decisions
                .pop()
                .ok_or_else(|| StoreError::Protocol("no decision returned".into()))
        })
    }

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
    ///
    /// The default: [`Store::decide`], committing, with no timeout of its own.
    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        self.decide(checks, false, None)
    }

    /// What [`Store::check_all`] would decide now, changing nothing: for limits that
    /// count a request only after seeing its outcome (a failed login), and still block
    /// it up front once reached.
    ///
    /// The default: [`Store::decide`], previewing, with no timeout of its own.
    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        self.decide(checks, true, None)
    }

    /// [`Store::check_all`], or [`Store::preview_all`] when `preview`, given up after
    /// `within` (when given) with [`StoreError::Timeout`]: the one function a wrapper
    /// that changes how checks are decided implements. A store that tracks its health
    /// counts a timeout as a failure; a wrapper passes `within` on, so that the store
    /// below it sees the timeout too.
    ///
    /// The default: [`Store::preview_all`] or [`Store::check_all`], under a timeout.
    fn decide<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        within: Option<Duration>,
    ) -> StoreFuture<'a, Vec<Decision>> {
        let call = if preview {
            self.preview_all(checks)
        } else {
            self.check_all(checks)
        };
        let Some(timeout) = within else {
            return call;
        };
        Box::pin(async move {
            tokio::time::timeout(timeout, call)
                .await
                .unwrap_or(Err(StoreError::Timeout(timeout)))
        })
    }

    /// [`Store::decide`] within `timeout`: for callers that must wait less than the
    /// store's own timeout. Not to be implemented: a store implements
    /// [`Store::decide`].
    fn decide_within<'a>(
        &'a self,
        checks: &'a [Check<'a>],
        preview: bool,
        timeout: Duration,
    ) -> StoreFuture<'a, Vec<Decision>> {
        self.decide(checks, preview, Some(timeout))
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
    /// The default, for stores that keep no such state: [`StoreError::NoCharges`].
    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        let _ = checks;
        Box::pin(std::future::ready(Err(StoreError::NoCharges)))
    }

    /// Writes one request's settlement: gives back each of `refunds` (as
    /// [`Store::refund_all`]), then takes each of `charges` (as [`Store::charge_all`]),
    /// at most once under `id` however often it is sent. A settlement whose answer was
    /// lost (a timeout after the store had written it) is sent again when the store
    /// answers again, and must not give back or charge twice: a store that can fail
    /// after writing (Redis) remembers `id` for [`SETTLEMENTS_REMEMBERED`] beside the
    /// keys, atomically with the writes, and answers [`Settled::Repeated`] to a second
    /// try within that time. `id` is unique per settlement (random, 128 bits).
    ///
    /// The default, for stores in process (which answer or fail, never both): the
    /// refunds, then the charges, remembering nothing.
    fn settle_all<'a>(
        &'a self,
        id: u128,
        refunds: &'a [Check<'a>],
        charges: &'a [Check<'a>],
    ) -> StoreFuture<'a, Settled> {
        let _ = id;
        Box::pin(async move {
            if !refunds.is_empty() {
                self.refund_all(refunds).await?;
            }
            if !charges.is_empty() {
                self.charge_all(charges).await?;
            }
            Ok(Settled::Written)
        })
    }

    /// Forgets a key's state under `policy` (where a store keeps a key's state may
    /// depend on its algorithm), its leases included: its next check starts full.
    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()>;

    /// Whether the store is expected to answer now (connected, circuit closed): what
    /// `/readyz` reports. A store in process is always ready.
    fn is_ready(&self) -> bool {
        true
    }
}
