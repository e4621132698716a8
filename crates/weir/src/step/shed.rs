//! Load shedding (the gateway's `shedding` section): before a request goes on, the shedder
//! (`weir_core::Shedder`, behind a lock shared by the server threads) admits it by
//! its route's priority or the gateway answers 503 `/problems/overloaded` with
//! `Retry-After: 1`; when the upstream's answer starts, the request's latency and
//! outcome move the limit. A request abandoned before then (its client went away)
//! is finished as cancelled, so it never stays counted in flight.

use std::time::Duration;

use parking_lot::Mutex;
use weir_core::{Outcome, Priority, Shedder, Ticket};

use crate::config::SheddingConfig;
use crate::metrics::EngineMetrics;

/// The shedder of one gateway, and its routes' priorities.
#[derive(Debug)]
pub(super) struct Shedding {
    config: SheddingConfig,
    shedder: Mutex<Shedder>,
}

/// A request admitted to the upstream; finished as cancelled if dropped unfinished.
#[derive(Debug)]
pub(super) struct Admitted<'a> {
    shedding: &'a Shedding,
    ticket: Option<Ticket>,
}

impl Shedding {
    /// Shedding as `config` says.
    pub(super) fn new(config: SheddingConfig) -> Self {
        let shedder = Mutex::new(Shedder::new(config.limits));
        Self { config, shedder }
    }

    /// The limit now.
    pub(super) fn limit(&self) -> u32 {
        self.shedder.lock().limit()
    }

    /// Admits a request for `path` (the canonical path), or `None` to shed it (counted
    /// in `metrics`). Its priority: its shedding route's, else `by_rule` (the first
    /// rule that applies and gives one: its name and priority), else default.
    pub(super) fn admit(
        &self,
        path: &str,
        by_rule: Option<(&str, Priority)>,
        metrics: &EngineMetrics,
    ) -> Option<Admitted<'_>> {
        let route = self.config.route(path).or(by_rule);
        let priority = route.map_or(Priority::Default, |(_, p)| p);
        let Some(ticket) = self.shedder.lock().admit(priority) else {
            metrics.shed(route.map(|(prefix, _)| prefix), priority);
            return None;
        };
        Some(Admitted {
            shedding: self,
            ticket: Some(ticket),
        })
    }
}

impl Admitted<'_> {
    /// The upstream's answer started after `latency` with `status` (weir's own 502 or
    /// 504 when it failed or timed out, an overloaded upstream's 503: overload); the
    /// limit it leaves is set in `metrics`.
    pub(super) fn finish(mut self, latency: Duration, status: u16, metrics: &EngineMetrics) {
        let outcome = if matches!(status, 502..=504) {
            Outcome::Overloaded
        } else {
            Outcome::Answered
        };
        if let Some(ticket) = self.ticket.take() {
            let mut shedder = self.shedding.shedder.lock();
            shedder.finish(ticket, latency, outcome);
            metrics.shed_limit(shedder.limit());
        }
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.shedding
                .shedder
                .lock()
                .finish(ticket, Duration::ZERO, Outcome::Cancelled);
        }
    }
}
