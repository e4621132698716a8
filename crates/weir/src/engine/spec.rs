//! What an engine is built from: its rules, how requests are routed to them, and the
//! kind of store it decides on. `config` produces this after validating a file
//! (`Config::parse`, whose `engine` it is); the engine never reads configuration itself.

use std::time::Duration;

use weir_core::Policy;
use weir_store::{LeasePlan, RedisStoreConfig};

use super::{Descriptors, Routing};

/// Everything an [`Engine`](super::Engine) needs besides its store and clock.
#[derive(Debug, Clone)]
pub struct EngineSpec {
    /// Every rule, in file order, with unique names (`/v1/check` asks them by name).
    pub rules: Vec<NamedPolicy>,
    /// How requests are decided: identities, plans, and the rules with a `match`.
    pub(crate) routing: Routing,
    /// The kind of store the engine decides on.
    pub(crate) store: StoreKind,
    /// This instance's region, when rules are global across regions (`region:`).
    pub(crate) region: Option<RegionSpec>,
    /// The rules of the Envoy descriptors leased (`x-weir: { lease }`), and their
    /// plans: leased on a shared store as the rules with `lease` are.
    pub(crate) envoy_leases: Vec<(String, LeasePlan)>,
    /// The Envoy descriptors, when configured: their named limits' bans are listed
    /// and lifted, and their overrides set, through the admin API as a rule's are.
    pub(crate) envoy: Option<std::sync::Arc<Descriptors>>,
    /// The most settlements kept owed to a shared store while it is out
    /// (`settlements.max_owed`).
    pub(crate) max_owed: usize,
    /// A slot's lease on a shared store (`store.slot_lease`), for the rules of
    /// `algorithm: concurrency`.
    pub(crate) slot_lease: Duration,
}

/// This instance's region and the others (`region:`): where the shares of the rules
/// with `scope: global` are renewed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RegionSpec {
    /// This region's name.
    pub name: String,
    /// The other regions, by name, and their stores (with this region's key prefix,
    /// timeout and clock).
    pub peers: Vec<(String, RedisStoreConfig)>,
    /// How often shares are renewed.
    pub rebalance: Duration,
    /// Each region's floor, as a fraction of a global rule's limit.
    pub floor: f64,
}

impl RegionSpec {
    /// How many regions share a global limit, this one included.
    pub(crate) fn regions(&self) -> u64 {
        self.peers.len() as u64 + 1
    }
}

/// The most slots a `concurrency` rule may have (in the configuration, and in an
/// override set at runtime).
pub(crate) const MAX_IN_FLIGHT: u64 = 10_000;

/// A named limit: a rule's name and its policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPolicy {
    /// The rule's name: 1 to 64 characters of `A-Z a-z 0-9 _ . -` (it appears in store
    /// keys and in header fields, which need no escaping for these).
    pub name: String,
    /// Its policy.
    pub policy: Policy,
    /// How its keys are leased on a shared store (`lease:`), if they are.
    pub lease: Option<LeasePlan>,
    /// Whether its limit is global across regions (`scope: global`): each region
    /// decides its keys on its share.
    pub global: bool,
    /// Whether it limits requests in flight (`algorithm: concurrency`) rather than a
    /// rate: then `policy`'s limit is its number of slots, and nothing else of the
    /// policy applies.
    pub in_flight: bool,
}

/// The kind of store an engine decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// This process's memory: it never becomes unreachable.
    Memory,
    /// Redis, shared by every instance: when it cannot decide, fail-open rules are
    /// decided on a local fallback store.
    Redis,
}

impl StoreKind {
    /// Its name in metric labels.
    pub(crate) fn label(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Redis => "redis",
        }
    }

    /// Whether the store is shared, and so may fail: then the engine keeps a local
    /// fallback.
    pub(crate) fn is_shared(self) -> bool {
        self == StoreKind::Redis
    }
}
