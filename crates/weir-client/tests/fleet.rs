//! End to end against weir's real gateway (in process, on loopback, the system clock):
//! a fleet of workers gets the same work done with weir-client as with naive
//! immediate retries, sending a small fraction of the 429s: in no more time when the
//! workers share one client, in more (bounded here) with a client each. The
//! measuring command, with larger runs, is `examples/fleet.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::time::Duration;

use common::fleet::{self, Limit, Mode, Outcome};

const WORKERS: u64 = 20;
const JOBS: u64 = 5;
/// Bounds on a run: requests and time.
const MAX_ATTEMPTS: u64 = 500_000;
const DEADLINE: Duration = Duration::from_secs(60);

/// One fleet at a time: each run's timing assumes the machine is not also running
/// another storm.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run(mode: Mode, redis: Option<&str>) -> Outcome {
    // 20 a second in bursts of 5: 100 jobs take at least (100 - 5) / 20 = 4.75 s.
    let limit = Limit {
        per_second: 20,
        burst: 5,
    };
    let gateway = fleet::start_gateway(&limit, redis).await;
    let outcome = fleet::run(&gateway, mode, WORKERS, JOBS, MAX_ATTEMPTS, DEADLINE).await;
    eprintln!("{mode:?}: {outcome:?}");
    assert_eq!(
        outcome.done,
        WORKERS * JOBS,
        "{mode:?} did not finish: {outcome:?}"
    );
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_with_weir_client_sends_a_fraction_of_the_429s() {
    let _serial = SERIAL.lock().await;
    let naive = run(Mode::Naive, None).await;
    let shared = run(Mode::SharedClient, None).await;
    let each = run(Mode::ClientPerWorker, None).await;

    // The limit sets the pace for everyone: nobody finishes much before 4.75 s (on
    // the memory store; on Redis, a timed-out check's fallback may admit a few more).
    for outcome in [naive, shared, each] {
        assert!(
            outcome.elapsed >= Duration::from_millis(4500),
            "{outcome:?}"
        );
    }
    // Every request reached the gateway and was answered 200 or 429.
    for outcome in [naive, shared, each] {
        assert_eq!(
            outcome.attempts,
            outcome.done + outcome.refused,
            "{outcome:?}"
        );
    }
    // The storm: tens of refusals for each job even in a debug build on a busy
    // machine (hundreds to thousands in a release build: see the guide, simulate.md).
    assert!(naive.refused > 10 * WORKERS * JOBS, "{naive:?}");
    // One client shared by the fleet paces it at the quota's rate once it runs low:
    // a few 429s in all, and the limit's own time.
    assert!(shared.refused <= WORKERS * JOBS / 2, "{shared:?}");
    assert!(
        shared.refused * 20 <= naive.refused,
        "{shared:?} against {naive:?}"
    );
    assert!(
        shared.elapsed <= naive.elapsed.mul_f64(1.15) + Duration::from_millis(500),
        "shared {shared:?} against naive {naive:?}"
    );
    // A client per worker: each waits out weir's Retry-After-Ms (the millisecond wait)
    // plus jitter, alone. Independent clients collide on the few units freed each
    // 50 ms, so more refusals than one shared client, still a small fraction of the
    // storm's, and the limit's own time give or take the jitter (see the guide, simulate.md).
    eprintln!("naive {naive:?}\nshared {shared:?}\neach {each:?}");
    assert!(
        each.refused * 5 <= naive.refused,
        "{each:?} against {naive:?}"
    );
    assert!(each.refused <= 12 * WORKERS * JOBS, "{each:?}");
    assert!(
        each.elapsed <= naive.elapsed.mul_f64(1.3) + Duration::from_millis(500),
        "{each:?} against {naive:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_the_storm_is_paid_for_in_scripts_and_weir_client_spares_them() {
    let _serial = SERIAL.lock().await;
    let redis = weir_testkit::RedisServer::start();
    // weir decides each request by one call: FCALL on Redis 7, else EVALSHA.
    let checks = || redis.calls("fcall") + redis.calls("evalsha") + redis.calls("eval");
    let before = checks();
    let naive = run(Mode::Naive, Some(&redis.url())).await;
    let naive_checks = checks() - before;
    let before = checks();
    let shared = run(Mode::SharedClient, Some(&redis.url())).await;
    let shared_checks = checks() - before;
    eprintln!("Redis checks: naive {naive_checks}, shared {shared_checks}");
    // Every request the gateway answered was decided on Redis.
    assert!(
        naive_checks >= naive.attempts,
        "{naive_checks} checks, {naive:?}"
    );
    assert!(
        shared_checks >= shared.attempts,
        "{shared_checks} checks, {shared:?}"
    );
    assert!(
        shared_checks * 20 <= naive_checks,
        "{shared_checks} against {naive_checks}"
    );
}
