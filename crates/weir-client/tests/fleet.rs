//! End to end against weir's real gateway (in process, on loopback, the system clock):
//! a fleet of workers gets the same work done with weir-client as with naive
//! immediate retries, sending a small fraction of the 429s, in no more time. The
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

async fn run(mode: Mode) -> Outcome {
    // 20 a second in bursts of 5: 100 jobs take at least (100 - 5) / 20 = 4.75 s.
    let limit = Limit {
        per_second: 20,
        burst: 5,
    };
    let gateway = fleet::start_gateway(&limit).await;
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
async fn a_fleet_with_weir_client_sends_a_fraction_of_the_429s_in_no_more_time() {
    let naive = run(Mode::Naive).await;
    let shared = run(Mode::SharedClient).await;
    let each = run(Mode::ClientPerWorker).await;

    // The limit sets the pace for everyone: nobody finishes much before 4.75 s.
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
    // The storm: hundreds of refusals for each job.
    assert!(naive.refused > 20 * WORKERS * JOBS, "{naive:?}");
    // One client shared by the fleet paces it at the quota's rate once it runs low:
    // a few 429s in all, and the limit's own time.
    assert!(shared.refused <= WORKERS * JOBS / 2, "{shared:?}");
    assert!(
        shared.elapsed <= naive.elapsed.mul_f64(1.15) + Duration::from_millis(500),
        "shared {shared:?} against naive {naive:?}"
    );
    // A client per worker: each paces alone and waits out weir's whole-second
    // Retry-After, so the fleet refuses itself more often and takes longer (see the
    // README), but still sends a tiny fraction of the storm's requests.
    assert!(
        each.refused * 100 <= naive.refused,
        "{each:?} against {naive:?}"
    );
    assert!(each.refused <= 3 * WORKERS * JOBS, "{each:?}");
    assert!(
        each.elapsed <= naive.elapsed * 3,
        "{each:?} against {naive:?}"
    );
}
