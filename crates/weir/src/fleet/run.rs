//! One run of a scenario: every gateway's real engine (its rules, leases, failure
//! policy and local fallback) on its region's simulated cluster, behind the circuit
//! breaker `weir serve` puts in front of Redis, on one virtual clock that the loop
//! moves to each request's instant; the leasing stores' deadline work and the
//! clusters' expiry run at their own intervals of that clock.
//!
//! Engines are built outside the Tokio runtime, so their leasing stores start no loop
//! of their own (it would tick in real time): the loop gives their leases back at
//! their interval instead. The runtime has one thread and every store answers at once,
//! so a seed replays the same run.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri};
use weir_core::{Clock, ManualClock};
use weir_store::{BackingStore, Breaker, BreakerConfig, RegionalStore, Regions};

use super::cluster::Cluster;
use super::recorder::{Recorder, Watched};
use super::scenario::Scenario;
use super::stats::{Fate, Recording, RunStats};
use super::traffic::{Traffic, mix};
use super::{FleetError, Progress};
use crate::engine::{Engine, EngineSpec, Verdict, single_identity_key};
use crate::metrics::Metrics;
use crate::stack;

/// The virtual clock's start: 2026-12-01 00:00:00 UTC.
const START: u64 = 1_796_083_200_000_000_000;

/// How often the clusters drop keys that hold nothing (as Redis expires them).
const SWEEP_EVERY: u64 = 10_000_000_000;

/// The header the scenario's rules read the caller from.
pub(super) const USER_HEADER: &str = "x-user";

/// The header the scenario's rules read the plan from.
pub(super) const PLAN_HEADER: &str = "x-plan";

/// What a run needs besides the scenario: the rules, the store's timeout, the seed.
pub(super) struct Setup<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The engine every gateway runs (with no `region`: the run builds the regional
    /// stores itself, on the simulated clusters).
    pub spec: &'a EngineSpec,
    /// The rules global across regions, and how their shares are rebalanced.
    pub shares: Option<&'a Shares>,
    /// The Redis store's timeout: how long a call to a shard that is down takes.
    pub timeout: Duration,
    /// The seed.
    pub seed: u64,
}

/// The rules with `scope: global` and the configuration's `region` section.
#[derive(Debug, Clone)]
pub(super) struct Shares {
    /// The global rules' names.
    pub rules: Vec<String>,
    /// How often shares are renewed.
    pub rebalance: Duration,
    /// Each region's floor, as a fraction of a global limit.
    pub floor: f64,
}

/// A gateway's engine, and its regional store if it has one (to be rebalanced on the
/// virtual clock).
type Gateway = (Engine, Option<Arc<RegionalStore>>);

/// A gateway's engine on its region's shared store, its stack built as `weir serve`
/// builds it (`stack::assemble`): the region's cluster behind the gateway's circuit
/// breaker, watched, and the fallback, regional and leasing stores in front; the
/// regional store's peers are the other regions' clusters (with no breaker: `weir
/// serve` connects to them directly), and it runs no loop of its own.
fn gateway(
    region: usize,
    clusters: &[Arc<Cluster>],
    setup: &Setup<'_>,
    clock: &Arc<ManualClock>,
    recorder: &Arc<Recorder>,
    seed: u64,
) -> Gateway {
    let breaker = Breaker::with_clock(
        Arc::clone(&clusters[region]),
        BreakerConfig::default(),
        Arc::clone(clock) as Arc<dyn Clock>,
    )
    .with_jitter_seed(seed);
    let own: Arc<dyn BackingStore> = Arc::new(Watched::new(breaker, Arc::clone(recorder)));
    let regions = setup.shares.filter(|s| !s.rules.is_empty()).map(|shares| {
        let names = &setup.scenario.regions;
        let stores = names
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let store = match i == region {
                    true => Arc::clone(&own),
                    false => Arc::clone(&clusters[i]) as Arc<dyn BackingStore>,
                };
                (r.name.clone(), store)
            })
            .collect();
        Regions {
            this: names[region].name.clone(),
            stores,
            rebalance: shares.rebalance,
            floor: shares.floor,
        }
    });
    let clock = Arc::clone(clock) as Arc<dyn Clock>;
    let metrics = Arc::new(Metrics::new(Arc::clone(&clock)));
    let (stack, regional) = stack::assemble(setup.spec, own, regions, &clock, &metrics, false);
    (
        Engine::with_stack(setup.spec, stack, clock, metrics),
        regional,
    )
}

/// Runs the scenario once; `progress` is advanced in milliseconds of virtual time.
pub(super) fn run(setup: &Setup<'_>, progress: &Progress) -> Result<RunStats, FleetError> {
    let scenario = setup.scenario;
    // Inside a runtime the leasing stores would start loops ticking in real time.
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(FleetError::Runtime(
            "the fleet simulation runs its own runtime: call it outside one".into(),
        ));
    }
    let clock = Arc::new(ManualClock::new(START));
    let recorder = Arc::new(Recorder::new(setup.seed));
    let clusters: Vec<Arc<Cluster>> = scenario
        .regions
        .iter()
        .map(|r| {
            let cluster = Cluster::new(
                r.shards,
                r.latency,
                setup.timeout,
                Arc::clone(&clock),
                Arc::clone(&recorder),
            );
            Arc::new(cluster)
        })
        .collect();
    let mut engines = Vec::new();
    let mut regionals = Vec::new();
    for (region, r) in scenario.regions.iter().enumerate() {
        for _ in 0..r.gateways {
            let seed = mix(setup.seed ^ mix(engines.len() as u64));
            let (engine, regional) = gateway(region, &clusters, setup, &clock, &recorder, seed);
            regionals.extend(regional);
            engines.push(Arc::new(engine));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| FleetError::Runtime(e.to_string()))?;
    let rules = &setup.spec.routing.rules;
    let names: HashMap<&str, usize> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let costs: Vec<Vec<u64>> = scenario
        .routes
        .iter()
        .map(|route| {
            rules
                .iter()
                .map(|r| r.cost_of(&route.method, None, &route.path))
                .collect()
        })
        .collect();
    let policies: Vec<_> = rules.iter().map(|r| r.policy).collect();
    let seconds = scenario.duration.as_secs().max(1) as usize;
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let shift = scenario
        .shift
        .as_ref()
        .map(|s| nanos(s.start)..nanos(s.end));
    let failure = scenario
        .failure
        .as_ref()
        .map(|f| (f.region, f.shard, nanos(f.start)..nanos(f.end)));
    let mut recording = Recording::new(
        scenario.populations.len(),
        &policies,
        seconds,
        shift,
        failure.as_ref().map(|(.., window)| window.clone()),
    );
    let tick = engines.first().and_then(|e| e.lease_tick()).map(nanos);
    let rebalance = setup
        .shares
        .filter(|_| !regionals.is_empty())
        .map(|s| nanos(s.rebalance));
    let user = HeaderName::from_static(USER_HEADER);
    let plan = HeaderName::from_static(PLAN_HEADER);
    let plans: Vec<HeaderValue> = scenario
        .populations
        .iter()
        .map(|p| HeaderValue::from_str(&p.plan))
        .collect::<Result<_, _>>()
        .map_err(|_| FleetError::Runtime("a plan name is not a header value".into()))?;
    let client = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    // The identity the rules key on (the scenario's rules key on one, read from
    // `X-User`): a key's shard is its stored form's.
    let key_name = rules
        .iter()
        .find_map(|r| r.key.first())
        .cloned()
        .unwrap_or_default();

    runtime.block_on(async {
        let mut traffic = Traffic::new(scenario, setup.seed);
        let mut next_tick = tick;
        let mut next_rebalance = rebalance;
        let mut next_sweep = SWEEP_EVERY;
        let mut down = false;
        let mut number = 0u64;
        let mut shown = 0u64;
        while let Some(request) = traffic.next_request() {
            let at = request.at;
            // Background work due before this request, at its own instants.
            while let Some(due) = next_tick.filter(|&due| due <= at) {
                clock.set(START + due);
                for engine in &engines {
                    engine.give_back_due_leases().await;
                }
                next_tick = tick.map(|every| due + every);
            }
            while let Some(due) = next_rebalance.filter(|&due| due <= at) {
                clock.set(START + due);
                for regional in &regionals {
                    regional.rebalance().await;
                }
                next_rebalance = rebalance.map(|every| due + every);
            }
            while next_sweep <= at {
                clock.set(START + next_sweep);
                for cluster in &clusters {
                    cluster.sweep();
                }
                recording.forget_quiet(next_sweep);
                next_sweep += SWEEP_EVERY;
            }
            if let Some((region, shard, window)) = &failure
                && window.contains(&at) != down
            {
                down = !down;
                clusters[*region].set_down(*shard, down);
            }
            clock.set(START + at);

            let population = &scenario.populations[request.population];
            let identity = format!("{}-{}", population.plan, request.rank);
            let mut headers = HeaderMap::with_capacity(2);
            if let Ok(value) = HeaderValue::from_str(&identity) {
                headers.insert(user.clone(), value);
            }
            headers.insert(plan.clone(), plans[request.population].clone());
            let route = &scenario.routes[request.route];
            let engine = &engines[request.gateway];
            recorder.begin(number);
            number += 1;
            let mut admitted = Vec::new();
            let fate = match engine.read(&route.method, &Uri::default(), &route.path, &headers) {
                Err(_) => Fate::Refused,
                Ok((head, routed)) => {
                    let facts = head.facts(&headers, client, true, None);
                    match engine.decide(routed, &facts).await {
                        Verdict::Allowed(allowed) => {
                            admitted.extend(
                                allowed
                                    .quotas
                                    .iter()
                                    .filter_map(|q| names.get(q.name).copied()),
                            );
                            Fate::Allowed
                        }
                        Verdict::Denied(_) => Fate::Denied,
                        Verdict::Unavailable => Fate::Unavailable,
                        Verdict::Refused(_) => Fate::Refused,
                    }
                }
            };
            let (latency, failed) = recorder.end();

            let touched = failure
                .as_ref()
                .is_some_and(|(region, _, window)| request.region == *region && at >= window.start);
            recording.request(request.population, at, (fate, failed), latency, touched);
            for rule in admitted {
                let cost = costs[request.route][rule];
                let who = (request.population, request.rank);
                recording.admitted(rule, who, request.region, at, cost);
            }
            if request.region != traffic.home(request.population, request.rank) {
                recording.moved();
            }
            if let Some((region, shard, window)) = &failure
                && request.region == *region
            {
                if window.contains(&at) {
                    let key = single_identity_key(&key_name, &identity);
                    let on_shard = clusters[*region].shard_of(&key) == *shard;
                    recording.during_failure(on_shard, fate, failed);
                } else if at >= window.end {
                    recording.after_failure(fate, failed);
                }
            }
            let ms = at / 1_000_000;
            if ms >= shown + 100 {
                progress.advance(ms - shown);
                shown = ms;
            }
        }
        progress.advance((nanos(scenario.duration) / 1_000_000).saturating_sub(shown));
    });
    let calls = clusters.iter().map(|c| c.calls()).collect();
    let by_rule: Vec<_> = clusters.iter().map(|c| c.calls_by_rule()).collect();
    let rule_calls = rules
        .iter()
        .map(|r| by_rule.iter().filter_map(|b| b.get(&r.name)).sum())
        .collect();
    Ok(recording.finish(calls, rule_calls))
}
