//! A policy as the Lua scripts compute it: microseconds, and exact within doubles.
//!
//! Redis runs Lua 5.1, whose numbers are doubles: integers are exact up to 2^53. The
//! scripts count time in microseconds (Redis `TIME` has that resolution) and keep
//! rates as fractions reduced by their greatest common divisor, so that for any policy
//! accepted here every intermediate value stays below 2^53, and the scripts decide
//! exactly as weir-core does. A policy that cannot be kept exact in Redis is refused
//! when the configuration is loaded, never rounded.

use weir_core::{Algorithm, Policy};

/// The largest integer a double holds exactly.
const EXACT: u128 = 1 << 53;

/// Why a policy cannot run on Redis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedisPolicyError {
    /// The period is not a whole number of microseconds.
    #[error("on Redis, the period must be a whole number of microseconds")]
    SubMicrosecondPeriod,
    /// The policy's products exceed what Lua computes exactly.
    #[error(
        "too large to decide exactly in Redis (Lua numbers are exact to 2^53): {0}; use a shorter period or a smaller limit or burst"
    )]
    TooLarge(&'static str),
}

/// The numbers the scripts receive for one policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScriptPolicy {
    pub(crate) algorithm: Algorithm,
    pub(crate) limit: u64,
    pub(crate) capacity: u64,
    /// The period in microseconds.
    pub(crate) period_us: u64,
    /// `limit / gcd(limit, period_us)`: ticks per microsecond (token bucket: units of
    /// refill per microsecond).
    pub(crate) ticks_per_us: u64,
    /// `period_us / gcd(limit, period_us)`: ticks per unit of cost.
    pub(crate) ticks_per_unit: u64,
    /// For a fixed window decided on the instances' clocks: the window the check falls
    /// in (`now / period`), whose count lives under its own key as a bare integer (see
    /// `counter`). `None` for state kept under the rule's key.
    pub(crate) window: Option<u64>,
    /// For a fixed window that follows a calendar: the window the instance's clock
    /// places the check in, `[start, end)` in microseconds, whose count lives under its
    /// own key as a bare integer (see `calendar_counter` in fixed_window.lua). The
    /// instance works out the boundary (the scripts know no time zones) and Redis
    /// only counts, so every instance that agrees on the window shares the key.
    pub(crate) calendar: Option<(u64, u64)>,
    /// For a region's share of a global limit (`share.lua`): the region's floor, which
    /// the driver's `regional` algorithm takes in the place of L (its bucket counts
    /// tokens in units of `1 / period_us`, whatever the rate in force, and needs no P).
    pub(crate) region_floor: Option<u64>,
}

impl ScriptPolicy {
    /// Checks that `policy` can be decided exactly by the scripts, and derives their
    /// numbers.
    pub(crate) fn new(policy: &Policy) -> Result<Self, RedisPolicyError> {
        if !policy.period_ns().is_multiple_of(1_000) {
            return Err(RedisPolicyError::SubMicrosecondPeriod);
        }
        let period_us = policy.period_ns() / 1_000;
        let limit = policy.limit();
        let divisor = gcd(limit, period_us);
        let params = Self {
            algorithm: policy.algorithm(),
            limit,
            capacity: policy.capacity(),
            period_us,
            ticks_per_us: limit / divisor,
            ticks_per_unit: period_us / divisor,
            window: None,
            calendar: None,
            region_floor: None,
        };
        let wide = u128::from;
        if let Some(floor) = policy.region_floor() {
            // Tokens in units of 1/period_us, and the capacity scaled by C × rate / L.
            let fits = 2 * wide(params.capacity) * wide(period_us) < EXACT
                && wide(params.capacity) * wide(limit) < EXACT;
            if !fits {
                return Err(RedisPolicyError::TooLarge(
                    "a global rule's burst x period in microseconds, or burst x limit",
                ));
            }
            return Ok(Self {
                region_floor: Some(floor),
                ..params
            });
        }
        let fits = match policy.algorithm() {
            Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket => {
                // Queued ticks plus a cost of up to the capacity: twice the tolerance,
                // and the clamp one tick above.
                2 * wide(params.capacity) * wide(params.ticks_per_unit) + 1 < EXACT
            }
            Algorithm::SlidingWindow => 3 * wide(limit) * wide(period_us) < EXACT,
            Algorithm::FixedWindow | Algorithm::SlidingLog => true,
        };
        if fits {
            Ok(params)
        } else if policy.algorithm() == Algorithm::SlidingWindow {
            Err(RedisPolicyError::TooLarge("limit x period in microseconds"))
        } else {
            Err(RedisPolicyError::TooLarge(
                "burst x period / gcd(limit, period), in microseconds",
            ))
        }
    }

    /// The policy for a check at `now_us` (microseconds, on the instances' clocks), or
    /// on the server's clock (`None`). On the instances' clocks, a fixed window lives in
    /// one counter per window.
    pub(crate) fn at(self, now_us: Option<u64>) -> Self {
        let window = now_us
            .filter(|_| self.algorithm == Algorithm::FixedWindow)
            .map(|now| now / self.period_us);
        Self { window, ..self }
    }

    /// The policy `policy` (from which `self` was made) for a check at `now` on the
    /// instance's clock (ns), whichever clock decides: a calendar's window is always
    /// the instance's (see `calendar`); other policies are unchanged.
    pub(crate) fn on_calendar(self, policy: &Policy, now: u64) -> Self {
        match policy.calendar() {
            Some(calendar) => {
                let window = calendar.window(now);
                Self {
                    window: None,
                    calendar: Some((window.start / 1_000, window.end / 1_000)),
                    ..self
                }
            }
            None => self,
        }
    }

    /// What names this policy's window in its Redis key (see `keys`): `w` and the
    /// number of a fixed window kept in counters, `c` and the start (us) of a
    /// calendar's window.
    pub(crate) fn key_window(&self) -> Option<(char, u64)> {
        match (self.calendar, self.window) {
            (Some((start, _)), _) => Some(('c', start)),
            (None, Some(n)) => Some(('w', n)),
            (None, None) => None,
        }
    }

    /// The number the scripts take as the period: a calendar window's end (us), else
    /// the period (us).
    pub(crate) fn period_arg(&self) -> u64 {
        self.calendar.map_or(self.period_us, |(_, end)| end)
    }

    /// The Lua's name for how this policy is decided.
    pub(crate) fn lua_name(&self) -> &'static str {
        match (self.calendar, self.window, self.region_floor) {
            (Some(_), _, _) => CALENDAR,
            (None, Some(_), _) => COUNTER,
            (None, None, Some(_)) => REGIONAL,
            (None, None, None) => self.algorithm.name(),
        }
    }
}

/// The Lua's name for a fixed window that follows a calendar.
pub(crate) const CALENDAR: &str = "calendar_counter";

/// The Lua's name for a fixed window kept in per-window counters.
pub(crate) const COUNTER: &str = "fixed_counter";

/// The Lua's name for a region's share of a global limit.
const REGIONAL: &str = "regional";

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Checks that a policy can run on Redis (for configuration checks).
pub fn check_redis_policy(policy: &Policy) -> Result<(), RedisPolicyError> {
    ScriptPolicy::new(policy).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn policy(algorithm: Algorithm, limit: u64, period: Duration, burst: Option<u64>) -> Policy {
        Policy::new(algorithm, limit, period, burst).unwrap()
    }

    #[test]
    fn reduces_rates_by_their_gcd() {
        let p = ScriptPolicy::new(&policy(
            Algorithm::Gcra,
            1_000_000,
            Duration::from_secs(86_400),
            None,
        ))
        .unwrap();
        assert_eq!((p.ticks_per_us, p.ticks_per_unit), (1, 86_400));
        let p =
            ScriptPolicy::new(&policy(Algorithm::Gcra, 7, Duration::from_secs(60), None)).unwrap();
        assert_eq!((p.ticks_per_us, p.ticks_per_unit), (7, 60_000_000));
    }

    #[test]
    fn refuses_what_doubles_cannot_hold_exactly() {
        let day = Duration::from_secs(86_400);
        assert!(ScriptPolicy::new(&policy(Algorithm::Gcra, 7, day, Some(1_000_000))).is_err());
        assert!(
            ScriptPolicy::new(&policy(Algorithm::SlidingWindow, 1_000_000, day, None)).is_err()
        );
        assert!(ScriptPolicy::new(&policy(Algorithm::SlidingWindow, 10_000, day, None)).is_ok());
        assert!(
            ScriptPolicy::new(&policy(Algorithm::FixedWindow, 1_000_000_000, day, None)).is_ok()
        );
        let odd = Duration::from_nanos(1_000_000_500);
        assert_eq!(
            ScriptPolicy::new(&policy(Algorithm::Gcra, 1, odd, None)),
            Err(RedisPolicyError::SubMicrosecondPeriod)
        );
    }
}
