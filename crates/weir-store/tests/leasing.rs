//! The leasing store on a real `redis-server`: several instances (each its own
//! `LeasingStore` and connection) spending leases of one hot key on one manual clock
//! (`clock: local`, so the store's time is the test's). What a caller depends on: no
//! window ever admits more than the bucket alone would, the instances together admit
//! nearly all of it, a hot key costs a store call per batch, denials are not asked
//! again, a crashed instance's units come back after the hold, and a request denied by
//! another rule gives its leased units back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use weir_core::{Algorithm, Clock, ManualClock, Policy};
use weir_store::{Batch, Check, Key, LeasePlan, LeaseStore, LeasingStore, Store};
use weir_testkit::RedisServer;

mod leasing_common;

use leasing_common::{Counted, SECOND, START, hot};

async fn redis(server: &RedisServer, clock: &Arc<ManualClock>) -> Arc<dyn LeaseStore> {
    leasing_common::redis(server, clock, "leasing").await
}

/// `n` instances leasing rule `hot` under `plan` on one Redis.
async fn instances(
    server: &RedisServer,
    clock: &Arc<ManualClock>,
    n: usize,
    plan: LeasePlan,
    events: &Arc<Counted>,
) -> Vec<Arc<LeasingStore>> {
    let mut all = Vec::new();
    for _ in 0..n {
        let inner = redis(server, clock).await;
        let rules = [("hot".to_owned(), plan, 0)];
        all.push(LeasingStore::new(
            inner,
            rules,
            clock.clone(),
            events.clone(),
        ));
    }
    all
}

/// Store calls that ran a script (checks, takes, give-backs).
fn script_calls(server: &RedisServer) -> u64 {
    ["fcall", "evalsha", "eval"]
        .iter()
        .map(|c| server.calls(c))
        .sum()
}

/// What a run admitted, at which instants.
struct Run {
    admitted: Vec<u64>,
    requests: u64,
}

/// Offers `per_step` one-unit requests every `step`, spread over the instances in
/// turn and sent together, for `steps` steps; `before` runs before each step (to
/// crash an instance, say) and returns the instances still running.
async fn hammer(
    clock: &Arc<ManualClock>,
    mut running: Vec<Arc<LeasingStore>>,
    policy: Policy,
    per_step: usize,
    step: Duration,
    steps: usize,
    mut before: impl FnMut(usize, &mut Vec<Arc<LeasingStore>>),
) -> Run {
    let mut run = Run {
        admitted: Vec::new(),
        requests: 0,
    };
    let mut turn = 0;
    for s in 0..steps {
        before(s, &mut running);
        let now = clock.now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..per_step {
            let store = running[turn % running.len()].clone();
            turn += 1;
            tasks.spawn(async move {
                let checks = [Check {
                    key: hot("ana"),
                    policy: &policy,
                    cost: 1,
                }];
                store.check_all(&checks).await.unwrap()[0].allowed
            });
        }
        while let Some(allowed) = tasks.join_next().await {
            run.requests += 1;
            if allowed.unwrap() {
                run.admitted.push(now);
            }
        }
        clock.advance(step);
    }
    run
}

/// The most a token bucket of `capacity`, refilling `limit` per `period`, admits in
/// any window of `window`: what it holds, plus the refill (rounded up for the phase).
fn bucket_bound(policy: &Policy, window: Duration) -> u64 {
    let refill = (window.as_nanos() * u128::from(policy.limit()))
        .div_ceil(policy.period().as_nanos()) as u64;
    policy.capacity() + refill
}

/// The most admitted in any window of `window` (instants within it: `[t, t + window)`).
fn worst_window(admitted: &[u64], window: Duration) -> u64 {
    let window = window.as_nanos() as u64;
    let mut inside = VecDeque::new();
    let mut worst = 0;
    for &t in admitted {
        inside.push_back(t);
        while inside.front().is_some_and(|&first| first + window <= t) {
            inside.pop_front();
        }
        worst = worst.max(inside.len() as u64);
    }
    worst
}

fn admitted_between(admitted: &[u64], from: u64, to: u64) -> u64 {
    admitted.iter().filter(|&&t| t >= from && t < to).count() as u64
}

fn assert_within_the_bucket(policy: &Policy, run: &Run) {
    for window in [
        Duration::from_millis(100),
        Duration::from_secs(1),
        Duration::from_secs(10),
        policy.period(),
        policy.period() * 2,
    ] {
        let worst = worst_window(&run.admitted, window);
        let bound = bucket_bound(policy, window);
        assert!(
            worst <= bound,
            "{worst} admitted in a window of {window:?}, over the bucket's {bound}"
        );
    }
}

/// 4 instances, 20,000/min (a token bucket holding a minute's worth), offered twice
/// that for three minutes in 3 ms steps: within the bucket in every window, at least
/// 97% of the limit admitted in each minute after the first, and at least 50 times
/// fewer store calls than requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_leased_by_four_instances_stays_within_the_bucket_with_fifty_times_fewer_calls() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(
        Algorithm::TokenBucket,
        20_000,
        Duration::from_secs(60),
        None,
    )
    .unwrap();
    let stores = instances(&server, &clock, 4, LeasePlan::auto(), &events).await;
    let calls_before = script_calls(&server);
    // 2 requests every 3 ms: 40,000 a minute.
    let run = hammer(
        &clock,
        stores,
        policy,
        2,
        Duration::from_millis(3),
        60_000,
        |_, _| {},
    )
    .await;
    let calls = script_calls(&server) - calls_before;
    assert_within_the_bucket(&policy, &run);
    for minute in 1..3 {
        let from = START + minute * 60 * SECOND;
        let admitted = admitted_between(&run.admitted, from, from + 60 * SECOND);
        assert!(
            admitted * 100 >= 97 * 20_000,
            "minute {minute}: {admitted} admitted of 20,000"
        );
    }
    assert!(
        calls * 50 <= run.requests,
        "{calls} store calls for {} requests",
        run.requests
    );
    assert!(
        events.denied.load(Ordering::Relaxed) > 0,
        "denials are answered here"
    );
}

/// 4 instances, 20,000/min with a burst of only 200 (a hundredth of a minute's refill),
/// offered twice that for two minutes in 3 ms steps: within the bucket in every
/// window, at least 97% of the limit admitted in the second minute, and at least 30
/// times fewer store calls than requests (issue 41: batches sized from the key's
/// demand across the instances, not capped at a sixteenth of the burst).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_with_a_small_burst_is_leased_with_thirty_times_fewer_calls() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(
        Algorithm::TokenBucket,
        20_000,
        Duration::from_secs(60),
        Some(200),
    )
    .unwrap();
    let stores = instances(&server, &clock, 4, LeasePlan::auto(), &events).await;
    let calls_before = script_calls(&server);
    // 2 requests every 3 ms: 40,000 a minute.
    let run = hammer(
        &clock,
        stores,
        policy,
        2,
        Duration::from_millis(3),
        40_000,
        |_, _| {},
    )
    .await;
    let calls = script_calls(&server) - calls_before;
    assert_within_the_bucket(&policy, &run);
    let from = START + 60 * SECOND;
    let admitted = admitted_between(&run.admitted, from, from + 60 * SECOND);
    eprintln!(
        "burst 200: {calls} store calls for {} requests ({:.1}x fewer), {admitted} admitted of 20,000 in the second minute",
        run.requests,
        run.requests as f64 / calls as f64
    );
    assert!(
        admitted * 100 >= 97 * 20_000,
        "{admitted} admitted of 20,000 in the second minute"
    );
    assert!(
        calls * 30 <= run.requests,
        "{calls} store calls for {} requests",
        run.requests
    );
}

/// Fixed batches, GCRA, and an instance that crashes holding a lease half-way: the
/// others go on, no window admits more than the bucket, and the crashed instance's
/// units are out of use for at most the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_crashing_with_a_lease_never_makes_the_others_over_admit() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(Algorithm::Gcra, 1_200, Duration::from_secs(60), Some(100)).unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(30),
        hold: Duration::from_secs(1),
    };
    let stores = instances(&server, &clock, 3, plan, &events).await;
    // 40 a second against 20 a second, for two minutes; one instance dies at 30 s.
    let run = hammer(
        &clock,
        stores,
        policy,
        2,
        Duration::from_millis(50),
        2_400,
        |s, running| {
            if s == 600 {
                // Dropped without giving anything back: a crash.
                running.remove(0);
            }
        },
    )
    .await;
    assert_within_the_bucket(&policy, &run);
    // From a hold after the crash on, the survivors get the whole refill again.
    let from = START + 32 * SECOND;
    let admitted = admitted_between(&run.admitted, from, from + 60 * SECOND);
    assert!(
        admitted * 100 >= 97 * 1_200,
        "{admitted} admitted in a minute of 1,200"
    );
}

/// A key offered far more than its limit: once a take is denied, the instance denies
/// here until the retry time, asking the store nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_are_answered_here_until_the_retry_time() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(10), None).unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(5),
        hold: Duration::from_secs(5),
    };
    let store = instances(&server, &clock, 1, plan, &events).await.remove(0);
    let check = |cost| {
        let store = store.clone();
        async move { store.check(hot("bo"), &policy, cost).await.unwrap() }
    };
    for _ in 0..10 {
        assert!(check(1).await.allowed);
    }
    let calls = script_calls(&server);
    let denied = check(1).await;
    assert!(!denied.allowed);
    // One unit refills every second: the store says so, and the instance holds it.
    assert_eq!(denied.retry_after, Some(Duration::from_secs(1)));
    for _ in 0..100 {
        let again = check(1).await;
        assert!(!again.allowed);
        assert_eq!(again.retry_after, Some(Duration::from_secs(1)));
    }
    assert_eq!(script_calls(&server), calls + 1, "one call for 101 denials");
    assert_eq!(events.denied.load(Ordering::Relaxed), 100);
    clock.advance(Duration::from_millis(999));
    assert!(!check(1).await.allowed);
    assert_eq!(script_calls(&server), calls + 1);
    // At the retry time the instance asks again, for at least half of what refills in
    // a quarter of the hold (one unit here) up to a batch.
    clock.advance(Duration::from_millis(1));
    assert!(check(1).await.allowed, "the unit refilled");
    assert_eq!(script_calls(&server), calls + 2);
    let starving = check(1).await;
    assert!(!starving.allowed);
    assert_eq!(starving.retry_after, Some(Duration::from_secs(1)));
    assert_eq!(script_calls(&server), calls + 3);
}

/// `lease: auto` on a lukewarm key (the seed's pro plan, 1,000 a minute, asked a few
/// times a second here): a lease once a batch would serve two requests, checked on
/// the store below. A lease spent to its last unit costs no call at its deadline: the
/// next take closes its record, or, with none before the record ends, it is forgotten;
/// a lease with a unit left costs the give-back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lukewarm_key_is_leased_and_a_spent_lease_costs_no_give_back() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(Algorithm::Gcra, 1_000, Duration::from_secs(60), None).unwrap();
    let inner = redis(&server, &clock).await;
    // Built outside the runtime: no loop of its own, the test gives back when it says.
    let store = {
        let (clock, events) = (clock.clone(), events.clone());
        std::thread::spawn(move || {
            let rules = [("hot".to_owned(), LeasePlan::auto(), 0)];
            LeasingStore::new(inner, rules, clock, events)
        })
        .join()
        .unwrap()
    };
    let calls = || script_calls(&server);
    let check = || {
        let store = store.clone();
        async move { store.check(hot("lu"), &policy, 1).await.unwrap() }
    };
    let at = |ms: u64| {
        let now = clock.now() - START;
        clock.advance(Duration::from_nanos(ms * 1_000_000 - now));
    };
    // The lease records in the key's hash (its other fields are counts and times).
    let records = || {
        let hash = server.cli(&["--scan", "--pattern", "*:leases"]);
        let hash = hash.trim();
        if hash.is_empty() {
            return 0;
        }
        server
            .cli(&["HKEYS", hash])
            .lines()
            .filter(|field| field.parse::<u64>().is_ok())
            .count()
    };
    let before = calls();
    // Once and twice in two seconds: 0.75 and 1.5 units expected in the 1.5 s a lease
    // is spent: checked on the store, no lease.
    at(0);
    assert!(check().await.allowed);
    at(400);
    assert!(check().await.allowed);
    assert_eq!(calls() - before, 2);
    assert_eq!(events.granted.load(Ordering::Relaxed), 0, "not leased yet");
    // A third: a lease of 2 units, one spent by this request, one by the next.
    at(800);
    assert!(check().await.allowed);
    assert_eq!(events.granted.load(Ordering::Relaxed), 1, "leased");
    at(1_200);
    assert!(check().await.allowed);
    assert_eq!(calls() - before, 3, "the fourth request spent the lease");
    // Past the deadline (800 ms + 1.5 s): nothing to give back, no call; kept until
    // the record ends (a quarter of the hold later), then forgotten, still no call.
    at(2_400);
    store.give_back_due().await;
    at(2_900);
    store.give_back_due().await;
    assert_eq!(calls() - before, 3, "a spent lease is not given back");
    assert_eq!(
        records(),
        1,
        "its record, ended, is left for the next take to drop"
    );
    // Quiet, then three requests: a lease with a unit left, which the deadline gives
    // back (one call, its unit returned).
    for ms in [5_000, 5_100, 5_200] {
        at(ms);
        assert!(check().await.allowed);
    }
    assert_eq!(calls() - before, 6);
    assert_eq!(events.granted.load(Ordering::Relaxed), 2);
    at(6_800);
    store.give_back_due().await;
    assert_eq!(calls() - before, 7, "a unit left: given back");
    assert_eq!(events.returned.load(Ordering::Relaxed), 1);
    assert_eq!(records(), 0);
    // Again, spent to its last unit, and a request after the deadline: its take closes
    // the spent lease's record in the same call.
    for ms in [10_000, 10_100, 10_200, 10_300] {
        at(ms);
        assert!(check().await.allowed);
    }
    assert_eq!(calls() - before, 10);
    at(11_800);
    store.give_back_due().await;
    assert_eq!(records(), 1);
    at(12_000);
    assert!(check().await.allowed);
    assert_eq!(calls() - before, 11, "one call: the request's own");
    assert_eq!(records(), 0, "closed by the take");
}

/// Requests costing more than the capacity (never granted) are no demand: after five of
/// them, a request of one unit is checked on the store, not leased in a batch sized by
/// units no one could have been given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_above_the_capacity_do_not_make_a_key_leased() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(1), None).unwrap();
    let store = instances(&server, &clock, 1, LeasePlan::auto(), &events)
        .await
        .remove(0);
    for _ in 0..5 {
        assert!(!store.check(hot("big"), &policy, 150).await.unwrap().allowed);
    }
    assert!(store.check(hot("big"), &policy, 1).await.unwrap().allowed);
    assert_eq!(events.granted.load(Ordering::Relaxed), 0, "not leased");
}

/// Callers of different plans can share a key: a lease taken under one policy is never
/// spent by a caller of another (a smaller custom limit), who checks on the store, where
/// the units out in the lease count against its capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_spent_only_under_the_policy_it_was_taken_under() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let big = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(3600), None).unwrap();
    let small = Policy::new(Algorithm::TokenBucket, 5, Duration::from_secs(3600), None).unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(50),
        hold: Duration::from_secs(60),
    };
    let store = instances(&server, &clock, 1, plan, &events).await.remove(0);
    assert!(store.check(hot("org"), &big, 1).await.unwrap().allowed);
    let mut small_admitted = 0;
    for _ in 0..40 {
        small_admitted += u64::from(store.check(hot("org"), &small, 1).await.unwrap().allowed);
    }
    assert!(
        small_admitted <= 5,
        "a 5-unit caller admitted {small_admitted}"
    );
    // The big caller's lease is intact: its 49 units are spent here.
    let calls = script_calls(&server);
    for _ in 0..49 {
        assert!(store.check(hot("org"), &big, 1).await.unwrap().allowed);
    }
    assert_eq!(script_calls(&server), calls);
}

/// Leases given back on release come back whole: another instance can take every
/// unit the first held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_leases_give_their_units_back() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(3600), None).unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(60),
        hold: Duration::from_secs(10),
    };
    let mut both = instances(&server, &clock, 2, plan, &events).await;
    let (a, b) = (both.remove(0), both.remove(0));
    assert!(a.check(hot("cy"), &policy, 1).await.unwrap().allowed);
    // `a` holds 59 units: `b` gets the other 40 and no more.
    let mut admitted = 0;
    while b.check(hot("cy"), &policy, 1).await.unwrap().allowed {
        admitted += 1;
    }
    assert_eq!(admitted, 40);
    a.release_all().await;
    assert_eq!(events.returned.load(Ordering::Relaxed), 59);
    // `b`'s denial is remembered: the next take comes at its retry time. Released,
    // the units are there at once for a direct check (another instance's first ask).
    let fresh = instances(&server, &clock, 1, plan, &events).await.remove(0);
    let mut admitted = 0;
    while fresh.check(hot("cy"), &policy, 1).await.unwrap().allowed {
        admitted += 1;
    }
    assert_eq!(admitted, 59);
    // Released, `a` checks on the store directly from now on and leases nothing.
    let granted = events.granted.load(Ordering::Relaxed);
    assert!(!a.check(hot("cy"), &policy, 1).await.unwrap().allowed);
    assert_eq!(events.granted.load(Ordering::Relaxed), granted);
}

/// A request allowed by its leased rule and denied by another gives its leased unit
/// back: the next request spends it, with no store call for the leased rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_denied_by_another_rule_gives_its_leased_units_back() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let leased = Policy::new(Algorithm::TokenBucket, 10, Duration::from_secs(3600), None).unwrap();
    let tight = Policy::new(Algorithm::FixedWindow, 1, Duration::from_secs(3600), None).unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(10),
        hold: Duration::from_secs(60),
    };
    let store = instances(&server, &clock, 1, plan, &events).await.remove(0);
    let checks = |who: &'static str| {
        [
            Check {
                key: hot("di"),
                policy: &leased,
                cost: 3,
            },
            Check {
                key: Key {
                    rule: "tight",
                    identity: who,
                },
                policy: &tight,
                cost: 1,
            },
        ]
    };
    let first = store.check_all(&checks("a")).await.unwrap();
    assert!(first.iter().all(|d| d.allowed));
    assert_eq!(first[0].remaining, 7);
    let denied = store.check_all(&checks("a")).await.unwrap();
    assert!(!denied[1].allowed);
    assert!(denied[0].allowed, "the leased rule would have allowed it");
    assert_eq!(denied[0].remaining, 7, "and reports its state unchanged");
    // The 7 units are all still held here: spent with no further take.
    let calls = script_calls(&server);
    for who in ["b", "c"] {
        assert!(store.check_all(&checks(who)).await.unwrap()[0].allowed);
    }
    assert_eq!(
        script_calls(&server) - calls,
        2,
        "one call each, for the rule not leased"
    );
    // 9 of the 10 units spent: the last one goes back with the next take, which is
    // denied for 3.
    let last = store.check_all(&checks("d")).await.unwrap();
    assert!(!last[0].allowed);
    assert_eq!(last[0].remaining, 1);
}

/// Redis stopped mid-lease: the units held are still spent until the lease's
/// deadline (they were granted), then the checks fail for the engine's failure
/// policy to decide; nothing is admitted beyond what was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_gone_the_units_held_are_spent_then_checks_fail() {
    let mut server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(START));
    let events = Arc::new(Counted::default());
    let policy = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(3600), None).unwrap();
    let plan = LeasePlan {
        batch: Batch::Fixed(10),
        hold: Duration::from_secs(4),
    };
    let store = instances(&server, &clock, 1, plan, &events).await.remove(0);
    assert!(store.check(hot("ed"), &policy, 1).await.unwrap().allowed);
    server.kill();
    for _ in 0..9 {
        assert!(store.check(hot("ed"), &policy, 1).await.unwrap().allowed);
    }
    assert!(
        store.check(hot("ed"), &policy, 1).await.is_err(),
        "nothing left: the take fails"
    );
    // Three quarters of the hold on, what a new lease would hold is not spent either.
    clock.advance(Duration::from_secs(3));
    assert!(store.check(hot("ed"), &policy, 1).await.is_err());
}
