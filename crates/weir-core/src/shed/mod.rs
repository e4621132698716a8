//! Load shedding by priority: an adaptive concurrency limit on an upstream, with
//! lower priorities shed first (issue 24). Pure: the caller hands in each request's
//! start ([`Shedder::admit`]) and end with its latency and outcome
//! ([`Shedder::finish`]); nothing here reads a clock.
//!
//! The limit follows the upstream's latency, as Netflix's Gradient2 does behind its
//! windowed sampler: once per window of requests (as many as the limit, at least
//! ten), `gradient = clamp(tolerance * baseline / recent, 0.5, 1)` with `recent` the
//! window's mean latency, and the limit moves a fifth of the way to
//! `limit * gradient + sqrt(limit)` (growing only when the window used its room). One
//! update a window, not one a request: the latency answers a change of the limit
//! only once the requests it let in have run. Three known traps of such limiters are
//! closed here:
//!
//! - **A limit that grows forever under a steady timeout**: a timed-out request's
//!   latency is the timeout, the same every time, so a latency-only limiter reads it
//!   as healthy. Here a request that ended by overload (a timeout, the upstream's own
//!   503) is never a latency sample: a window with one cuts the limit by a tenth.
//! - **A baseline that drifts up under sustained load**: a minimum or average over a
//!   window takes in the loaded latencies once the overload outlasts the window. Here
//!   the baseline learns only from requests that started while fewer than a quarter
//!   of the limit were in flight, which sustained overload does not send.
//! - **503s during re-measurement**: Vegas-style limiters (and Envoy's adaptive
//!   concurrency) drop the limit now and then to measure the unloaded latency, and
//!   shed while they do. The baseline here comes from light moments as they happen;
//!   the limit is never lowered to probe.
//!
//! Each priority may fill a share of the limit: sheddable half, default nine tenths,
//! critical all of it, so sheddable requests are shed first and critical ones always
//! keep at least a tenth of the limit to themselves.

use std::time::Duration;

/// How much a route matters when the upstream is overloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Shed last; may fill the whole limit (checkout).
    Critical,
    /// May fill nine tenths of the limit.
    Default,
    /// Shed first; may fill half the limit (analytics).
    Sheddable,
}

impl Priority {
    /// The share of the limit requests of this priority may fill, with the others.
    pub fn share(self) -> f64 {
        match self {
            Priority::Critical => 1.0,
            Priority::Default => 0.9,
            Priority::Sheddable => 0.5,
        }
    }
}

/// How a request admitted by the shedder ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream answered (whatever the status, but for overload): a latency
    /// sample.
    Answered,
    /// The upstream was overloaded: it timed out, refused the connection, or answered
    /// 503 itself. Cuts the limit.
    Overloaded,
    /// The client went away first: no signal either way.
    Cancelled,
}

/// The limits of the adaptive limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShedConfig {
    /// The limit never falls below this (at least 1).
    pub min_limit: u32,
    /// Nor rises above this.
    pub max_limit: u32,
    /// Where it starts.
    pub initial_limit: u32,
    /// How many times the baseline latency the recent latency may reach before the
    /// limit comes down (at least 1).
    pub tolerance: f64,
}

impl Default for ShedConfig {
    fn default() -> Self {
        Self {
            min_limit: 4,
            max_limit: 1000,
            initial_limit: 20,
            tolerance: 2.0,
        }
    }
}

/// A request the shedder admitted: hand it back to [`Shedder::finish`].
#[derive(Debug)]
#[must_use = "a ticket not finished stays counted in flight"]
pub struct Ticket {
    /// Whether it started while fewer than a quarter of the limit were in flight.
    light: bool,
    /// Whether it started while at least half the limit was in flight.
    busy: bool,
}

/// The adaptive limit and what is in flight under it.
#[derive(Debug, Clone)]
pub struct Shedder {
    config: ShedConfig,
    limit: f64,
    in_flight: u32,
    /// The latency of requests started under light load, smoothed (ns).
    baseline: Option<f64>,
    /// The window being gathered.
    window: Window,
}

/// What a window of finished requests saw.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    answered: u32,
    /// The answers' latencies, added up (ns).
    latency: f64,
    overloaded: u32,
    /// Whether any of its requests started with its priority's room half full.
    busy: bool,
}

/// How much of each light request's latency the baseline takes.
const BASELINE_WEIGHT: f64 = 0.1;
/// The fewest requests in a window.
const MIN_WINDOW: u32 = 10;
/// How far toward its target the limit moves on each window.
const SMOOTHING: f64 = 0.2;
/// What an overload leaves of the limit.
const BACKOFF: f64 = 0.9;

impl Shedder {
    /// A shedder at `config.initial_limit` (bounds put in order, `min_limit` at least 1,
    /// `tolerance` at least 1).
    pub fn new(config: ShedConfig) -> Self {
        let min_limit = config.min_limit.max(1);
        let max_limit = config.max_limit.max(min_limit);
        let tolerance = if config.tolerance.is_finite() {
            config.tolerance.max(1.0)
        } else {
            1.0
        };
        let config = ShedConfig {
            min_limit,
            max_limit,
            initial_limit: config.initial_limit.clamp(min_limit, max_limit),
            tolerance,
        };
        Self {
            limit: f64::from(config.initial_limit),
            config,
            in_flight: 0,
            baseline: None,
            window: Window::default(),
        }
    }

    /// The current limit on requests in flight.
    pub fn limit(&self) -> u32 {
        self.limit.round() as u32
    }

    /// The requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Admits a request of `priority` (`Some`, counted in flight until finished), or
    /// sheds it (`None`): when its priority's share of the limit is full.
    pub fn admit(&mut self, priority: Priority) -> Option<Ticket> {
        let room = (self.limit * priority.share()).floor().max(1.0);
        if f64::from(self.in_flight) >= room {
            return None;
        }
        let ticket = Ticket {
            light: f64::from(self.in_flight) < self.limit / 4.0,
            busy: f64::from(self.in_flight + 1) >= room / 2.0,
        };
        self.in_flight += 1;
        Some(ticket)
    }

    /// A request admitted with `ticket` ended after `latency`, with `outcome`.
    pub fn finish(&mut self, ticket: Ticket, latency: Duration, outcome: Outcome) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let latency = latency.as_nanos() as f64;
        match outcome {
            Outcome::Cancelled => return,
            Outcome::Overloaded => self.window.overloaded += 1,
            Outcome::Answered => {
                if ticket.light {
                    let old = self.baseline.unwrap_or(latency);
                    self.baseline = Some(old + BASELINE_WEIGHT * (latency - old));
                }
                self.window.answered += 1;
                self.window.latency += latency;
            }
        }
        self.window.busy |= ticket.busy;
        let size = self.window.answered + self.window.overloaded;
        if f64::from(size) >= self.limit.max(f64::from(MIN_WINDOW)) {
            let window = std::mem::take(&mut self.window);
            self.close(window);
        }
    }

    /// Moves the limit once for a window.
    fn close(&mut self, window: Window) {
        if window.overloaded > 0 {
            self.set(self.limit * BACKOFF);
            return;
        }
        let Some(baseline) = self.baseline else {
            return;
        };
        let recent = window.latency / f64::from(window.answered.max(1));
        if recent <= 0.0 {
            return;
        }
        let gradient = (self.config.tolerance * baseline / recent).clamp(0.5, 1.0);
        let target = if gradient < 1.0 {
            self.limit * gradient
        } else if window.busy {
            self.limit + self.limit.sqrt()
        } else {
            // An unused limit proves nothing.
            return;
        };
        self.set(self.limit + SMOOTHING * (target - self.limit));
    }

    fn set(&mut self, limit: f64) {
        self.limit = limit.clamp(
            f64::from(self.config.min_limit),
            f64::from(self.config.max_limit),
        );
    }
}

#[cfg(test)]
mod tests;
