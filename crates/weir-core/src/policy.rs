//! Policies: which algorithm, how many, per how long. A `Policy` that exists is valid.

use std::fmt;
use std::time::Duration;

use crate::calendar::{Calendar, CalendarRef, Window};

/// The largest `limit` or `burst` a policy accepts.
///
/// Large enough for any real quota (a billion per period) and small enough that every
/// product the algorithms form fits a 128-bit integer with room to spare.
pub const MAX_LIMIT: u64 = 1_000_000_000;

/// The largest `limit` of a `sliding_log` policy, which keeps a timestamp per admitted
/// request: beyond this, use `sliding_window`, which keeps two counters.
pub const MAX_SLIDING_LOG_LIMIT: u64 = 10_000;

/// The shortest period a policy accepts.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The longest period a policy accepts (a year).
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 24 * 3600);

/// The limiting algorithms weir implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// At most `limit` per window of `period`, windows aligned to the Unix epoch, or
    /// per window of a calendar ([`Policy::on_calendar`]).
    FixedWindow,
    /// At most `limit` in any trailing `period`, exactly (a log of admitted requests).
    SlidingLog,
    /// The previous and current fixed windows' counts, the previous one weighted by the
    /// share of it still inside the trailing period.
    SlidingWindow,
    /// A bucket of `burst` tokens refilled at `limit / period`, fractionally.
    TokenBucket,
    /// The token bucket's admission, kept as one number (the theoretical arrival time).
    Gcra,
    /// A queue of `burst` draining at `limit / period`; admitted requests may wait.
    LeakyBucket,
}

impl Algorithm {
    /// Every algorithm, in documentation order.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::LeakyBucket,
    ];

    /// The name used in configuration files (`token_bucket`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
            Algorithm::LeakyBucket => "leaky_bucket",
        }
    }

    /// Whether the algorithm has a capacity apart from its rate (`burst`).
    pub fn takes_burst(self) -> bool {
        matches!(
            self,
            Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket
        )
    }

    /// Whether a key can owe units (`weir_core::charge`): the algorithms whose state is
    /// a time, which a debt moves ahead. Windows and logs cannot carry one.
    pub fn carries_debt(self) -> bool {
        self.takes_burst()
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a policy could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyError {
    /// `limit` is 0 or above [`MAX_LIMIT`] (or [`MAX_SLIDING_LOG_LIMIT`]).
    LimitOutOfRange {
        /// The limit given.
        limit: u64,
        /// The largest limit this algorithm accepts.
        max: u64,
    },
    /// `burst` is 0 or above [`MAX_LIMIT`].
    BurstOutOfRange(u64),
    /// `burst` was given to an algorithm that has no separate capacity.
    BurstNotApplicable(Algorithm),
    /// `period` is shorter than [`MIN_PERIOD`] or longer than [`MAX_PERIOD`].
    PeriodOutOfRange(Duration),
    /// A regional share ([`Policy::regional`]) of an algorithm other than
    /// `token_bucket`.
    ShareNotApplicable(Algorithm),
    /// A regional share whose floors, one per region, are 0 or add up to more than the
    /// limit.
    FloorsOutOfRange {
        /// Each region's floor.
        floor: u64,
        /// How many regions.
        regions: u64,
        /// The global limit.
        limit: u64,
    },
    /// A calendar period ([`Policy::on_calendar`]) on an algorithm other than
    /// `fixed_window`.
    CalendarNotApplicable(Algorithm),
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::LimitOutOfRange { limit, max } => {
                write!(
                    f,
                    "limit must be a whole number from 1 to {max}, got {limit}"
                )?;
                if *max == MAX_SLIDING_LOG_LIMIT && *limit > *max {
                    f.write_str(" (sliding_log keeps a timestamp per request; use sliding_window for large limits)")?;
                }
                Ok(())
            }
            PolicyError::BurstOutOfRange(burst) => {
                write!(
                    f,
                    "burst must be a whole number from 1 to {MAX_LIMIT}, got {burst}"
                )
            }
            PolicyError::BurstNotApplicable(algorithm) => write!(
                f,
                "burst applies to token_bucket, gcra and leaky_bucket, not to {algorithm}"
            ),
            PolicyError::PeriodOutOfRange(period) => {
                write!(f, "period must be from 1ms to 366d, got {period:?}")
            }
            PolicyError::ShareNotApplicable(algorithm) => write!(
                f,
                "scope: global applies to token_bucket, not to {algorithm} (a region's share changes the rate, which only a bucket's level carries across)"
            ),
            PolicyError::FloorsOutOfRange {
                floor,
                regions,
                limit,
            } => write!(
                f,
                "each of {regions} regions keeps a floor of {floor} units, which must be at least 1 and add up to at most the limit ({limit}): raise the limit or lower region.floor"
            ),
            PolicyError::CalendarNotApplicable(algorithm) => write!(
                f,
                "a calendar period applies to fixed_window, not to {algorithm} (its windows are the calendar's; the other algorithms refill or slide by a fixed period)"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

/// A validated rate limit: an algorithm, a limit per period and a capacity.
///
/// Built only through [`Policy::new`], so a policy that exists has a limit, burst and
/// period in range, and the algorithms never divide by zero or overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Policy {
    algorithm: Algorithm,
    limit: u64,
    period_ns: u64,
    burst: Option<u64>,
    /// Nanoseconds between emissions when the state fits one word (see
    /// [`Policy::packs`]), else 0: worked out once here rather than on every check.
    word_interval_ns: u64,
    /// For a region's share of a global limit ([`Policy::regional`]): the units per
    /// period this region always has, whatever its share; else 0.
    region_floor: u64,
    /// For a fixed window whose windows follow the calendar ([`Policy::on_calendar`]).
    calendar: Option<CalendarRef>,
}

impl Policy {
    /// Builds a policy, checking every bound (see [`PolicyError`]): a policy that
    /// exists is valid, so nothing downstream checks again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Algorithm, Policy, PolicyError};
    ///
    /// // 100 a minute, bursts of up to 20.
    /// let api = Policy::new(Algorithm::TokenBucket, 100, Duration::from_secs(60), Some(20))?;
    /// assert_eq!((api.limit(), api.capacity()), (100, 20));
    ///
    /// // What cannot be enforced cannot be built.
    /// let none = Policy::new(Algorithm::Gcra, 0, Duration::from_secs(60), None);
    /// assert!(matches!(none, Err(PolicyError::LimitOutOfRange { limit: 0, .. })));
    /// let burst = Policy::new(Algorithm::FixedWindow, 10, Duration::from_secs(1), Some(5));
    /// assert_eq!(burst, Err(PolicyError::BurstNotApplicable(Algorithm::FixedWindow)));
    /// # Ok::<(), PolicyError>(())
    /// ```
    pub fn new(
        algorithm: Algorithm,
        limit: u64,
        period: Duration,
        burst: Option<u64>,
    ) -> Result<Self, PolicyError> {
        let max = match algorithm {
            Algorithm::SlidingLog => MAX_SLIDING_LOG_LIMIT,
            _ => MAX_LIMIT,
        };
        if limit == 0 || limit > max {
            return Err(PolicyError::LimitOutOfRange { limit, max });
        }
        if !(MIN_PERIOD..=MAX_PERIOD).contains(&period) {
            return Err(PolicyError::PeriodOutOfRange(period));
        }
        if let Some(burst) = burst {
            if !algorithm.takes_burst() {
                return Err(PolicyError::BurstNotApplicable(algorithm));
            }
            if burst == 0 || burst > MAX_LIMIT {
                return Err(PolicyError::BurstOutOfRange(burst));
            }
        }
        // In range by the check above: a year is about 2^55 ns.
        let period_ns = period.as_nanos() as u64;
        let gcra = matches!(algorithm, Algorithm::Gcra | Algorithm::LeakyBucket);
        Ok(Self {
            algorithm,
            limit,
            period_ns,
            burst,
            word_interval_ns: if gcra && period_ns.is_multiple_of(limit) {
                period_ns / limit
            } else {
                0
            },
            region_floor: 0,
            calendar: None,
        })
    }

    /// This fixed-window policy with its windows taken from `calendar` (a calendar
    /// month in a time zone...) rather than cut every `period` from the Unix epoch.
    /// `period` stays what [`Policy::period`] reports (the longest window, for
    /// headers that state a window); the windows and the times to reset are the
    /// calendar's. Only `fixed_window`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Algorithm, Calendar, Policy, Window, check};
    ///
    /// // Windows of 3 s, then 5 s, then 3 s...: the fixed window resets at each.
    /// #[derive(Debug)]
    /// struct Uneven;
    /// impl Calendar for Uneven {
    ///     fn window(&self, now: u64) -> Window {
    ///         let (s, rest) = (8_000_000_000, now % 8_000_000_000);
    ///         let base = now - rest;
    ///         if rest < 3_000_000_000 {
    ///             Window { start: base, end: base + 3_000_000_000 }
    ///         } else {
    ///             Window { start: base + 3_000_000_000, end: base + s }
    ///         }
    ///     }
    /// }
    /// let policy = Policy::new(Algorithm::FixedWindow, 1, Duration::from_secs(5), None)?
    ///     .on_calendar(&Uneven)?;
    /// let mut state = None;
    /// assert!(check(&policy, &mut state, 1_000_000_000, 1).allowed);
    /// let denied = check(&policy, &mut state, 1_000_000_000, 1);
    /// assert_eq!(denied.retry_after, Some(Duration::from_secs(2)));
    /// assert!(check(&policy, &mut state, 3_000_000_000, 1).allowed);
    /// let denied = check(&policy, &mut state, 4_000_000_000, 1);
    /// assert_eq!(denied.retry_after, Some(Duration::from_secs(4)));
    /// # Ok::<(), weir_core::PolicyError>(())
    /// ```
    pub fn on_calendar(self, calendar: &'static dyn Calendar) -> Result<Self, PolicyError> {
        if self.algorithm != Algorithm::FixedWindow {
            return Err(PolicyError::CalendarNotApplicable(self.algorithm));
        }
        Ok(Self {
            calendar: Some(CalendarRef(calendar)),
            ..self
        })
    }

    /// The calendar the windows follow, if any ([`Policy::on_calendar`]).
    pub fn calendar(&self) -> Option<&'static dyn Calendar> {
        self.calendar.map(|c| c.0)
    }

    /// The window holding `now` for a window algorithm: the calendar's, or the
    /// `period` cut from the Unix epoch.
    pub fn window(&self, now: u64) -> Window {
        match self.calendar {
            Some(calendar) => calendar.0.window(now),
            None => {
                let start = now - now % self.period_ns;
                Window {
                    start,
                    end: start.saturating_add(self.period_ns),
                }
            }
        }
    }

    /// This policy with another limit and burst, the rest kept (the calendar too): a
    /// caller's custom limit, or an instance's part of it.
    pub fn relimit(&self, limit: u64, burst: Option<u64>) -> Result<Self, PolicyError> {
        let policy = Self::new(self.algorithm, limit, self.period(), burst)?;
        match self.calendar {
            Some(calendar) => policy.on_calendar(calendar.0),
            None => Ok(policy),
        }
    }

    /// This policy as one region's share of it, for a rule whose limit is global
    /// across `regions` regions (`crate::share`): the region always has `floor` units
    /// per period, and on top of them the share its rebalancing was last granted. Only
    /// `token_bucket`, and floors of at least 1 that add up to at most the limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Algorithm, Policy};
    ///
    /// let global = Policy::new(Algorithm::TokenBucket, 20_000, Duration::from_secs(60), None)?;
    /// let eu = global.regional(400, 3)?;
    /// assert_eq!((eu.region_floor(), eu.limit()), (Some(400), 20_000));
    /// assert!(global.regional(7_000, 3).is_err(), "three floors above the limit");
    /// # Ok::<(), weir_core::PolicyError>(())
    /// ```
    pub fn regional(self, floor: u64, regions: u64) -> Result<Self, PolicyError> {
        if self.algorithm != Algorithm::TokenBucket {
            return Err(PolicyError::ShareNotApplicable(self.algorithm));
        }
        if floor == 0 || regions == 0 || floor.saturating_mul(regions) > self.limit {
            return Err(PolicyError::FloorsOutOfRange {
                floor,
                regions,
                limit: self.limit,
            });
        }
        Ok(Self {
            region_floor: floor,
            ..self
        })
    }

    /// The floor of a region's share ([`Policy::regional`]); `None` for a policy that
    /// is not a share.
    pub fn region_floor(&self) -> Option<u64> {
        (self.region_floor != 0).then_some(self.region_floor)
    }

    /// The plain token bucket of `limit` units per period, with the capacity scaled
    /// as `limit` is to this policy's limit, rounded up: what a region enforces with
    /// `limit` units of the global limit in force. Rounded up, the regions' capacities
    /// add up to at most one unit per region more than this policy's (rounded down, a
    /// region with a small share could never hold the two tokens its rate needs
    /// between requests, and would admit less than its share).
    pub(crate) fn scaled_bucket(&self, limit: u64) -> Self {
        let limit = limit.clamp(1, self.limit);
        let scaled = u128::from(self.capacity()) * u128::from(limit);
        // At most the capacity, which is at most MAX_LIMIT.
        let capacity = scaled.div_ceil(u128::from(self.limit)) as u64;
        Self {
            algorithm: Algorithm::TokenBucket,
            limit,
            period_ns: self.period_ns,
            burst: Some(capacity),
            word_interval_ns: 0,
            region_floor: 0,
            calendar: None,
        }
    }

    /// Whether every state this policy leaves is one word ([`State::word`](crate::State::word)),
    /// so that [`check_word`](crate::check_word) decides on it: GCRA and the leaky
    /// bucket when the period is a whole number of nanoseconds per unit (100 per
    /// minute, 1,000 per second; not 7 per hour).
    pub fn packs(&self) -> bool {
        self.word_interval_ns != 0
    }

    /// Nanoseconds between emissions for a policy that [`Policy::packs`], else 0.
    pub(crate) fn word_interval_ns(&self) -> u64 {
        self.word_interval_ns
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Units of cost admitted per period.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// The period in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// The burst as configured (`None` when it defaults to the limit).
    pub fn burst(&self) -> Option<u64> {
        self.burst
    }

    /// The most cost the policy can ever admit at once: `burst` (default `limit`) for
    /// the bucket algorithms, `limit` for the window algorithms. A request costing more
    /// is denied with no retry time.
    pub fn capacity(&self) -> u64 {
        self.burst.unwrap_or(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_out_of_range_values() {
        let minute = Duration::from_secs(60);
        assert_eq!(
            Policy::new(Algorithm::Gcra, 0, minute, None),
            Err(PolicyError::LimitOutOfRange {
                limit: 0,
                max: MAX_LIMIT
            })
        );
        assert!(Policy::new(Algorithm::Gcra, MAX_LIMIT + 1, minute, None).is_err());
        assert!(Policy::new(Algorithm::SlidingLog, 10_001, minute, None).is_err());
    }

    #[test]
    fn only_a_sliding_log_limit_too_large_is_told_to_use_sliding_window() {
        let minute = Duration::from_secs(60);
        let message = |limit| {
            Policy::new(Algorithm::SlidingLog, limit, minute, None)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            message(10_001),
            "limit must be a whole number from 1 to 10000, got 10001 (sliding_log keeps a timestamp per request; use sliding_window for large limits)"
        );
        assert_eq!(
            message(0),
            "limit must be a whole number from 1 to 10000, got 0"
        );
    }

    #[test]
    fn rejects_out_of_range_periods_and_bursts() {
        let minute = Duration::from_secs(60);
        assert_eq!(
            Policy::new(Algorithm::Gcra, 1, Duration::ZERO, None),
            Err(PolicyError::PeriodOutOfRange(Duration::ZERO))
        );
        assert!(
            Policy::new(
                Algorithm::Gcra,
                1,
                MAX_PERIOD + Duration::from_secs(1),
                None
            )
            .is_err()
        );
        assert_eq!(
            Policy::new(Algorithm::Gcra, 1, minute, Some(0)),
            Err(PolicyError::BurstOutOfRange(0))
        );
        assert_eq!(
            Policy::new(Algorithm::FixedWindow, 1, minute, Some(5)),
            Err(PolicyError::BurstNotApplicable(Algorithm::FixedWindow))
        );
    }

    #[test]
    fn capacity_is_burst_or_limit() {
        let minute = Duration::from_secs(60);
        let bucket = Policy::new(Algorithm::TokenBucket, 100, minute, Some(20)).unwrap();
        assert_eq!(bucket.capacity(), 20);
        let window = Policy::new(Algorithm::FixedWindow, 100, minute, None).unwrap();
        assert_eq!(window.capacity(), 100);
    }
}
