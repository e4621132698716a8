//! The rate limiting algorithms of weir, as pure functions.
//!
//! Every algorithm is a function of `(policy, state, now, cost)` that yields a
//! [`Decision`] and the new state ([`check`]); [`refund`] gives back what a check
//! consumed, for limits settled after the request, and [`charge`] consumes past the
//! limit (a debt) what a request turned out to cost beyond its reservation; [`take`] and [`give_back`] lease
//! units of a bucket to an instance that spends them later (see [`Take`]). Nothing here reads a clock, does I/O
//! or awaits: time is handed in as integer nanoseconds since the Unix epoch (taken from a
//! monotonic source by a [`Clock`]), so every algorithm can be tested at any instant,
//! including window boundaries, clocks that step backwards and absurd costs.
//!
//! Arithmetic is exact: rates such as "7 per minute" are kept as integer fractions, and
//! intermediate products use 128-bit integers, so refills are fractional and no
//! rounding ever admits more than the policy allows.

#![deny(missing_docs)]

mod algorithm;
mod calendar;
mod clock;
mod decision;
mod lease;
mod period;
mod policy;
mod share;
mod shed;
mod state;

pub use algorithm::{charge, check, check_word, refund};
pub use calendar::{Calendar, Window};
pub use clock::{Clock, ManualClock};
pub use decision::Decision;
pub use lease::{
    Closing, Grant, LeaseError, LeaseId, Leases, MAX_LEASES, Take, give_back, leasable, take,
};
pub use period::{PeriodError, parse_period};
pub use policy::{
    Algorithm, MAX_LIMIT, MAX_PERIOD, MAX_SLIDING_LOG_LIMIT, MIN_PERIOD, Policy, PolicyError,
};
pub use share::{
    Claim, MAX_REGIONS, Renewal, Report, ShareError, apply as apply_share,
    deadline as share_deadline, renew as renew_share, report as report_share,
};
pub use shed::{Outcome, Priority, ShedConfig, Shedder, Ticket};
pub use state::State;
