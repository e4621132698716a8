//! Token leases (`take`, `give_back`): over random runs of instances taking, spending,
//! renewing, giving back and crashing, with direct checks and time passing, a lease
//! never makes a key admit more than the plain bucket would.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::time::Duration;

use proptest::prelude::*;
use weir_core::{
    Algorithm, Closing, LeaseError, LeaseId, Leases, Policy, State, Take, check, give_back,
    leasable, take,
};

const START: u64 = 1_796_032_800_000_000_000;
const INSTANCES: usize = 3;

/// A lease as its holder knows it.
#[derive(Debug, Clone, Copy)]
struct Held {
    id: LeaseId,
    unspent: u64,
    expires: u64,
}

/// One step of a run; the numbers are read per kind (see `Run::step`).
#[derive(Debug, Clone, Copy)]
enum Op {
    Take {
        who: usize,
        min: u64,
        max: u64,
        hold: u64,
    },
    Spend {
        who: usize,
        units: u64,
    },
    GiveBack {
        who: usize,
    },
    Crash {
        who: usize,
    },
    Check {
        cost: u64,
    },
    Unknown {
        id: u64,
    },
    Wait {
        gap: u64,
    },
    Back {
        gap: u64,
    },
}

fn policies() -> impl Strategy<Value = Policy> {
    (
        proptest::sample::select(&[Algorithm::TokenBucket, Algorithm::Gcra][..]),
        1u64..=20,
        prop_oneof![Just(1_000u64), Just(7_000), Just(60_000), 1u64..100_000],
        proptest::option::of(1u64..=30),
    )
        .prop_map(|(algorithm, limit, period_ms, burst)| {
            Policy::new(algorithm, limit, Duration::from_millis(period_ms), burst).unwrap()
        })
}

fn ops(policy: &Policy) -> impl Strategy<Value = Vec<Op>> + use<> {
    let period = policy.period_ns();
    let capacity = policy.capacity();
    let who = 0..INSTANCES;
    let hold = prop_oneof![2 => Just(0u64), 3 => 1..period / 2 + 2, 2 => 1..3 * period];
    let op = prop_oneof![
        4 => (who.clone(), 0..=capacity + 1, 0..=capacity + 1, hold)
            .prop_map(|(who, min, max, hold)| Op::Take { who, min, max, hold }),
        5 => (who.clone(), 1..=capacity).prop_map(|(who, units)| Op::Spend { who, units }),
        2 => who.clone().prop_map(|who| Op::GiveBack { who }),
        1 => who.prop_map(|who| Op::Crash { who }),
        2 => (0..=capacity + 1).prop_map(|cost| Op::Check { cost }),
        1 => any::<u64>().prop_map(|id| Op::Unknown { id }),
        5 => prop_oneof![Just(0u64), 0..period / 4 + 1, 0..2 * period]
            .prop_map(|gap| Op::Wait { gap }),
        1 => (0..period / 2 + 1).prop_map(|gap| Op::Back { gap }),
    ];
    proptest::collection::vec(op, 1..150)
}

/// Units a key has available under its leases' cap at `now`: a peek, changing nothing.
fn available(policy: &Policy, state: &Option<State>, leases: &Leases, now: u64) -> u64 {
    let (mut state, mut leases) = (state.clone(), leases.clone());
    let grant = take(policy, &mut state, &mut leases, now, &Take::check(0)).unwrap();
    assert!(grant.units == 0 && grant.lease.is_none());
    grant.decision.remaining
}

/// A run: the leased key, the instances' leases, and the plain bucket that decides
/// every spent unit at the instant it is spent.
struct Run {
    policy: Policy,
    now: u64,
    state: Option<State>,
    leases: Leases,
    held: [Option<Held>; INSTANCES],
    plain: Option<State>,
    /// Units spent, and when (the latest time seen then).
    spent: Vec<(u64, u64)>,
    /// The latest time any step ran at: a holder stops spending once the time has
    /// reached its lease's expiry, even if the clock then steps back (the store may
    /// have dropped the record then).
    seen: u64,
    /// Whether the clock has stepped back. The plain bucket is then no measure: a
    /// state found full forgets the time it saw (weir-core's `check`), so it refills
    /// again from an earlier instant, and the key's state brought forward to a later
    /// instant by a lease does not; what still holds then is the cap (`invariants`)
    /// and the give-backs' answers.
    stepped_back: bool,
}

impl Run {
    fn new(policy: Policy) -> Self {
        Self {
            policy,
            now: START,
            state: None,
            leases: Leases::default(),
            held: [None; INSTANCES],
            plain: None,
            spent: Vec::new(),
            seen: START,
            stepped_back: false,
        }
    }

    /// Spends `units` now: the plain bucket must admit them (on a clock that has only
    /// moved forward: see `stepped_back`).
    fn spend(&mut self, units: u64) -> Result<(), TestCaseError> {
        let plain = check(&self.policy, &mut self.plain, self.now, units);
        prop_assert!(
            plain.allowed || self.stepped_back,
            "the plain bucket denies {} units spent",
            units
        );
        self.spent.push((self.now, units));
        Ok(())
    }

    fn available(&self) -> u64 {
        available(&self.policy, &self.state, &self.leases, self.now)
    }

    /// A lease is found while no step has reached its expiry, and never at or after it.
    fn found_as_expected(&self, found: bool, h: &Held) -> Result<(), TestCaseError> {
        if self.seen < h.expires {
            prop_assert!(found, "{:?} not found before it expires", h);
        }
        if self.now >= h.expires {
            prop_assert!(!found, "{:?} found after it expired", h);
        }
        Ok(())
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        self.seen = self.seen.max(self.now);
        let (policy, now) = (self.policy, self.now);
        match op {
            Op::Take {
                who,
                min,
                max,
                hold,
            } => {
                let before = self.held[who].take();
                let closing = before.map(|h| Closing {
                    lease: h.id,
                    unspent: h.unspent,
                });
                let asked = Take {
                    min,
                    max,
                    hold: Duration::from_nanos(hold),
                    closing,
                };
                let available_after_closing = {
                    let (mut state, mut leases) = (self.state.clone(), self.leases.clone());
                    if let Some(c) = closing {
                        give_back(&policy, &mut state, &mut leases, now, c.lease, c.unspent)
                            .unwrap();
                    }
                    available(&policy, &state, &leases, now)
                };
                let grant = take(&policy, &mut self.state, &mut self.leases, now, &asked).unwrap();
                if let Some(h) = before {
                    self.found_as_expected(grant.closed, &h)?;
                }
                let granted = min <= available_after_closing && min <= policy.capacity();
                // A grant of 0 units reports what a peek reports: on a clock stepped far
                // behind a GCRA state, a denial.
                if !granted || grant.units > 0 || !self.stepped_back {
                    prop_assert_eq!(grant.decision.allowed, granted);
                }
                if granted {
                    prop_assert!(min <= grant.units && grant.units <= max.max(min));
                    prop_assert!(grant.units <= available_after_closing);
                    prop_assert!(
                        grant.units == max.max(min) || grant.units == available_after_closing
                    );
                } else {
                    prop_assert_eq!(grant.units, 0);
                    prop_assert_eq!(
                        grant.decision.retry_after.is_some(),
                        min <= policy.capacity()
                    );
                    if let Some(retry) = grant.decision.retry_after {
                        // Exact: granted at the retry time if nothing else happens, not
                        // a nanosecond before.
                        let at = now + u64::try_from(retry.as_nanos()).unwrap();
                        let grants_at = |at| {
                            let (mut s, mut l) = (self.state.clone(), self.leases.clone());
                            let ask = Take {
                                closing: None,
                                ..asked
                            };
                            take(&policy, &mut s, &mut l, at, &ask)
                                .unwrap()
                                .decision
                                .allowed
                        };
                        prop_assert!(grants_at(at), "not granted after {:?}", retry);
                        if hold == 0 {
                            prop_assert!(
                                retry.is_zero() || !grants_at(at - 1),
                                "{:?} is late",
                                retry
                            );
                        } else {
                            // A leasing take's turn: no sooner than its units are there
                            // (the exact time, as a check's, rounded up to whole µs),
                            // no later than that or the bucket's refill from empty.
                            let (mut s, mut l) = (self.state.clone(), self.leases.clone());
                            let check = Take {
                                closing: None,
                                hold: Duration::ZERO,
                                ..asked
                            };
                            let exact = take(&policy, &mut s, &mut l, now, &check)
                                .unwrap()
                                .decision
                                .retry_after
                                .unwrap();
                            let micro = Duration::from_micros(1);
                            let full = policy
                                .period()
                                .mul_f64(policy.capacity() as f64 / policy.limit() as f64)
                                .min(Duration::from_nanos(hold) / 4);
                            prop_assert!(exact <= retry, "{:?} before {:?}", retry, exact);
                            prop_assert!(
                                retry <= exact.max(full) + micro,
                                "{:?} after {:?} and {:?}",
                                retry,
                                exact,
                                full
                            );
                        }
                    }
                }
                prop_assert_eq!(grant.lease.is_some(), hold > 0 && grant.units > 0);
                match grant.lease {
                    Some(id) => {
                        self.held[who] = Some(Held {
                            id,
                            unspent: grant.units,
                            expires: now + hold,
                        })
                    }
                    None => self.spend(grant.units)?,
                }
            }
            Op::Spend { who, units } => {
                if let Some(h) = &mut self.held[who]
                    && self.seen < h.expires
                {
                    let units = units.min(h.unspent);
                    h.unspent -= units;
                    self.spend(units)?;
                }
            }
            Op::GiveBack { who } => {
                if let Some(h) = self.held[who].take() {
                    let (state, leases) = (self.state.clone(), self.leases.clone());
                    let before = check(&policy, &mut self.state.clone(), now, 0);
                    let found = give_back(
                        &policy,
                        &mut self.state,
                        &mut self.leases,
                        now,
                        h.id,
                        h.unspent,
                    )
                    .unwrap();
                    self.found_as_expected(found, &h)?;
                    if !found {
                        // Late: nothing changes, nothing is counted twice.
                        prop_assert_eq!(&self.state, &state);
                        prop_assert_eq!(self.leases.outstanding(now), leases.outstanding(now));
                        prop_assert_eq!(check(&policy, &mut self.state.clone(), now, 0), before);
                    }
                }
            }
            Op::Crash { who } => self.held[who] = None,
            Op::Check { cost } => {
                let grant = take(
                    &policy,
                    &mut self.state,
                    &mut self.leases,
                    now,
                    &Take::check(cost),
                )
                .unwrap();
                prop_assert!(grant.lease.is_none());
                if grant.decision.allowed {
                    prop_assert_eq!(grant.units, cost);
                    self.spend(cost)?;
                }
            }
            Op::Unknown { id } => {
                let known = self.held.iter().flatten().any(|h| h.id.0 == id);
                let (state, outstanding) = (self.state.clone(), self.leases.outstanding(now));
                let found = give_back(
                    &policy,
                    &mut self.state,
                    &mut self.leases,
                    now,
                    LeaseId(id),
                    1,
                )
                .unwrap();
                if !known {
                    prop_assert!(!found);
                    prop_assert_eq!(&self.state, &state);
                    prop_assert_eq!(self.leases.outstanding(now), outstanding);
                } else if found {
                    // A random id that names a held lease: that lease is gone now.
                    for h in &mut self.held {
                        if h.is_some_and(|h| h.id.0 == id) {
                            *h = None;
                        }
                    }
                }
            }
            Op::Wait { gap } => self.now += gap,
            Op::Back { gap } => {
                self.now -= gap;
                self.stepped_back |= gap > 0;
            }
        }
        self.seen = self.seen.max(self.now);
        self.invariants()
    }

    fn invariants(&self) -> Result<(), TestCaseError> {
        let capacity = self.policy.capacity();
        let available = self.available();
        let outstanding = self.leases.outstanding(self.now);
        prop_assert!(
            available + outstanding <= capacity,
            "{} available + {} leased > capacity {}",
            available,
            outstanding,
            capacity
        );
        // The key's tokens plus what holders may still spend never exceed the plain
        // bucket's tokens: so every unit spent, the plain bucket admits.
        let unspent: u64 = self
            .held
            .iter()
            .flatten()
            .filter(|h| self.seen < h.expires)
            .map(|h| h.unspent)
            .sum();
        let plain = check(&self.policy, &mut self.plain.clone(), self.now, 0).remaining;
        prop_assert!(
            available + unspent <= plain || self.stepped_back,
            "{} available + {} unspent > {} in the plain bucket",
            available,
            unspent,
            plain
        );
        Ok(())
    }

    /// Units spent in every window of time stay within the bucket's bound: its
    /// capacity plus the window's refill.
    fn windows(&self) -> Result<(), TestCaseError> {
        let p = &self.policy;
        for (i, &(from, _)) in self.spent.iter().enumerate() {
            let mut total = 0u128;
            for &(at, units) in &self.spent[i..] {
                total += u128::from(units);
                let refill =
                    u128::from(at - from) * u128::from(p.limit()) / u128::from(p.period_ns());
                prop_assert!(total <= u128::from(p.capacity()) + refill);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn leases_never_admit_more_than_the_plain_bucket(
        (policy, ops) in policies().prop_flat_map(|p| (Just(p), ops(&p)))
    ) {
        let mut run = Run::new(policy);
        for op in &ops {
            run.step(*op)?;
        }
        if !run.stepped_back {
            run.windows()?;
        }
    }

    /// With no lease out, a check through `take` is exactly `check`, state included,
    /// even on a clock that steps back.
    #[test]
    fn a_take_without_leases_is_a_check(
        policy in policies(),
        steps in proptest::collection::vec((-2_000_000_000i64..2_000_000_000, 0u64..35), 1..80),
    ) {
        let (mut plain, mut leased, mut leases) = (None, None, Leases::default());
        let mut now = START;
        for (gap, cost) in steps {
            now = now.saturating_add_signed(gap);
            let expected = check(&policy, &mut plain, now, cost);
            let grant = take(&policy, &mut leased, &mut leases, now, &Take::check(cost)).unwrap();
            prop_assert_eq!(grant.decision, expected);
            prop_assert_eq!(grant.units, if expected.allowed { cost } else { 0 });
            prop_assert_eq!(&leased, &plain);
            prop_assert!(leases.is_empty());
        }
    }
}

const SEC: u64 = 1_000_000_000;

fn ten_a_second(algorithm: Algorithm) -> Policy {
    Policy::new(algorithm, 10, Duration::from_secs(1), None).unwrap()
}

fn lease(min: u64, max: u64, hold_s: u64) -> Take {
    Take {
        min,
        max,
        hold: Duration::from_secs(hold_s),
        closing: None,
    }
}

#[test]
fn the_bucket_does_not_refill_under_a_lease() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let p = ten_a_second(algorithm);
        let (mut state, mut leases) = (None, Leases::default());
        let grant = take(&p, &mut state, &mut leases, START, &lease(1, 6, 10)).unwrap();
        assert_eq!(
            (grant.units, grant.decision.remaining),
            (6, 4),
            "{algorithm}"
        );
        // Two seconds would refill everything; the six leased units stay out.
        let later = START + 2 * SEC;
        let denied = take(&p, &mut state, &mut leases, later, &Take::check(5)).unwrap();
        assert!(!denied.decision.allowed, "{algorithm}");
        assert_eq!(denied.decision.remaining, 4, "{algorithm}");
        // Five units fit once the lease expires (10 s) and one more unit has refilled
        // (100 ms): the refill alone would have taken 100 ms from now.
        assert_eq!(
            denied.decision.retry_after,
            Some(Duration::from_millis(8_100)),
            "{algorithm}"
        );
        // Given back with two unspent: four spent, so six are available; the refill
        // under the lease does not come back, it starts now.
        let found = give_back(&p, &mut state, &mut leases, later, grant.lease.unwrap(), 2).unwrap();
        assert!(found, "{algorithm}");
        let peek = |state: &mut _, leases: &mut _, at| {
            take(&p, state, leases, at, &Take::check(0))
                .unwrap()
                .decision
                .remaining
        };
        assert_eq!(peek(&mut state, &mut leases, later), 6, "{algorithm}");
        let refilled = later + 400_000_000;
        assert_eq!(peek(&mut state, &mut leases, refilled), 10, "{algorithm}");
    }
}

#[test]
fn an_expired_lease_counts_as_spent_and_a_late_give_back_is_ignored() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let p = ten_a_second(algorithm);
        let (mut state, mut leases) = (None, Leases::default());
        let grant = take(&p, &mut state, &mut leases, START, &lease(10, 10, 1)).unwrap();
        assert_eq!(grant.units, 10);
        // The holder crashed; at 1 s its lease expires, its units count as spent, and
        // the bucket refills from then on.
        let at = START + SEC;
        assert_eq!(leases.outstanding(at), 0);
        let empty = take(&p, &mut state, &mut leases, at, &Take::check(1)).unwrap();
        assert!(!empty.decision.allowed, "{algorithm}");
        assert_eq!(empty.decision.retry_after, Some(Duration::from_millis(100)));
        let at = START + 2 * SEC;
        let full = take(&p, &mut state, &mut leases, at, &Take::check(10)).unwrap();
        assert!(full.decision.allowed, "{algorithm}: a second refilled ten");
        let (before, outstanding) = (state.clone(), leases.outstanding(at));
        let late = give_back(&p, &mut state, &mut leases, at, grant.lease.unwrap(), 10).unwrap();
        assert!(!late, "{algorithm}");
        assert_eq!((state, leases.outstanding(at)), (before, outstanding));
    }
}

#[test]
fn a_renewal_gives_back_then_takes_in_one_step() {
    let p = ten_a_second(Algorithm::Gcra);
    let (mut state, mut leases) = (None, Leases::default());
    let first = take(&p, &mut state, &mut leases, START, &lease(1, 10, 5)).unwrap();
    let renew = Take {
        closing: Some(Closing {
            lease: first.lease.unwrap(),
            unspent: 4,
        }),
        ..lease(1, 10, 5)
    };
    let second = take(&p, &mut state, &mut leases, START, &renew).unwrap();
    assert!(second.closed);
    assert_eq!(second.units, 4, "the four unspent units, taken again");
    assert_eq!(leases.len(), 1);
    assert_ne!(second.lease, first.lease);
}

#[test]
fn other_algorithms_are_refused_with_the_reason() {
    for algorithm in Algorithm::ALL {
        let p = ten_a_second(algorithm);
        let leasable_algorithm = matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra);
        assert_eq!(leasable(&p).is_ok(), leasable_algorithm);
        let (mut state, mut leases) = (None, Leases::default());
        let taken = take(&p, &mut state, &mut leases, START, &Take::check(1));
        if !leasable_algorithm {
            assert_eq!(taken, Err(LeaseError::NotLeasable(algorithm)));
            let reason = taken.unwrap_err().to_string();
            assert!(reason.contains("token_bucket and gcra"), "{reason}");
            assert_eq!(state, None);
        }
    }
}

/// With every record in use ([`MAX_LEASES`]), a take grants exactly its `min`, spent at
/// once: units beyond it could not be held with no record, and would be lost.
#[test]
fn with_no_room_for_a_record_a_take_grants_only_its_min() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let p = Policy::new(algorithm, 10_000, Duration::from_secs(1), None).unwrap();
        let (mut state, mut leases) = (None, Leases::default());
        for _ in 0..weir_core::MAX_LEASES {
            let grant = take(&p, &mut state, &mut leases, START, &lease(1, 10, 10)).unwrap();
            assert!(grant.lease.is_some(), "{algorithm}");
        }
        let full = take(&p, &mut state, &mut leases, START, &lease(3, 100, 10)).unwrap();
        assert_eq!((full.units, full.lease), (3, None), "{algorithm}");
        let left = 10_000 - 10 * weir_core::MAX_LEASES as u64 - 3;
        let peek = take(&p, &mut state, &mut leases, START, &Take::check(0)).unwrap();
        assert_eq!(
            peek.decision.remaining, left,
            "{algorithm}: nothing else taken"
        );
    }
}

/// Every grant reports the units leased on the key, by every holder, in the busier of
/// its second and the one before (issue 41: batches sized from it); direct checks and
/// denials count nothing.
#[test]
fn grants_report_the_keys_take_rate_over_two_seconds() {
    const SECOND: u64 = 1_000_000_000;
    let p = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(1), None).unwrap();
    let (mut state, mut leases) = (None, Leases::default());
    let mut at = |now: u64, take: Take| take_at(&p, &mut state, &mut leases, now, &take);
    assert_eq!(at(START, lease(1, 30, 1)), (30, 30), "one holder's 30");
    assert_eq!(
        at(START + 1, lease(1, 20, 1)),
        (20, 50),
        "another's 20, same second"
    );
    assert_eq!(
        at(START + 2, Take::check(5)),
        (5, 50),
        "a direct check counts nothing"
    );
    assert_eq!(
        at(START + SECOND, lease(1, 10, 1)),
        (10, 50),
        "the second before"
    );
    assert_eq!(
        at(START + 2 * SECOND, lease(1, 60, 1)),
        (60, 60),
        "a busier second"
    );
    assert_eq!(
        at(START + 2 * SECOND, lease(500, 500, 1)),
        (0, 60),
        "a denial"
    );
    assert_eq!(
        at(START + 4 * SECOND, lease(1, 1, 1)),
        (1, 1),
        "a quiet second forgets"
    );
}

/// Units granted and the take rate reported.
fn take_at(
    p: &Policy,
    state: &mut Option<State>,
    leases: &mut Leases,
    now: u64,
    t: &Take,
) -> (u64, u64) {
    let grant = take(p, state, leases, now, t).unwrap();
    (grant.units, grant.taken_rate)
}

/// Leasing takes denied while others wait are told to come back one after the other,
/// each a batch's refill after the last turn, never past the bucket's refill from
/// empty; a direct check's retry is its own; a turn past is forgotten.
#[test]
fn denied_leasing_takes_come_back_in_turns() {
    const MS: u64 = 1_000_000;
    // 100 a second: a unit every 10 ms; a burst of 40.
    let p = Policy::new(
        Algorithm::TokenBucket,
        100,
        Duration::from_secs(1),
        Some(40),
    )
    .unwrap();
    let (mut state, mut leases) = (None, Leases::default());
    let mut retry = |now: u64, take: Take| {
        let grant = take_any(&p, &mut state, &mut leases, now, &take);
        grant.decision.retry_after.map(|d| d.as_millis())
    };
    let batch = |min: u64| Take {
        hold: Duration::from_secs(2),
        ..lease(min, 10, 2)
    };
    assert_eq!(
        retry(START, Take::check(40)),
        None,
        "the whole burst, spent"
    );
    assert_eq!(
        retry(START, batch(10)),
        Some(100),
        "the first waits for its batch"
    );
    assert_eq!(
        retry(START, batch(10)),
        Some(200),
        "the next, a batch later"
    );
    assert_eq!(
        retry(START, Take::check(1)),
        Some(10),
        "a direct check: its own"
    );
    assert_eq!(retry(START, batch(10)), Some(300));
    assert_eq!(
        retry(START, batch(10)),
        Some(400),
        "the bucket full again from empty"
    );
    assert_eq!(retry(START, batch(10)), Some(400), "never later");
    assert_eq!(
        retry(START + 500 * MS, batch(45)),
        None,
        "more than the burst: no turn"
    );
    assert_eq!(
        retry(START + 401 * MS, batch(40)),
        None,
        "granted, turns past"
    );
}

fn take_any(
    p: &Policy,
    state: &mut Option<State>,
    leases: &mut Leases,
    now: u64,
    t: &Take,
) -> weir_core::Grant {
    take(p, state, leases, now, t).unwrap()
}
