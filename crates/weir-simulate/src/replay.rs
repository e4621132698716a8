//! Replays traffic against every rule and collects the reports.

use super::clients::Clients;
use super::progress::{LONG_REPLAY, Progress};
use super::report::{Outcome, Series};
use super::rules::Rule;
use super::run::Run;
use super::trace::Trace;

/// The most buckets of time in the series kept for the plot (their width is the
/// narrowest round duration within this).
const BUCKETS: u64 = 200;

/// Replayed requests between two updates of the progress bar.
const BATCH: usize = 1 << 16;

/// What is sent to the rules.
#[derive(Debug, Clone)]
pub enum Traffic {
    /// Requests fixed in advance (a trace, an access log, an open-loop pattern): every
    /// rule sees the same.
    Trace(Trace),
    /// Clients that retry denied requests: what they send depends on the rule.
    Clients(Clients),
}

impl From<Trace> for Traffic {
    fn from(trace: Trace) -> Self {
        Traffic::Trace(trace)
    }
}

/// Runs `traffic` against each rule with weir's algorithms, each rule on its own
/// (its own states, starting full), on the traffic's virtual clock.
pub fn simulate(rules: &[Rule], traffic: &Traffic, progress: &Progress) -> Outcome {
    match traffic {
        Traffic::Trace(trace) => {
            let events = trace.events();
            let (start, end) = trace.span();
            let total = events.len() as u64 * rules.len() as u64;
            let bar = progress.bar("replaying", total, total >= LONG_REPLAY);
            let reports = rules
                .iter()
                .map(|rule| {
                    // The plot's buckets cover the requests, not the quiet before
                    // them (a pattern starts at 0, a boundary burst at its end).
                    let first = events.first().map_or(start, |e| e.at);
                    let series = Series::new(first, end, BUCKETS);
                    let keys = trace.key_count();
                    let mut run = Run::new(&rule.name, rule.policy, keys, keys, series);
                    for batch in events.chunks(BATCH) {
                        for event in batch {
                            run.attempt(event.at, event.key, event.key, u64::from(event.cost));
                        }
                        bar.advance(batch.len() as u64);
                    }
                    run.finish(|key| trace.key_name(key))
                })
                .collect();
            bar.finish();
            Outcome {
                start,
                rules: reports,
                demand: None,
            }
        }
        Traffic::Clients(clients) => Outcome {
            start: 0,
            rules: rules
                .iter()
                // Nothing is sent at or after the end.
                .map(|rule| {
                    let last = clients.duration.saturating_sub(1);
                    clients.run(rule, Series::new(0, last, BUCKETS))
                })
                .collect(),
            demand: Some(clients.demand()),
        },
    }
}
