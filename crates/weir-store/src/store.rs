//! The `Store` trait: one atomic operation, applied to one key or to several at once.

use std::future::Future;
use std::pin::Pin;

use weir_core::{Decision, Policy};

use crate::StoreError;

/// The future a [`Store`] returns: boxed, so that stores can be chosen at run time
/// (`Arc<dyn Store>`) from the configuration.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// One limit to check for a request: the key's state, under a policy, for a cost.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The key the state lives under (rule and identity, built by the caller).
    pub key: &'a str,
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
        key: &'a str,
        policy: &'a Policy,
        cost: u64,
    ) -> StoreFuture<'a, Decision>;

    /// Checks several limits for one request, atomically and all-or-nothing: the cost is
    /// consumed from every key only if every check allows it. When any check denies,
    /// nothing is consumed, and the checks that would have passed report their
    /// unchanged state. Decisions come back in the order of `checks`.
    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>>;

    /// Forgets a key's state: its next check starts full.
    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, ()>;
}
