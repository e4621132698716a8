//! The conformance suite: request sequences every store must decide alike.
//!
//! Stores are compared at microsecond resolution (Redis counts time in microseconds):
//! the sequences use whole-microsecond instants, and durations are compared rounded up
//! to whole microseconds.

use std::time::Duration;

use weir_core::{Algorithm, Calendar, Decision, Policy, State, Window, charge, check, refund};
use weir_store::{Check, Key, Store, StoreError};

/// One step of a sequence: microseconds after the previous one (negative: the clock
/// went backwards), a cost, and what is done with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Microseconds since the previous step.
    pub gap_us: i64,
    /// The request's cost.
    pub cost: u64,
    /// Checked, given back or charged.
    pub action: Action,
}

/// What a step does with its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Checked (consumed if allowed).
    Check,
    /// Given back (a reservation whose outcome does not count); the stores are then
    /// compared by a peek (cost 0) after it.
    Refund,
    /// Charged past the limit (a cost known after the answer); compared by a peek
    /// after it.
    Charge,
}

impl Step {
    /// The step's gap in microseconds for a store on the instances' clocks that keeps a
    /// fixed window in one counter per window (weir's Redis store): it counts a clock
    /// stepping back into an earlier window in that window, where weir-core stays in
    /// the newest, so a fixed window's steps go forward only.
    pub fn gap_us_with_window_counters(&self, policy: &Policy) -> i64 {
        match policy.algorithm() {
            Algorithm::FixedWindow => self.gap_us.max(0),
            _ => self.gap_us,
        }
    }

    /// Replays the step on `store` under `key`: its check's decision, or for a refund
    /// what a peek reports after it.
    pub async fn replay(
        &self,
        store: &dyn Store,
        key: Key<'_>,
        policy: &Policy,
    ) -> Result<Decision, StoreError> {
        let given = [Check {
            key,
            policy,
            cost: self.cost,
        }];
        match self.action {
            Action::Check => return store.check(key, policy, self.cost).await,
            Action::Refund => store.refund_all(&given).await?,
            Action::Charge => store.charge_all(&given).await?,
        }
        store.check(key, policy, 0).await
    }

    /// Replays the step on `state` at `now` with weir-core's functions: what
    /// [`Step::replay`] on any store must report.
    pub fn replay_on(&self, state: &mut Option<State>, policy: &Policy, now: u64) -> Decision {
        match self.action {
            Action::Check => return check(policy, state, now, self.cost),
            Action::Refund => refund(policy, state, now, self.cost),
            Action::Charge => charge(policy, state, now, self.cost),
        }
        check(policy, state, now, 0)
    }
}

/// A small deterministic generator, so a failing sequence can be replayed by seed.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 for `n` of 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Policies and sequences covering every algorithm: bursts, steady traffic, window
/// boundaries, costs that never fit, peeks, clocks stepping back, refunds (of
/// reservations just made, late, or of more than was consumed) and charges past the
/// limit.
pub fn conformance_sequences(seed: u64, count: usize) -> Vec<(Policy, Vec<Step>)> {
    let mut rng = XorShift(seed | 1);
    let shapes = [
        (1, 1_000),
        (3, 1_000),
        (7, 60_000),
        (10, 60_000),
        (100, 1_000),
        (5, 900_000),
        (12, 7_000),
    ];
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let algorithm = Algorithm::ALL[i % Algorithm::ALL.len()];
        let (limit, period_ms) = shapes[rng.below(shapes.len() as u64) as usize];
        let burst =
            (algorithm.takes_burst() && rng.below(2) == 0).then(|| 1 + rng.below(2 * limit));
        let policy = Policy::new(algorithm, limit, Duration::from_millis(period_ms), burst)
            .expect("valid policy");
        let period_us = period_ms * 1_000;
        let steps = (0..30)
            .map(|_| {
                let gap_us = match rng.below(10) {
                    0..=2 => 0,
                    3..=6 => rng.below(period_us / 4 + 1) as i64,
                    7 => rng.below(2 * period_us) as i64,
                    8 => period_us as i64,
                    _ => -(rng.below(period_us / 2 + 1) as i64),
                };
                let capacity = policy.capacity();
                let cost = match rng.below(10) {
                    0..=5 => 1,
                    6..=7 => rng.below(capacity + 1),
                    8 => 0,
                    _ => capacity + 1 + rng.below(3),
                };
                let action = match rng.below(8) {
                    0 | 1 => Action::Refund,
                    2 => Action::Charge,
                    _ => Action::Check,
                };
                Step {
                    gap_us,
                    cost,
                    action,
                }
            })
            .collect();
        out.push((policy, steps));
    }
    out
}

/// A calendar whose windows are of uneven lengths, as a calendar's months and days are
/// (2 s, 3.5 s, 1 s, 4 s, again and again from the Unix epoch): what the stores must
/// decide alike for any calendar, without a time zone in the test.
#[derive(Debug)]
pub struct UnevenCalendar;

/// The lengths of [`UnevenCalendar`]'s windows, in nanoseconds.
const UNEVEN_NS: [u64; 4] = [2_000_000_000, 3_500_000_000, 1_000_000_000, 4_000_000_000];

impl Calendar for UnevenCalendar {
    fn window(&self, now: u64) -> Window {
        let cycle: u64 = UNEVEN_NS.iter().sum();
        let mut start = now - now % cycle;
        for length in UNEVEN_NS {
            if now < start + length {
                return Window {
                    start,
                    end: start + length,
                };
            }
            start += length;
        }
        unreachable!("the lengths add up to the cycle")
    }
}

/// Fixed windows on [`UnevenCalendar`], and sequences crossing its boundaries (steps
/// landing on a boundary exactly, and just before it), with refunds and charges. The
/// clock only goes forward: a store keeping a calendar's window under its own key
/// (weir's Redis store) counts a clock stepping back in the earlier window, as it does
/// window counters (see [`Step::gap_us_with_window_counters`]).
pub fn calendar_sequences(seed: u64, count: usize) -> Vec<(Policy, Vec<Step>)> {
    static CALENDAR: UnevenCalendar = UnevenCalendar;
    let mut rng = XorShift(seed | 1);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let limit = [1, 3, 10][i % 3];
        let policy = Policy::new(Algorithm::FixedWindow, limit, Duration::from_secs(4), None)
            .and_then(|p| p.on_calendar(&CALENDAR))
            .expect("valid policy");
        let steps = (0..30)
            .map(|_| {
                let gap_us = match rng.below(8) {
                    0..=2 => 0,
                    3..=4 => rng.below(1_000_000) as i64,
                    5 => 500_000,
                    6 => 999_999,
                    _ => 1 + rng.below(4_000_000) as i64,
                };
                let cost = match rng.below(10) {
                    0..=6 => 1,
                    7 => rng.below(limit + 1),
                    8 => 0,
                    _ => limit + 1,
                };
                let action = match rng.below(8) {
                    0 => Action::Refund,
                    1 => Action::Charge,
                    _ => Action::Check,
                };
                Step {
                    gap_us,
                    cost,
                    action,
                }
            })
            .collect();
        out.push((policy, steps));
    }
    out
}

/// A decision with its durations rounded up to whole microseconds, for comparing
/// stores that count in nanoseconds and in microseconds.
pub fn decisions_in_micros(decision: &Decision) -> Decision {
    let up = |d: Duration| Duration::from_micros(d.as_nanos().div_ceil(1_000) as u64);
    Decision {
        reset_after: up(decision.reset_after),
        retry_after: decision.retry_after.map(up),
        delay: up(decision.delay),
        ..*decision
    }
}
