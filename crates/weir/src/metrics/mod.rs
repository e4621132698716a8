//! What weir counts, for Prometheus and for the admin API.
//!
//! One [`Metrics`] lives as long as the process (reloads keep it): the Prometheus
//! families, and per rule name the live state the admin API reads (decision totals, the
//! identities denied most, the keys close to their limit). Every label is bounded by
//! the configuration (rule and plan names, outcomes, stores, status classes): no label
//! holds a user's key. An engine resolves the series it needs once, when it is built
//! ([`EngineMetrics`]), so counting a decision is a few atomic additions.

mod bans;
mod doors;
mod families;
mod leases;
mod live;
mod near_limit;
mod rates;
mod regions;
mod series;
mod settlements;
mod sharded;
mod top;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use weir_core::Clock;

pub(crate) use self::bans::ListKind;
pub(crate) use self::doors::{CLASSES, Door, EnvoyOutcome};
use self::families::{ConfigLabels, Families, ListenerLabels, StoreLabels};
pub(crate) use self::leases::LeaseMetrics;
pub(crate) use self::live::{RuleLive, RuleTotals};
pub(crate) use self::rates::Rates;
use self::rates::Samples;
pub(crate) use self::regions::ShareMetrics;
pub(crate) use self::series::{EngineMetrics, NONE, Outcome, RuleShape, StoreOp};
pub(crate) use self::settlements::{Dropped, OwedMetrics};
pub(crate) use self::top::Counted;

/// The content type of [`Metrics::encode`]'s output (OpenMetrics text, which Prometheus
/// scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The process's metrics and live per-rule state.
pub struct Metrics {
    registry: Registry,
    families: Families,
    rules: Mutex<HashMap<String, Arc<RuleLive>>>,
    /// Whether the last decision that needed the shared store was decided on the local
    /// fallback instead (so a switch to the fallback is counted once per outage).
    on_fallback: AtomicBool,
    /// The hash of the configuration serving now.
    config: Mutex<Option<String>>,
    /// How the store is doing, read at each scrape.
    store: Mutex<Option<StoreWatch>>,
    /// Each listener's connections served now, read at each scrape.
    listeners: Mutex<Vec<(&'static str, OpenConnections)>>,
    /// The overrides in force per rule, read at each scrape.
    overrides: Mutex<Option<OverridesInForce>>,
    /// Time for the windows of the live state.
    clock: Arc<dyn Clock>,
    /// The rules' totals over the last minute, for rates.
    samples: Mutex<Samples>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// How many overrides are in force per rule now, read at each scrape.
pub(crate) type OverridesInForce = Box<dyn Fn() -> Vec<(String, u64)> + Send + Sync>;

/// How many connections a listener serves now, read at each scrape.
pub(crate) type OpenConnections = Box<dyn Fn() -> usize + Send + Sync>;

/// What the metrics read of the store at each scrape.
pub(crate) struct StoreWatch {
    /// `memory` or `redis`.
    pub kind: &'static str,
    /// Whether the store answers now (`/readyz`).
    pub up: Box<dyn Fn() -> bool + Send + Sync>,
    /// Whether the store's circuit breaker is open (none for the memory store).
    pub breaker_open: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    /// How many Redis Cluster hash slots the health loop found lost, the rest of the
    /// cluster answering (none for a store without slots).
    pub slots_lost: Option<Box<dyn Fn() -> u64 + Send + Sync>>,
}

impl Metrics {
    /// Fresh metrics, whose live windows (the last minutes) read time from `clock`.
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        let mut registry = Registry::with_prefix("weir");
        let families = Families::register(&mut registry);
        // Known series start at 0, so that rates and dashboards see them before the
        // first event.
        for result in ["ok", "refused"] {
            families
                .reloads
                .get_or_create_owned(&families::ResultLabels { result });
        }
        Self {
            registry,
            families,
            rules: Mutex::new(HashMap::new()),
            on_fallback: AtomicBool::new(false),
            config: Mutex::new(None),
            store: Mutex::new(None),
            listeners: Mutex::new(Vec::new()),
            overrides: Mutex::new(None),
            clock,
            samples: Mutex::new(Samples::default()),
        }
    }

    /// Reports the listener named `listener` (`main`, `admin`, `grpc`): at most `max`
    /// connections at once, `open` of them now.
    pub fn watch_listener(&self, listener: &'static str, max: usize, open: OpenConnections) {
        let labels = ListenerLabels { listener };
        self.families
            .connections_max
            .get_or_create(&labels)
            .set(i64::try_from(max).unwrap_or(i64::MAX));
        self.listeners.lock().push((listener, open));
    }

    /// The live state of the rule named `rule` (made on first use, kept across reloads).
    pub(crate) fn rule(&self, rule: &str) -> Arc<RuleLive> {
        Arc::clone(self.rules.lock().entry(rule.to_owned()).or_default())
    }

    /// Samples every rule's totals (call every few seconds: rates are taken between
    /// samples about a minute apart).
    pub fn sample(&self) {
        let totals = self.totals();
        self.samples.lock().sample(self.clock.now(), totals);
    }

    /// Every rule's decision rates over about the last minute (sampling now too).
    pub(crate) fn rates(&self) -> HashMap<String, Rates> {
        let now = self.clock.now();
        let totals = self.totals();
        let mut samples = self.samples.lock();
        samples.sample(now, totals.clone());
        samples.rates(now, &totals)
    }

    /// The engine's time (for the windows of the live state).
    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    fn totals(&self) -> HashMap<String, RuleTotals> {
        self.rules
            .lock()
            .iter()
            .map(|(name, live)| (name.clone(), live.totals()))
            .collect()
    }

    /// Counts a configuration reload (`ok` or `refused`).
    pub(crate) fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "refused" };
        self.families
            .reloads
            .get_or_create(&families::ResultLabels { result })
            .inc();
    }

    /// Records the configuration now serving, by the SHA-256 of its file.
    pub(crate) fn serving_config(&self, sha256: &str) {
        let mut current = self.config.lock();
        if let Some(old) = current.take() {
            self.families.config.remove(&ConfigLabels { sha256: old });
        }
        self.families
            .config
            .get_or_create(&ConfigLabels {
                sha256: sha256.to_owned(),
            })
            .set(1);
        *current = Some(sha256.to_owned());
    }

    /// Tells the metrics how to read the store's state at each scrape (replacing the
    /// store watched before, whose gauges go).
    pub(crate) fn watch_store(&self, watch: StoreWatch) {
        self.families.store_up.clear();
        self.families.breaker_open.clear();
        *self.store.lock() = Some(watch);
    }

    /// Tells the metrics how to count the overrides in force at each scrape.
    pub(crate) fn watch_overrides(&self, in_force: OverridesInForce) {
        *self.overrides.lock() = Some(in_force);
    }

    /// Notes that a decision was made on the shared store (`false`) or on the local
    /// fallback (`true`); counts each switch to the fallback.
    fn decided_on_fallback(&self, fallback: bool) {
        if self.on_fallback.load(Ordering::Relaxed) != fallback
            && self.on_fallback.swap(fallback, Ordering::Relaxed) != fallback
            && fallback
        {
            self.families.fallback_activations.inc();
        }
    }

    /// Every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        for (listener, open) in &*self.listeners.lock() {
            self.families
                .connections
                .get_or_create(&ListenerLabels { listener })
                .set(i64::try_from(open()).unwrap_or(i64::MAX));
        }
        if let Some(watch) = &*self.store.lock() {
            let labels = StoreLabels { store: watch.kind };
            self.families
                .store_up
                .get_or_create(&labels)
                .set(i64::from((watch.up)()));
            let open = watch.breaker_open.as_ref().is_some_and(|open| open());
            self.families
                .breaker_open
                .get_or_create(&labels)
                .set(i64::from(open));
            if let Some(lost) = &watch.slots_lost {
                self.families
                    .slots_lost
                    .get_or_create(&labels)
                    .set(i64::try_from(lost()).unwrap_or(i64::MAX));
            }
        }
        if let Some(in_force) = &*self.overrides.lock() {
            self.families.overrides_in_force.clear();
            for (rule, n) in in_force() {
                self.families
                    .overrides_in_force
                    .get_or_create(&families::RuleLabels { rule })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        let now = self.clock.now();
        for (name, live) in self.rules.lock().iter() {
            let estimate = live.near_limit_keys(now);
            self.families
                .near_limit_keys
                .get_or_create(&families::RuleLabels { rule: name.clone() })
                .set(i64::try_from(estimate).unwrap_or(i64::MAX));
        }
        let mut text = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}
