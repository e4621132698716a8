//! The settings of a client's behaviour, checked when set: a [`Policy`] that exists
//! can be followed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, TokioClock};
use crate::error::{Error, MAX_SETTING};
use crate::random::{FastRandom, Random};

/// How a client waits, retries and holds back. Start from [`Policy::default`] and
/// change what you need; each setter that takes a number checks it.
///
/// | setting | default |
/// | --- | --- |
/// | retries per request ([`max_retries`](Policy::max_retries)) | 3 |
/// | backoff ([`backoff`](Policy::backoff)): full jitter over steps from `base`, doubling to `cap` | 100 ms to 10 s |
/// | longest wait a server may ask for ([`max_wait`](Policy::max_wait)) | 60 s |
/// | retry budget ([`retry_budget`](Policy::retry_budget)) | 10% of requests plus 10, over 10 s |
/// | adaptive throttle ([`adaptive_throttle`](Policy::adaptive_throttle)) | off (K = 2 over 2 minutes is the SRE book's) |
/// | slow down below ([`slow_down_below`](Policy::slow_down_below)) | 10% of a quota left |
/// | retry non-idempotent requests ([`retry_non_idempotent`](Policy::retry_non_idempotent)) | no |
#[derive(Clone)]
pub struct Policy {
    pub(crate) max_retries: usize,
    pub(crate) base: Duration,
    pub(crate) cap: Duration,
    pub(crate) max_wait: Duration,
    pub(crate) budget_percent: u8,
    pub(crate) budget_reserve: u32,
    pub(crate) budget_window: Duration,
    pub(crate) throttle: Option<(f64, Duration)>,
    pub(crate) slow_below: Option<f64>,
    pub(crate) retry_non_idempotent: bool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Arc<dyn Random>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(10),
            max_wait: Duration::from_secs(60),
            budget_percent: 10,
            budget_reserve: 10,
            budget_window: Duration::from_secs(10),
            throttle: None,
            slow_below: Some(0.1),
            retry_non_idempotent: false,
            clock: Arc::new(TokioClock::new()),
            random: Arc::new(FastRandom::new()),
        }
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("max_retries", &self.max_retries)
            .field("base", &self.base)
            .field("cap", &self.cap)
            .field("max_wait", &self.max_wait)
            .field("budget_percent", &self.budget_percent)
            .field("budget_reserve", &self.budget_reserve)
            .field("budget_window", &self.budget_window)
            .field("throttle", &self.throttle)
            .field("slow_below", &self.slow_below)
            .field("retry_non_idempotent", &self.retry_non_idempotent)
            .finish_non_exhaustive()
    }
}

/// A duration setting within (0, 24 h].
fn positive(duration: Duration, what: &'static str) -> Result<Duration, Error> {
    if duration.is_zero() || duration > MAX_SETTING {
        Err(Error::InvalidPolicy(what))
    } else {
        Ok(duration)
    }
}

impl Policy {
    /// At most `retries` retries of one request (0: never retry; the budget, pacing
    /// and throttle still apply).
    pub fn max_retries(mut self, retries: usize) -> Self {
        self.max_retries = retries;
        self
    }

    /// Backoff steps from `base`, doubling up to `cap` (`0 < base <= cap <= 24 h`).
    /// Each wait is drawn uniformly below its step (full jitter); a server's own wait
    /// (`Retry-After`, RateLimit `t`) gets such a draw added.
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Result<Self, Error> {
        self.base = positive(base, "the backoff base must be above zero, at most 24 h")?;
        self.cap = positive(cap, "the backoff cap must be above zero, at most 24 h")?;
        if base > cap {
            return Err(Error::InvalidPolicy(
                "the backoff base must not exceed its cap",
            ));
        }
        Ok(self)
    }

    /// The longest wait a server may ask for (`0 < wait <= 24 h`): a refusal asking
    /// for longer (a lockout of 15 minutes, a `Retry-After` of a year) is returned to
    /// the caller at once rather than slept on.
    pub fn max_wait(mut self, wait: Duration) -> Result<Self, Error> {
        self.max_wait = positive(wait, "max_wait must be above zero, at most 24 h")?;
        Ok(self)
    }

    /// Retries at most `percent` (0 to 100) of the requests sent in the last `window`,
    /// plus `reserve` (so a client that has sent little may still retry).
    pub fn retry_budget(
        mut self,
        percent: u8,
        reserve: u32,
        window: Duration,
    ) -> Result<Self, Error> {
        if percent > 100 {
            return Err(Error::InvalidPolicy(
                "the retry budget is a percentage, 0 to 100",
            ));
        }
        self.budget_window =
            positive(window, "the budget window must be above zero, at most 24 h")?;
        self.budget_percent = percent;
        self.budget_reserve = reserve;
        Ok(self)
    }

    /// Refuses requests locally with probability
    /// `max(0, (requests - k * accepts) / (requests + 1))` over the last `window`
    /// (`k` finite and at least 1; the SRE book uses 2 and two minutes). A request it
    /// refuses fails with [`Error::Throttled`].
    pub fn adaptive_throttle(mut self, k: f64, window: Duration) -> Result<Self, Error> {
        if !(k.is_finite() && k >= 1.0) {
            return Err(Error::InvalidPolicy(
                "the throttle's K must be finite, at least 1",
            ));
        }
        let window = positive(
            window,
            "the throttle window must be above zero, at most 24 h",
        )?;
        self.throttle = Some((k, window));
        Ok(self)
    }

    /// Spaces requests to a server at its quota's own rate once an answer says less
    /// than `fraction` (0 to 1) of the quota is left, until the quota's reset; `None`
    /// never slows down.
    pub fn slow_down_below(mut self, fraction: Option<f64>) -> Result<Self, Error> {
        if let Some(f) = fraction
            && !(0.0..=1.0).contains(&f)
        {
            return Err(Error::InvalidPolicy(
                "slow_down_below is a fraction, 0 to 1",
            ));
        }
        self.slow_below = fraction;
        Ok(self)
    }

    /// Retries requests whose method is not idempotent (POST, PATCH) too. Without it
    /// such a request is retried only when it says it may be: an `Idempotency-Key`
    /// header, or the [`Idempotent`](crate::Idempotent) marker in its extensions.
    pub fn retry_non_idempotent(mut self, retry: bool) -> Self {
        self.retry_non_idempotent = retry;
        self
    }

    /// Reads time and sleeps through `clock` (tests: [`ManualClock`](crate::ManualClock)).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Draws jitter and the throttle's coin from `random`.
    pub fn random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_out_of_range_are_refused() {
        let p = Policy::default;
        let s = Duration::from_secs;
        assert!(p().backoff(Duration::ZERO, s(1)).is_err());
        assert!(p().backoff(s(2), s(1)).is_err());
        assert!(p().backoff(s(1), s(100_000)).is_err());
        assert!(p().max_wait(Duration::MAX).is_err());
        assert!(p().retry_budget(101, 0, s(1)).is_err());
        assert!(p().retry_budget(10, 0, Duration::ZERO).is_err());
        assert!(p().adaptive_throttle(0.5, s(60)).is_err());
        assert!(p().adaptive_throttle(f64::NAN, s(60)).is_err());
        assert!(p().adaptive_throttle(f64::INFINITY, s(60)).is_err());
        assert!(p().slow_down_below(Some(1.5)).is_err());
        assert!(p().slow_down_below(Some(f64::NAN)).is_err());
        assert!(
            p().backoff(s(1), s(1))
                .and_then(|p| p.adaptive_throttle(2.0, s(120)))
                .is_ok()
        );
    }
}
