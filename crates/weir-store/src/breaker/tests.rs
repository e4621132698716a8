//! The breaker's schedule on a manual clock: calls are futures polled by hand, held
//! at a gate in front of a fake store until the test decides their outcome.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;
use weir_core::{Decision, ManualClock, Policy};

use super::{Breaker, BreakerConfig};
use crate::{Check, Key, Store, StoreError, StoreFuture, StoreHealth};

/// 2026-12-01 00:00:00 UTC.
const START: u64 = 1_796_083_200_000_000_000;

/// A store whose calls wait until the test sets their outcome.
#[derive(Default)]
struct Gate {
    /// Calls that reached the store (past the breaker).
    reached: AtomicUsize,
    outcome: Mutex<Option<Result<(), StoreError>>>,
}

struct Held<'a> {
    gate: &'a Gate,
    counted: bool,
}

impl Future for Held<'_> {
    type Output = Result<(), StoreError>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.counted {
            self.counted = true;
            self.gate.reached.fetch_add(1, Ordering::SeqCst);
        }
        match &*self.gate.outcome.lock() {
            Some(outcome) => Poll::Ready(outcome.clone()),
            None => Poll::Pending,
        }
    }
}

fn unused<'a, T: 'a>() -> StoreFuture<'a, T> {
    Box::pin(async { Err(StoreError::Protocol("not used by these tests".into())) })
}

impl Store for Gate {
    fn check<'a>(&'a self, _: Key<'a>, _: &'a Policy, _: u64) -> StoreFuture<'a, Decision> {
        unused()
    }
    fn check_all<'a>(&'a self, _: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        unused()
    }
    fn preview_all<'a>(&'a self, _: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        unused()
    }
    fn refund_all<'a>(&'a self, _: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        unused()
    }
    fn reset<'a>(&'a self, _: Key<'a>, _: &'a Policy) -> StoreFuture<'a, ()> {
        Box::pin(Held {
            gate: self,
            counted: false,
        })
    }
}

struct Rig {
    clock: Arc<ManualClock>,
    gate: Arc<Gate>,
    breaker: Breaker<Arc<Gate>>,
}

const KEY: Key<'static> = Key {
    rule: "r",
    identity: "i",
};

/// The policy of the calls the rig makes (the gate decides nothing).
static POLICY: LazyLock<Policy> = LazyLock::new(|| {
    Policy::new(weir_core::Algorithm::Gcra, 1, Duration::from_secs(1), None).unwrap()
});

impl Rig {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(START));
        let gate = Arc::new(Gate::default());
        let breaker = Breaker::with_clock(gate.clone(), BreakerConfig::default(), clock.clone());
        Self {
            clock,
            gate,
            breaker,
        }
    }

    /// Another breaker on the rig's store and clock, following a health loop (which
    /// starts with the store up).
    fn following_health(&self) -> (Breaker<Arc<Gate>>, Arc<StoreHealth>) {
        let health = Arc::new(StoreHealth::new(true));
        let breaker = Breaker::with_clock(
            self.gate.clone(),
            BreakerConfig::default(),
            self.clock.clone(),
        )
        .following(health.clone());
        (breaker, health)
    }

    /// `callers` calls at once: how many reached the store (they stay in flight) and
    /// how many the breaker refused.
    fn attempt(&self, callers: usize) -> (Vec<StoreFuture<'_, ()>>, usize) {
        let before = self.gate.reached.load(Ordering::SeqCst);
        let mut in_flight = Vec::new();
        let mut refused = 0;
        for _ in 0..callers {
            let mut call = self.breaker.reset(KEY, &POLICY);
            match poll(&mut call) {
                Poll::Pending => in_flight.push(call),
                Poll::Ready(Err(StoreError::Unavailable(m))) if m == "circuit open" => refused += 1,
                Poll::Ready(other) => panic!("a held call finished: {other:?}"),
            }
        }
        assert_eq!(
            self.gate.reached.load(Ordering::SeqCst) - before,
            in_flight.len()
        );
        (in_flight, refused)
    }

    /// Finishes the calls in flight with `outcome`.
    fn settle(&self, in_flight: Vec<StoreFuture<'_, ()>>, outcome: Result<(), StoreError>) {
        *self.gate.outcome.lock() = Some(outcome);
        for mut call in in_flight {
            assert!(poll(&mut call).is_ready());
        }
        *self.gate.outcome.lock() = None;
    }

    fn now(&self) -> u64 {
        use weir_core::Clock;
        self.clock.now()
    }
}

fn poll<T>(call: &mut StoreFuture<'_, T>) -> Poll<Result<T, StoreError>> {
    call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

fn lost() -> Result<(), StoreError> {
    Err(StoreError::Unavailable("connection refused".into()))
}

/// Opens the breaker with `callers` at a time failing, then follows its probes: each
/// pause starts at the failure before it and lasts the base pause doubled per failed
/// probe (capped), plus at most a quarter; exactly one of the callers is let through
/// each time; the last probe succeeds and closes it.
fn probe_schedule(callers: usize) {
    let rig = Rig::new();
    let mut rounds = 0;
    while rig.breaker.is_closed() {
        let (in_flight, refused) = rig.attempt(callers);
        assert_eq!((in_flight.len(), refused), (callers, 0), "closed: all pass");
        rig.settle(in_flight, lost());
        rounds += 1;
    }
    assert_eq!(rounds, 3usize.div_ceil(callers), "3 failures open it, once");
    let mut failed_at = rig.now();
    let expected_ms = [200u64, 400, 800, 1600, 3200, 5000, 5000];
    for (n, &expected) in expected_ms.iter().enumerate() {
        let probe = loop {
            rig.clock.advance(Duration::from_millis(1));
            let (in_flight, refused) = rig.attempt(callers);
            if in_flight.is_empty() {
                assert_eq!(refused, callers);
                continue;
            }
            assert_eq!(
                in_flight.len(),
                1,
                "half-open lets exactly one probe through"
            );
            break in_flight;
        };
        let pause_ms = (rig.now() - failed_at) / 1_000_000;
        assert!(
            (expected..=expected + expected / 4 + 1).contains(&pause_ms),
            "{callers} callers, probe {n}: a pause of {pause_ms} ms, expected {expected} ms + at most 25%"
        );
        // While the probe is out, everyone else is refused.
        let (others, refused) = rig.attempt(callers);
        assert_eq!((others.len(), refused), (0, callers));
        if n + 1 < expected_ms.len() {
            rig.settle(probe, lost());
            failed_at = rig.now();
            assert!(!rig.breaker.is_closed());
        } else {
            rig.settle(probe, Ok(()));
        }
    }
    assert!(rig.breaker.is_closed(), "a probe that succeeds closes it");
    let (in_flight, refused) = rig.attempt(callers);
    assert_eq!((in_flight.len(), refused), (callers, 0));
    rig.settle(in_flight, Ok(()));
}

#[test]
fn one_caller_probes_on_schedule() {
    probe_schedule(1);
}

#[test]
fn eight_concurrent_callers_open_it_once_and_probe_on_schedule() {
    probe_schedule(8);
}

#[test]
fn sixty_four_concurrent_callers_open_it_once_and_probe_on_schedule() {
    probe_schedule(64);
}

#[test]
fn failures_of_calls_in_flight_when_it_opened_do_not_lengthen_the_pause() {
    let rig = Rig::new();
    let (early, _) = rig.attempt(64);
    let (opening, _) = rig.attempt(3);
    rig.settle(opening, lost());
    assert!(!rig.breaker.is_closed());
    let opened_at = rig.now();
    // The 64 calls of before come back failed long after: no longer pause.
    rig.clock.advance(Duration::from_millis(100));
    rig.settle(early, lost());
    rig.clock.advance(Duration::from_millis(151));
    let (probe, _) = rig.attempt(8);
    assert_eq!(probe.len(), 1, "probed 251 ms after opening");
    assert!(rig.now() - opened_at <= 251_000_000);
    rig.settle(probe, Ok(()));
}

#[test]
fn a_success_of_a_call_admitted_before_the_opening_closes_it() {
    let rig = Rig::new();
    let (slow, _) = rig.attempt(1);
    let (opening, _) = rig.attempt(3);
    rig.settle(opening, lost());
    assert!(!rig.breaker.is_closed());
    rig.settle(slow, Ok(()));
    assert!(rig.breaker.is_closed(), "the store answered");
}

#[test]
fn a_probe_dropped_unfinished_lets_the_next_call_probe() {
    let rig = Rig::new();
    let (opening, _) = rig.attempt(3);
    rig.settle(opening, lost());
    rig.clock.advance(Duration::from_millis(300));
    let (probe, _) = rig.attempt(1);
    assert_eq!(probe.len(), 1);
    drop(probe);
    let (probe, _) = rig.attempt(4);
    assert_eq!(probe.len(), 1, "a new probe, at once");
    rig.settle(probe, Ok(()));
    assert!(rig.breaker.is_closed());
}

#[test]
fn a_probe_that_fails_for_another_reason_neither_closes_nor_lengthens() {
    let rig = Rig::new();
    let (opening, _) = rig.attempt(3);
    rig.settle(opening, lost());
    rig.clock.advance(Duration::from_millis(300));
    let (probe, _) = rig.attempt(1);
    rig.settle(probe, Err(StoreError::Protocol("a bug".into())));
    assert!(!rig.breaker.is_closed());
    let (probe, _) = rig.attempt(1);
    assert_eq!(probe.len(), 1, "probed again at once");
    rig.settle(probe, Ok(()));
}

#[test]
fn pauses_grow_with_jitter_within_bounds() {
    let rig = Rig::new();
    for failed_probes in 0..8u32 {
        let base = (200u64 << failed_probes).min(5000);
        let pauses: Vec<u128> = (0..2000)
            .map(|_| rig.breaker.pause(failed_probes).as_micros())
            .collect();
        let (least, most) = (*pauses.iter().min().unwrap(), *pauses.iter().max().unwrap());
        let base = u128::from(base) * 1000;
        assert!(
            least >= base && most <= base + base / 4,
            "{least}..{most} for {base}"
        );
        // Spread over the whole quarter, not stuck at one value.
        assert!(least < base + base / 40 && most > base + base / 4 - base / 40);
    }
}

#[test]
fn following_the_health_loop_opens_and_closes_with_it() {
    let rig = Rig::new();
    let (breaker, health) = rig.following_health();
    assert!(breaker.is_ready());

    // The loop finds the store lost, with no traffic: not ready, and the next call is
    // refused without waiting for three failures.
    health.record(&lost().map(|()| Vec::new()));
    assert!(!breaker.is_ready());
    let mut call = breaker.reset(KEY, &POLICY);
    assert!(matches!(poll(&mut call), Poll::Ready(Err(_))));
    assert_eq!(rig.gate.reached.load(Ordering::SeqCst), 0);
    assert!(!breaker.is_closed());

    // Back: ready at once, and the next call goes to the store, long before the pause
    // would have ended.
    health.record(&Ok(Vec::new()));
    assert!(breaker.is_ready());
    let mut call = breaker.reset(KEY, &POLICY);
    assert!(poll(&mut call).is_pending());
    assert_eq!(rig.gate.reached.load(Ordering::SeqCst), 1);
    assert!(breaker.is_closed());
    *rig.gate.outcome.lock() = Some(Ok(()));
    assert!(poll(&mut call).is_ready());
}

#[test]
fn a_store_that_answers_but_too_slowly_is_probed_without_growing_pauses() {
    let rig = Rig::new();
    let (breaker, health) = rig.following_health();
    for failed_probes in 0..8u32 {
        let pause = breaker.pause(failed_probes).as_millis();
        assert!(
            (200..=250).contains(&pause),
            "{pause} ms after {failed_probes} failed probes"
        );
    }
    // Lost for the health loop: the pauses grow again.
    health.record(&lost().map(|()| Vec::new()));
    assert!(breaker.pause(4).as_millis() >= 3200);
}

#[test]
fn a_seeded_jitter_replays_its_pauses() {
    let rig = Rig::new();
    let seeded = |seed| {
        let breaker = Breaker::with_clock(
            rig.gate.clone(),
            BreakerConfig::default(),
            rig.clock.clone(),
        )
        .with_jitter_seed(seed);
        (0..50).map(|i| breaker.pause(i % 4)).collect::<Vec<_>>()
    };
    assert_eq!(seeded(7), seeded(7));
    assert_ne!(seeded(7), seeded(8));
}
