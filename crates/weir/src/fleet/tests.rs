//! The fleet simulation on the small scenario (examples/fleet/small.yaml, the seed's
//! rules): a seed replays the same report, leases cut store calls, no key outgrows
//! its bucket while the fleet is steady, and a failed shard sends its keys to each
//! rule's failure policy.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{Batch, Key, LeasePlan, LeaseStore, LeasingStore, Store};

use super::cluster::Cluster;
use super::recorder::Recorder;
use super::report::FleetReport;
use super::scenario::{Latency, Scenario};
use super::stats::{PHASES, Phase, RunStats};
use super::{Progress, simulate};

fn small() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/small.yaml");
    Scenario::load(&path).unwrap()
}

/// The small scenario from seed 1, run once for the tests that only read it.
static SMALL: LazyLock<FleetReport> =
    LazyLock::new(|| simulate(&small(), 1, &Progress::hidden()).unwrap());

fn calls(stats: &RunStats) -> u64 {
    stats
        .calls
        .iter()
        .flatten()
        .flatten()
        .map(|&n| u64::from(n))
        .sum()
}

#[test]
fn a_seed_replays_the_same_report() {
    let again = simulate(&small(), 1, &Progress::hidden()).unwrap();
    assert_eq!(SMALL.markdown(), again.markdown());
    let other = simulate(&small(), 2, &Progress::hidden()).unwrap();
    assert_ne!(SMALL.markdown(), other.markdown());
}

#[test]
fn both_runs_see_the_same_requests() {
    let requests = |stats: &RunStats| stats.plans.iter().map(|c| c.requests).collect::<Vec<_>>();
    assert_eq!(
        requests(&SMALL.with_leases),
        requests(&SMALL.without_leases)
    );
    assert_eq!(requests(&SMALL.with_leases).iter().sum::<u64>(), 400 * 40);
    assert!(SMALL.with_leases.moved > 0);
}

#[test]
fn leases_cut_the_calls_to_redis() {
    let (with, without) = (calls(&SMALL.with_leases), calls(&SMALL.without_leases));
    assert!(
        with < without,
        "{with} calls with leases, {without} without"
    );
    // The leased rule's own calls, by a tenth at least.
    let pro = SMALL.rules.iter().position(|r| r == "pro").unwrap();
    let (with, without) = (
        SMALL.with_leases.rule_calls[pro],
        SMALL.without_leases.rule_calls[pro],
    );
    assert!(
        with * 10 < without * 9,
        "pro: {with} calls with leases, {without} without"
    );
}

#[test]
fn a_global_rule_holds_one_bucket_across_regions() {
    let enterprise = SMALL.rules.iter().position(|r| r == "enterprise").unwrap();
    for (run, stats) in SMALL.runs() {
        let rule = &stats.rules[enterprise];
        let bound = rule.policy.capacity() + rule.policy.limit();
        for phase in [Phase::Steady, Phase::Shift] {
            let worst = &rule.worst[phase as usize];
            assert!(worst.admitted <= bound, "{run}: {worst:?} above {bound}");
        }
        // Its keys were asked for more than the limit: the shares bind.
        let plan = SMALL
            .scenario
            .populations
            .iter()
            .position(|p| p.plan == "enterprise")
            .unwrap();
        assert!(stats.plans[plan].denied > 0, "{run}");
    }
}

#[test]
fn no_key_outgrows_its_bucket_while_the_fleet_is_steady() {
    for (run, stats) in SMALL.runs() {
        for (name, rule) in SMALL.rules.iter().zip(&stats.rules) {
            let worst = &rule.worst[Phase::Steady as usize];
            let bound = rule.policy.capacity() + rule.policy.limit();
            assert!(
                worst.admitted <= bound,
                "{run}: {name} admitted {} to one key in a period (bound {bound})",
                worst.admitted
            );
            // One region admitted it all: no key is shared across regions then, but
            // by a global rule.
            if name != "enterprise" {
                assert!(worst.by_region.iter().filter(|&&n| n > 0).count() <= 1);
            }
        }
    }
}

#[test]
fn the_shift_lets_a_key_have_a_bucket_in_each_region() {
    let stats = &SMALL.with_leases;
    assert!(stats.moved > 0);
    let spread = stats.rules.iter().any(|rule| {
        let worst = &rule.worst[Phase::Shift as usize];
        worst.by_region.iter().filter(|&&n| n > 0).count() == 2
    });
    assert!(
        spread,
        "no worst window during the shift was admitted by two regions"
    );
}

#[test]
fn a_failed_shard_fails_login_closed_and_the_plans_open_to_the_local_fallback() {
    for (run, stats) in SMALL.runs() {
        let (on_shard, ..) = &stats.failure;
        assert!(on_shard.requests > 0, "{run}");
        // Logins (fail closed) get 503s; the plans (fail open) are decided on each
        // gateway's fallback, admitting some and denying some.
        assert!(on_shard.unavailable > 0, "{run}: {on_shard:?}");
        assert!(on_shard.fallback_allowed > 0, "{run}: {on_shard:?}");
        assert!(on_shard.fallback_denied > 0, "{run}: {on_shard:?}");
    }
    // Without leases nothing on the failed shard is decided on the shared store.
    let (on_shard, ..) = &SMALL.without_leases.failure;
    assert_eq!(on_shard.allowed + on_shard.denied, 0, "{on_shard:?}");
    // Nothing fails but during the failure, and after it in its region while a
    // gateway's breaker waits for its next probe.
    for stats in [&SMALL.with_leases, &SMALL.without_leases] {
        let failed: u64 = stats
            .plans
            .iter()
            .map(|c| c.fallback_allowed + c.fallback_denied + c.unavailable)
            .sum();
        let (a, b, after) = &stats.failure;
        let counted: u64 = [a, b, after]
            .iter()
            .map(|c| c.fallback_allowed + c.fallback_denied + c.unavailable)
            .sum();
        assert_eq!(failed, counted);
    }
}

/// One shard down costs only its own keys: the other shards' requests stay on Redis
/// (all but those a breaker refused before the health loops found the shard's slots
/// lost); with the per-cluster health of before, most went to the fallback.
#[test]
fn a_failed_shard_leaves_the_other_shards_keys_on_redis() {
    for (run, stats) in SMALL.runs() {
        let (_, others, _) = &stats.failure;
        assert!(others.requests > 0, "{run}");
        let failed = others.fallback_allowed + others.fallback_denied + others.unavailable;
        assert!(failed * 20 < others.requests, "{run}: {others:?}");
    }
}

#[test]
fn the_report_names_every_plan_and_phase() {
    let text = SMALL.markdown();
    for plan in ["free", "pro", "enterprise", "login"] {
        assert!(text.contains(&format!("| {plan}")), "{plan} missing");
    }
    assert_eq!(PHASES.len(), 3);
    assert!(text.contains("## The shard failure") && text.contains("## The traffic shift"));
}

/// The plot draws each rule's worst key over its own bound: a key admitted exactly
/// its bucket's burst plus a period's refill is at 1.0, half of it at 0.5, and a key
/// that reached two regions' buckets above 1.0.
#[test]
fn the_plot_draws_each_rule_against_its_own_bound() {
    let minute = std::time::Duration::from_secs(60);
    let rule = |algorithm, limit, burst, per_second: Vec<u64>| super::stats::RuleStats {
        policy: Policy::new(algorithm, limit, minute, burst).unwrap(),
        worst: Default::default(),
        per_second,
    };
    // A bucket of 60 a minute, burst 20: its bound is 80.
    let bucket = rule(Algorithm::Gcra, 60, Some(20), vec![80, 40, 0, 120]);
    assert_eq!(
        super::plot::against_bound(&bucket),
        [(0.5, 1.0), (1.5, 0.5), (2.5, 0.0), (3.5, 1.5)]
    );
    // A fixed window's bound is two windows' limits; an exact log's, its limit.
    let window = rule(Algorithm::FixedWindow, 10, None, vec![20]);
    assert_eq!(super::plot::against_bound(&window), [(0.5, 1.0)]);
    let log = rule(Algorithm::SlidingLog, 10, None, vec![10]);
    assert_eq!(super::plot::against_bound(&log), [(0.5, 1.0)]);
}

#[test]
fn the_plot_is_an_svg() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("fleet.svg");
    super::plot::write_svg(&SMALL, &path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Redis calls per second"));
}

/// A leasing store built outside a runtime runs no loop: its leases go back when its
/// owner drives it, at the deadline on the virtual clock.
#[test]
fn a_leasing_store_outside_a_runtime_gives_back_when_driven() {
    let clock = Arc::new(ManualClock::new(1_000_000_000_000));
    let latency = Latency {
        base: 0,
        spread: 0,
        tail: 0.0,
        tail_mean: 0,
    };
    let recorder = Arc::new(Recorder::new(1));
    let cluster = Arc::new(Cluster::new(
        1,
        latency,
        std::time::Duration::from_millis(50),
        clock.clone(),
        recorder,
    ));
    let plan = LeasePlan {
        batch: Batch::Fixed(10),
        hold: std::time::Duration::from_secs(2),
    };
    let leasing = LeasingStore::new(
        cluster.clone(),
        [("r".to_owned(), plan, 0)],
        clock.clone() as Arc<dyn Clock>,
        Arc::new(()),
    );
    let policy = Policy::new(
        Algorithm::Gcra,
        100,
        std::time::Duration::from_secs(60),
        None,
    )
    .unwrap();
    let key = Key {
        rule: "r",
        identity: "i",
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let remaining = |runtime: &tokio::runtime::Runtime| {
        // A zero-cost take reads the key under its leases.
        let grant = runtime
            .block_on(cluster.take(key, &policy, weir_core::Take::check(0)))
            .unwrap();
        grant.decision.remaining
    };
    runtime.block_on(leasing.check(key, &policy, 1)).unwrap();
    assert_eq!(remaining(&runtime), 90, "a batch of 10 taken, 1 spent");
    // Past the local deadline (3/4 of the hold): nothing goes back by itself (the
    // bucket cannot refill past the units out in the lease)...
    clock.advance(std::time::Duration::from_millis(1600));
    assert_eq!(remaining(&runtime), 90);
    // ...until the owner drives the store: the 9 units not spent come back.
    runtime.block_on(leasing.give_back_due());
    assert_eq!(remaining(&runtime), 99);
    assert_eq!(
        leasing.give_back_every(),
        std::time::Duration::from_millis(250)
    );
}

/// A call the breaker refuses never reaches the simulated shard (the cluster works
/// when polled, as Redis does when a command is sent), so it neither counts nor spends.
#[test]
fn a_call_the_breaker_refuses_never_reaches_a_shard() {
    let clock = Arc::new(ManualClock::new(1_000_000_000_000));
    let latency = Latency {
        base: 0,
        spread: 0,
        tail: 0.0,
        tail_mean: 0,
    };
    let cluster = Arc::new(Cluster::new(
        2,
        latency,
        std::time::Duration::from_millis(50),
        clock.clone(),
        Arc::new(Recorder::new(1)),
    ));
    let breaker = weir_store::Breaker::with_clock(
        cluster.clone(),
        weir_store::BreakerConfig::default(),
        clock.clone() as Arc<dyn Clock>,
    );
    let policy = Policy::new(
        Algorithm::Gcra,
        10,
        std::time::Duration::from_secs(60),
        None,
    )
    .unwrap();
    // One identity on each shard.
    let on = |shard: usize| {
        (0..)
            .map(|i| format!("user-{i}"))
            .find(|id| cluster.shard_of(id) == shard)
            .unwrap()
    };
    let (down, up) = (on(1), on(0));
    cluster.set_down(1, true);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let key = |identity| Key {
        rule: "r",
        identity,
    };
    for _ in 0..3 {
        assert!(
            runtime
                .block_on(breaker.check(key(&down), &policy, 1))
                .is_err()
        );
    }
    let reached = || {
        let calls = cluster.calls();
        calls.iter().flatten().map(|&n| u64::from(n)).sum::<u64>()
    };
    let before = reached();
    // Open: the healthy shard's key is refused without a call, and spends nothing.
    assert!(
        runtime
            .block_on(breaker.check(key(&up), &policy, 1))
            .is_err()
    );
    assert_eq!(reached(), before);
    let grant = runtime
        .block_on(cluster.take(key(&up), &policy, weir_core::Take::check(0)))
        .unwrap();
    assert_eq!(grant.decision.remaining, 10);
}

/// The seed's example as shipped: its scenario and rules read, and they agree.
#[test]
fn the_seed_example_is_the_articles_fleet() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/seed.yaml");
    let scenario = Scenario::load(&path).unwrap();
    assert_eq!(scenario.gateways(), 60);
    assert_eq!(scenario.regions.len(), 3);
    assert_eq!(scenario.identities(), 10_000_000);
    let peak = scenario.traffic.iter().map(|&(_, r)| r).fold(0.0, f64::max);
    assert_eq!(peak, 50_000.0);
    let config = crate::Config::load(&scenario.rules).unwrap();
    let shares = super::shares(&scenario, &config).unwrap().unwrap();
    assert_eq!(shares.rules, ["enterprise"]);
    let limits: Vec<(String, u64)> = config
        .engine
        .rules
        .iter()
        .map(|r| (r.name.clone(), r.policy.limit()))
        .collect();
    let want = [
        ("free", 60),
        ("pro", 1000),
        ("enterprise", 20_000),
        ("login", 10),
    ];
    assert_eq!(limits, want.map(|(n, l)| (n.to_owned(), l)));
}
