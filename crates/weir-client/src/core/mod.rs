//! The policy core both doors share: for each request, whether it may go now (the
//! throttle, the pacing), and after each attempt, whether and how long to wait before
//! another (`Retry-After`, RateLimit `t`, backoff, the budget). It never sends or
//! sleeps itself: each door runs the loop with its own transport, sleeping through
//! the policy's clock.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, StatusCode};
use parking_lot::Mutex;

use crate::error::Error;
use crate::headers::{exhausted_reset, pacing, quotas, retry_after};
use crate::limits::{Budget, Pace, Throttle};
use crate::policy::Policy;
use crate::random::below;
use crate::schedule::Steps;

/// A policy and what it keeps between requests; shared by clones of a door.
#[derive(Debug)]
pub(crate) struct Core {
    policy: Policy,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    budget: Budget,
    throttle: Option<Throttle>,
    pace: Pace,
}

/// One request, as the core sees it.
#[derive(Debug)]
pub(crate) struct Target {
    /// Host and port: pacing is per server.
    pub(crate) server: String,
    /// Whether it may be sent again.
    pub(crate) repeatable: bool,
}

/// One request's course: its retries so far and its backoff steps.
#[derive(Debug)]
pub(crate) struct Call {
    core: Arc<Core>,
    target: Target,
    steps: Steps,
    attempts: u32,
}

impl Core {
    /// A core following `policy`.
    pub(crate) fn new(policy: Policy) -> Self {
        let state = State {
            budget: Budget::new(
                policy.budget_percent,
                policy.budget_reserve,
                policy.budget_window,
            ),
            throttle: policy.throttle.map(|(k, window)| Throttle::new(k, window)),
            pace: Pace::default(),
        };
        Self {
            policy,
            state: Mutex::new(state),
        }
    }

    /// The policy followed.
    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Sleeps `duration` on the policy's clock (not at all for zero).
    pub(crate) async fn sleep(&self, duration: Duration) {
        if !duration.is_zero() {
            self.policy.clock.sleep(duration).await;
        }
    }

    /// Starts a request: counted for the budget, and decided by the throttle when it
    /// is on.
    pub(crate) fn start(self: &Arc<Self>, target: Target) -> Result<Call, Error> {
        let now = self.policy.clock.now();
        {
            let mut state = self.state.lock();
            state.budget.request(now);
            if let Some(throttle) = &mut state.throttle {
                let probability = throttle.probability(now);
                if !throttle.admit(now, self.policy.random.unit()) {
                    return Err(Error::Throttled { probability });
                }
            }
        }
        Ok(Call {
            core: Arc::clone(self),
            steps: Steps::new(self.policy.base, self.policy.cap, self.policy.max_retries),
            target,
            attempts: 0,
        })
    }
}

impl Call {
    /// Before each attempt: how long to wait for the server's pacing slot.
    pub(crate) fn before_attempt(&mut self) -> Duration {
        let core = &self.core;
        let now = core.policy.clock.now();
        let mut state = core.state.lock();
        if self.attempts > 0
            && let Some(throttle) = &mut state.throttle
        {
            throttle.attempt(now);
        }
        self.attempts += 1;
        state.pace.slot(&self.target.server, now)
    }

    /// After an answer: `Some(wait)` to retry after `wait`, `None` to return it.
    pub(crate) fn answered(&mut self, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        let core = Arc::clone(&self.core);
        let policy = &core.policy;
        let now = policy.clock.now();
        let refused =
            status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE;
        let quotas = quotas(headers);
        {
            let mut state = core.state.lock();
            if let Some(below) = policy.slow_below {
                let pace = pacing(&quotas, below)
                    .map(|(interval, until)| (interval.min(policy.cap), until));
                state.pace.update(&self.target.server, now, pace);
            }
            if !refused && let Some(throttle) = &mut state.throttle {
                throttle.accepted(now);
            }
        }
        let retryable =
            refused || status == StatusCode::BAD_GATEWAY || status == StatusCode::GATEWAY_TIMEOUT;
        if !retryable {
            return None;
        }
        let asked = if refused {
            retry_after(headers, policy.clock.wall()).or_else(|| exhausted_reset(&quotas))
        } else {
            None
        };
        if asked.is_some_and(|wait| wait > policy.max_wait) {
            return None;
        }
        self.retry(asked.unwrap_or(Duration::ZERO))
    }

    /// After a transport error: `Some(wait)` to retry after `wait`, `None` to return it.
    pub(crate) fn failed(&mut self) -> Option<Duration> {
        self.retry(Duration::ZERO)
    }

    /// A retry after `asked` plus full jitter, if the request may be repeated, has
    /// retries left, and the budget allows one. The jitter is uniform below the
    /// backoff step, or below the server's wait when that is longer (up to the cap):
    /// clients refused together and told to come back in one second come back spread
    /// over the next second, not together 100 ms later.
    fn retry(&mut self, asked: Duration) -> Option<Duration> {
        if !self.target.repeatable {
            return None;
        }
        let step = self.steps.next_step()?;
        let policy = &self.core.policy;
        if !self.core.state.lock().budget.try_retry(policy.clock.now()) {
            return None;
        }
        let spread = step.max(asked.min(policy.cap));
        Some(asked.saturating_add(below(policy.random.as_ref(), spread)))
    }
}

#[cfg(test)]
mod tests;
