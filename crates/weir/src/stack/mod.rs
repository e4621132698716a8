//! The store stack, built in one place: configuration in, a finished [`StoreStack`]
//! out, for the engine to decide on. From the top down:
//!
//! ```text
//! LeasingStore    leased rules' units spent here        (rules with `lease`, shared store)
//! RegionalStore   global rules on this region's share   (rules with `scope: global`)
//!   peers:        the other regions' RedisStores        (the `region` section)
//! Breaker         the circuit in front of Redis         |  the memory store alone,
//! RedisStore      primary, with its health loop         |  with its sweeper
//!
//! fallback        a MemoryStore beside the stack, for fail-open rules while the
//!                 shared store is down
//! ```
//!
//! [`open`] opens the primary store (Redis behind its breaker, or memory); [`build`]
//! puts the rest on it, starting the peers' connections and the wrappers' loops. A
//! reload builds a new stack on the same primary when the `store` section is unchanged.
//! The fleet simulation calls [`assemble`], the same order on simulated stores with
//! its own regions and no loops.

mod primary;

use std::sync::Arc;

use weir_core::Clock;
use weir_store::{
    BackingStore, LeaseStore, LeasingStore, MemoryStore, MemoryStoreConfig, RedisStore,
    RegionalStore, Regions, SlotStore, Store,
};

pub(crate) use self::primary::open;
use crate::engine::{EngineSpec, Owed, StoreStack};
use crate::metrics::{LeaseMetrics, Metrics, ShareMetrics};

/// The most keys the local fallback store holds while the shared store is down.
const FALLBACK_MAX_KEYS: usize = 1_000_000;

/// The stack of `spec` on `primary`: the regions of its `region` section (a
/// `RedisStore` started per peer) and the loops of the regional and leasing stores
/// running (call it inside a Tokio runtime); on a shared store, settlements it cannot
/// take owed to `owed` (the instance's, kept across reloads).
pub(crate) fn build(
    spec: &EngineSpec,
    primary: Arc<dyn BackingStore>,
    clock: &Arc<dyn Clock>,
    metrics: &Arc<Metrics>,
    owed: Option<&Arc<Owed>>,
) -> StoreStack {
    let regions = spec.region.as_ref().map(|region| {
        let mut stores = vec![(region.name.clone(), Arc::clone(&primary))];
        for (name, config) in &region.peers {
            let peer = RedisStore::start(config, Arc::clone(clock));
            stores.push((name.clone(), peer as Arc<dyn BackingStore>));
        }
        Regions {
            this: region.name.clone(),
            stores,
            rebalance: region.rebalance,
            floor: region.floor,
        }
    });
    let mut stack = assemble(spec, primary, regions, clock, metrics, true).0;
    stack.owed = owed.filter(|_| spec.store.is_shared()).cloned();
    stack
}

/// The stack of `spec` on `primary`, in the order the module's doc draws: the fallback
/// (for a shared store), the regional store (with `regions`, for the global rules),
/// the leasing store (for the leased rules, on a shared store). With `run_loop`, the
/// regional store rebalances on its own loop; without (a simulation on a virtual
/// clock), its owner calls [`RegionalStore::rebalance`] on the store returned beside
/// the stack.
pub(crate) fn assemble(
    spec: &EngineSpec,
    primary: Arc<dyn BackingStore>,
    regions: Option<Regions>,
    clock: &Arc<dyn Clock>,
    metrics: &Arc<Metrics>,
    run_loop: bool,
) -> (StoreStack, Option<Arc<RegionalStore>>) {
    let fallback = spec.store.is_shared().then(|| {
        let limits = MemoryStoreConfig {
            max_keys: FALLBACK_MAX_KEYS,
        };
        MemoryStore::new(limits, Arc::clone(clock))
    });
    let slots = Arc::clone(&primary) as Arc<dyn SlotStore>;
    let regional = regions.and_then(|regions| regional(spec, &primary, regions, metrics, run_loop));
    let below: Arc<dyn LeaseStore> = match &regional {
        Some(regional) => Arc::clone(regional) as Arc<dyn LeaseStore>,
        None => primary,
    };
    let leasing = leasing(spec, &below, clock, metrics);
    let store: Arc<dyn Store> = match &leasing {
        Some(leasing) => Arc::clone(leasing) as Arc<dyn Store>,
        None => below,
    };
    let stack = StoreStack {
        store,
        leasing,
        fallback,
        owed: None,
        slots: Some(slots),
    };
    (stack, regional)
}

/// The regional store in front of `primary` for the rules with `scope: global`,
/// talking to the other regions' stores (only its rebalancing loop does); none
/// without global rules.
fn regional(
    spec: &EngineSpec,
    primary: &Arc<dyn BackingStore>,
    regions: Regions,
    metrics: &Arc<Metrics>,
    run_loop: bool,
) -> Option<Arc<RegionalStore>> {
    let global: Vec<&str> = spec
        .rules
        .iter()
        .filter(|rule| rule.global)
        .map(|rule| rule.name.as_str())
        .collect();
    if global.is_empty() {
        return None;
    }
    let events = ShareMetrics::new(metrics, global.iter().copied());
    let rules = global
        .iter()
        .enumerate()
        .map(|(i, name)| ((*name).to_owned(), i));
    #[expect(
        clippy::expect_used,
        reason = "the configuration lists this region once and its peers by other names, at most MAX_REGIONS (and the fleet its scenario's regions): what RegionalStore::new checks; built at load, not on a request's path"
    )]
    let regional = RegionalStore::new(Arc::clone(primary), regions, rules, events, run_loop)
        .expect("a validated region section");
    Some(regional)
}

/// The leasing store in front of `store` for the rules with `lease`, when the store is
/// shared (on the memory store, one process already holds every key: nothing to gain).
fn leasing(
    spec: &EngineSpec,
    store: &Arc<dyn LeaseStore>,
    clock: &Arc<dyn Clock>,
    metrics: &Arc<Metrics>,
) -> Option<Arc<LeasingStore>> {
    let leased: Vec<_> = spec
        .rules
        .iter()
        .filter_map(|rule| Some((rule.name.as_str(), rule.lease?)))
        .chain(
            spec.envoy_leases
                .iter()
                .map(|(rule, plan)| (rule.as_str(), *plan)),
        )
        .collect();
    if leased.is_empty() || !spec.store.is_shared() {
        return None;
    }
    let events = LeaseMetrics::new(metrics, leased.iter().map(|(name, _)| *name));
    let rules = leased
        .iter()
        .enumerate()
        .map(|(i, (name, plan))| ((*name).to_owned(), *plan, i));
    Some(LeasingStore::new(
        Arc::clone(store),
        rules,
        Arc::clone(clock),
        events,
    ))
}
