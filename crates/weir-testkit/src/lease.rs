//! The lease conformance suite: sequences of takes, renewals, give-backs, direct checks
//! and time passing that a store must decide exactly as weir-core's `take` and
//! `give_back` do.
//!
//! Instants are whole microseconds (Redis counts time so), as in `conformance`. Three
//! holders each keep at most one lease; each side of a comparison names leases its own
//! way (a store's ids need not be weir-core's), so a [`Holders`] per side keeps them.

use std::time::Duration;

use weir_core::{Algorithm, Closing, Grant, LeaseId, Leases, Policy, State, Take};
use weir_store::{Key, LeaseStore, StoreError};

use crate::conformance::XorShift;

/// Holders in a sequence.
pub const HOLDERS: usize = 3;

/// One step of a lease sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStep {
    /// The holder takes between `min` and `max` units for `hold_us`, renewing its lease
    /// (given back with `unspent`) if it holds one.
    Take {
        /// Which holder.
        holder: usize,
        /// The fewest units worth taking.
        min: u64,
        /// The most units.
        max: u64,
        /// The hold, in microseconds (0: spent at once).
        hold_us: u64,
        /// Units of its current lease not spent.
        unspent: u64,
    },
    /// The holder gives its lease back with `unspent` units.
    GiveBack {
        /// Which holder.
        holder: usize,
        /// Units not spent.
        unspent: u64,
    },
    /// The holder forgets its lease (a crash): its units count until it expires.
    Crash {
        /// Which holder.
        holder: usize,
    },
    /// A direct check of a leased key: a take of `cost` with no hold.
    Check {
        /// The cost.
        cost: u64,
    },
    /// Time passes (negative: the clock steps back).
    Wait {
        /// Microseconds.
        gap_us: i64,
    },
}

/// What a step reports, compared between a store and weir-core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// A take's grant, its durations rounded up to whole microseconds; whether it made
    /// a lease rather than the lease's id.
    Grant {
        /// Units granted.
        units: u64,
        /// Whether a lease was recorded.
        leased: bool,
        /// Whether the renewed lease was found.
        closed: bool,
        /// The key's take rate the grant reported.
        taken_rate: u64,
        /// The decision.
        decision: weir_core::Decision,
    },
    /// Whether a give-back found its lease.
    Found(bool),
    /// Nothing asked of the store.
    Nothing,
}

/// The leases one side's holders hold, by that side's ids.
#[derive(Debug, Clone, Default)]
pub struct Holders {
    held: [Option<LeaseId>; HOLDERS],
}

impl Holders {
    /// The take that `step` asks of holder `holder`, renewing its lease.
    fn take(&mut self, holder: usize, min: u64, max: u64, hold_us: u64, unspent: u64) -> Take {
        Take {
            min,
            max,
            hold: Duration::from_micros(hold_us),
            closing: self.held[holder]
                .take()
                .map(|lease| Closing { lease, unspent }),
        }
    }

    fn granted(&mut self, holder: usize, grant: &Grant) -> LeaseOutcome {
        self.held[holder] = grant.lease;
        outcome(grant)
    }

    /// Replays `step` on `store` under `key`.
    pub async fn replay(
        &mut self,
        step: &LeaseStep,
        store: &dyn LeaseStore,
        key: Key<'_>,
        policy: &Policy,
    ) -> Result<LeaseOutcome, StoreError> {
        Ok(match *step {
            LeaseStep::Take {
                holder,
                min,
                max,
                hold_us,
                unspent,
            } => {
                let take = self.take(holder, min, max, hold_us, unspent);
                let grant = store.take(key, policy, take).await?;
                self.granted(holder, &grant)
            }
            LeaseStep::GiveBack { holder, unspent } => match self.held[holder].take() {
                Some(lease) => {
                    LeaseOutcome::Found(store.give_back(key, policy, lease, unspent).await?)
                }
                None => LeaseOutcome::Nothing,
            },
            LeaseStep::Crash { holder } => {
                self.held[holder] = None;
                LeaseOutcome::Nothing
            }
            LeaseStep::Check { cost } => {
                outcome(&store.take(key, policy, Take::check(cost)).await?)
            }
            LeaseStep::Wait { .. } => LeaseOutcome::Nothing,
        })
    }

    /// Replays `step` with weir-core's functions at `now` (ns): what
    /// [`Holders::replay`] on a leasing store must report.
    pub fn replay_on(
        &mut self,
        step: &LeaseStep,
        state: &mut Option<State>,
        leases: &mut Leases,
        policy: &Policy,
        now: u64,
    ) -> LeaseOutcome {
        let take = |take: &Take, state: &mut _, leases: &mut _| {
            weir_core::take(policy, state, leases, now, take).expect("a leasable policy")
        };
        match *step {
            LeaseStep::Take {
                holder,
                min,
                max,
                hold_us,
                unspent,
            } => {
                let asked = self.take(holder, min, max, hold_us, unspent);
                let grant = take(&asked, state, leases);
                self.granted(holder, &grant)
            }
            LeaseStep::GiveBack { holder, unspent } => match self.held[holder].take() {
                Some(lease) => LeaseOutcome::Found(
                    weir_core::give_back(policy, state, leases, now, lease, unspent)
                        .expect("a leasable policy"),
                ),
                None => LeaseOutcome::Nothing,
            },
            LeaseStep::Crash { holder } => {
                self.held[holder] = None;
                LeaseOutcome::Nothing
            }
            LeaseStep::Check { cost } => outcome(&take(&Take::check(cost), state, leases)),
            LeaseStep::Wait { .. } => LeaseOutcome::Nothing,
        }
    }
}

fn outcome(grant: &Grant) -> LeaseOutcome {
    LeaseOutcome::Grant {
        units: grant.units,
        leased: grant.lease.is_some(),
        closed: grant.closed,
        taken_rate: grant.taken_rate,
        decision: crate::decisions_in_micros(&grant.decision),
    }
}

/// Token bucket and GCRA policies, and sequences of lease steps on them: batches,
/// renewals, give-backs with and without unspent units (and with more than the lease
/// held), crashes, holds shorter and longer than a period, direct checks (including
/// costs that never fit), and time passing in whole microseconds (sometimes back).
pub fn lease_sequences(seed: u64, count: usize) -> Vec<(Policy, Vec<LeaseStep>)> {
    let mut rng = XorShift(seed | 1);
    let shapes = [
        (3, 1_000),
        (7, 60_000),
        (10, 1_000),
        (100, 1_000),
        (12, 7_000),
    ];
    (0..count)
        .map(|i| {
            let algorithm = [Algorithm::TokenBucket, Algorithm::Gcra][i % 2];
            let (limit, period_ms) = shapes[rng.below(shapes.len() as u64) as usize];
            let burst = (rng.below(2) == 0).then(|| 1 + rng.below(2 * limit));
            let policy = Policy::new(algorithm, limit, Duration::from_millis(period_ms), burst)
                .expect("valid policy");
            let (period_us, capacity) = (period_ms * 1_000, policy.capacity());
            let steps = (0..40)
                .map(|_| {
                    let holder = rng.below(HOLDERS as u64) as usize;
                    let unspent = rng.below(capacity + 2);
                    match rng.below(12) {
                        0..=3 => LeaseStep::Take {
                            holder,
                            min: rng.below(capacity / 2 + 2),
                            max: rng.below(capacity + 2),
                            hold_us: match rng.below(4) {
                                0 => 0,
                                1 => 1 + rng.below(period_us / 4),
                                _ => 1 + rng.below(2 * period_us),
                            },
                            unspent,
                        },
                        4 | 5 => LeaseStep::GiveBack { holder, unspent },
                        6 => LeaseStep::Crash { holder },
                        7 | 8 => LeaseStep::Check {
                            cost: rng.below(capacity + 2),
                        },
                        _ => LeaseStep::Wait {
                            gap_us: match rng.below(8) {
                                0 | 1 => 0,
                                2..=4 => rng.below(period_us / 4 + 1) as i64,
                                5 | 6 => rng.below(2 * period_us) as i64,
                                _ => -(rng.below(period_us / 4 + 1) as i64),
                            },
                        },
                    }
                })
                .collect();
            (policy, steps)
        })
        .collect()
}
