//! What became of the settlements the shared store could not take when they were made
//! (the engine's owed settlements): how many are owed now, how many were given up and
//! why, how many were written late.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::Metrics;
use super::families::{OutcomeLabels, ReasonLabels};

/// Why an owed settlement was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// Pushed out by newer ones past the bound.
    Full,
    /// A try may have been written longer ago than the store remembers settlements.
    Stale,
    /// The store refused it (not an outage).
    Refused,
    /// Still owed when the instance stopped.
    Shutdown,
}

/// The owed settlements' series, resolved once: made only for an instance on a shared
/// store (on the memory store they could never move).
#[derive(Clone)]
pub(crate) struct OwedMetrics {
    owed: Gauge,
    /// By [`Dropped`], in its order.
    dropped: [Counter; 4],
    written: Counter,
    repeated: Counter,
}

impl OwedMetrics {
    pub(crate) fn new(metrics: &Metrics) -> Self {
        let f = &metrics.families;
        let dropped = |reason| {
            f.settlements_dropped
                .get_or_create_owned(&ReasonLabels { reason })
        };
        let retried = |outcome| {
            f.settlements_retried
                .get_or_create_owned(&OutcomeLabels { outcome })
        };
        Self {
            owed: f.settlements_owed.get_or_create_owned(&Vec::new()),
            dropped: [
                dropped("full"),
                dropped("stale"),
                dropped("refused"),
                dropped("shutdown"),
            ],
            written: retried("written"),
            repeated: retried("repeated"),
        }
    }

    /// How many settlements are owed now.
    pub(crate) fn owed(&self, n: usize) {
        self.owed.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts `n` settlements given up for `why`.
    pub(crate) fn dropped(&self, why: Dropped, n: u64) {
        self.dropped[why as usize].inc_by(n);
    }

    /// Counts a settlement written late: `repeated` when an earlier try had been.
    pub(crate) fn retried(&self, repeated: bool) {
        if repeated {
            self.repeated.inc();
        } else {
            self.written.inc();
        }
    }
}
