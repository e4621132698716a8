//! Named traffic patterns, made on the virtual clock from time 0 (the Unix epoch, so
//! every window boundary of a period falls on a multiple of it).
//!
//! Three are fixed in advance (the same requests for every rule); the two retry
//! patterns are clients that react to each rule's answers (see `clients.rs`).

use std::time::Duration;

use super::clients::{Clients, Retry};
use super::error::SimulateError;
use super::replay::Traffic;
use super::rules::Rule;
use super::trace::Builder;

/// The most requests a fixed pattern may make (they are held in memory).
const MAX_REQUESTS: u64 = 100_000_000;

/// A named traffic pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pattern {
    /// `--clients` keys (`client-0`, ...) sending `--rate` requests a second in total,
    /// evenly spaced and taking turns, for `--duration`.
    Steady,
    /// Each of `--clients` keys sends `--requests` requests `--gap` before a window
    /// boundary (`--boundary`, a multiple of every period) and as many again on it: the
    /// case where a fixed window lets twice its limit through.
    BoundaryBurst,
    /// One account (key `account`) hammered at `--rate` requests a second for
    /// `--duration`, whatever the answers say.
    Bot,
    /// `--clients` clients of one account (key `account`), `--rate` requests a second
    /// between them, each retrying a denied request every `--retry-delay`, ignoring
    /// `Retry-After`, until it is admitted.
    RetryStorm,
    /// The same clients, each waiting out a denial's `Retry-After` (to the
    /// millisecond, as `retry_after_ms` gives it) plus a random jitter of up to
    /// `--retry-delay` doubled at each further denial (at most 10 s), then retrying.
    JitteredBackoff,
}

/// The parameters of the patterns; each pattern reads those its help names.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Requests a second (steady, bot: sent; retry patterns: wanted).
    pub rate: f64,
    /// How many clients (keys, for steady and boundary-burst).
    pub clients: u32,
    /// How long the traffic lasts.
    pub duration: Duration,
    /// Boundary burst: requests per key on each side of the boundary (default the
    /// largest limit among the rules).
    pub requests: Option<u64>,
    /// Boundary burst: the boundary (default the latest first boundary among the
    /// rules: the longest period, or a calendar's first window end in its time zone).
    pub boundary: Option<Duration>,
    /// Boundary burst: how long before the boundary the first half is sent.
    pub gap: Duration,
    /// Retry storm: the wait between attempts; jittered backoff: the first jitter's
    /// bound.
    pub retry_delay: Duration,
    /// The seed of the jitter: the same seed replays the same run.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            rate: 10.0,
            clients: 1,
            duration: Duration::from_secs(600),
            requests: None,
            boundary: None,
            gap: Duration::from_millis(100),
            retry_delay: Duration::from_millis(100),
            seed: 1,
        }
    }
}

impl Pattern {
    /// The traffic of this pattern with `params`, for `rules` (which set the boundary
    /// burst's defaults).
    pub fn traffic(self, params: &Params, rules: &[Rule]) -> Result<Traffic, SimulateError> {
        let usage = |m: &str| Err(SimulateError::Usage(m.to_owned()));
        if params.clients == 0 {
            return usage("--clients must be at least 1");
        }
        let duration = nanos(params.duration);
        let interval = if params.rate.is_finite() && params.rate > 0.0 {
            ((1e9 / params.rate).round() as u64).max(1)
        } else {
            return usage("--rate must be a number of requests a second above 0");
        };
        if duration == 0 && self != Pattern::BoundaryBurst {
            return usage("--duration must be above 0");
        }
        let mut builder = Builder::default();
        match self {
            Pattern::Steady | Pattern::Bot => {
                let count = duration.div_ceil(interval);
                if count > MAX_REQUESTS {
                    return Err(SimulateError::Usage(format!(
                        "the pattern would make {count} requests; at most {MAX_REQUESTS} (lower --rate or --duration)"
                    )));
                }
                let keys: Vec<u32> = if self == Pattern::Bot {
                    vec![builder.key("account")]
                } else {
                    (0..params.clients)
                        .map(|i| builder.key(&format!("client-{i}")))
                        .collect()
                };
                for k in 0..count {
                    let key = keys[(k % keys.len() as u64) as usize];
                    builder.push_numbered(k * interval, key, 1, 0);
                }
            }
            Pattern::BoundaryBurst => {
                let requests = params
                    .requests
                    .unwrap_or_else(|| rules.iter().map(|r| r.policy.limit()).max().unwrap_or(1));
                let boundary = params.boundary.map_or_else(
                    || {
                        // The first boundary after time 0: the period's, or the
                        // calendar's (in its time zone).
                        rules
                            .iter()
                            .map(|r| r.policy.window(0).end)
                            .max()
                            .unwrap_or(0)
                    },
                    nanos,
                );
                let gap = nanos(params.gap);
                if gap == 0 || gap > boundary {
                    return usage("--gap must be above 0 and at most --boundary");
                }
                if requests.saturating_mul(2 * u64::from(params.clients)) > MAX_REQUESTS {
                    return usage("--requests times --clients is too large");
                }
                for at in [boundary - gap, boundary] {
                    for i in 0..params.clients {
                        let key = builder.key(&format!("client-{i}"));
                        for _ in 0..requests {
                            builder.push_numbered(at, key, 1, 0);
                        }
                    }
                }
            }
            Pattern::RetryStorm | Pattern::JitteredBackoff => {
                let retry_delay = nanos(params.retry_delay);
                if retry_delay == 0 {
                    return usage("--retry-delay must be above 0");
                }
                let retry = if self == Pattern::RetryStorm {
                    Retry::Storm { every: retry_delay }
                } else {
                    Retry::Backoff {
                        base: retry_delay,
                        cap: 10_000_000_000,
                    }
                };
                return Ok(Traffic::Clients(Clients {
                    retry,
                    clients: params.clients,
                    offset: interval,
                    interval: interval.saturating_mul(u64::from(params.clients)),
                    duration,
                    seed: params.seed,
                }));
            }
        }
        Ok(Traffic::Trace(builder.finish()))
    }
}

/// A duration in nanoseconds, saturating (beyond 584 years).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
