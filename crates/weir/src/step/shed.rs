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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use axum::http::{HeaderMap, HeaderValue, Method, Uri};
    use weir_core::{ManualClock, Priority};
    use weir_store::{MemoryStore, MemoryStoreConfig};

    use crate::config::Config;
    use crate::engine::Engine;

    /// The priority the gateway gives a GET of `target` under `yaml`: its shedding
    /// route's, else the first rule's that gives one.
    fn priority_of(yaml: &str, target: &str) -> Option<Priority> {
        let config = Config::parse(yaml, Path::new("review.yaml")).unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let store = Arc::new(MemoryStore::new(
            MemoryStoreConfig::default(),
            clock.clone(),
        ));
        let engine = Engine::new(&config.engine, store, clock);
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("api.example"));
        let uri: Uri = target.parse().unwrap();
        let (head, routed) = engine.read(&Method::GET, &uri, target, &headers).unwrap();
        let shedding = config.gateway.unwrap().shedding.unwrap();
        shedding
            .route(head.path())
            .or(engine.shed_priority(&routed))
            .map(|(_, p)| p)
    }

    /// A shedding route reads a path as the rules do (`;params` stripped, case ignored): a
    /// client cannot escape a sheddable route, and take a broader rule's priority, by
    /// spelling its path another way.
    #[test]
    fn a_shedding_route_reads_the_path_as_the_rules_do() {
        let yaml = "upstream: { url: http://127.0.0.1:9 }\nshedding:\n  min_limit: 2\n  routes: [{ path_prefix: /api/export, priority: sheddable }]\nrules:\n  - { name: api, match: { path_prefix: /api, priority: critical }, algorithm: gcra, limit: 100, period: 1s }\n  - { name: export, match: { path: /api/export }, algorithm: gcra, limit: 1, period: 1s }\n";
        let config = Config::parse(yaml, Path::new("review.yaml")).unwrap();
        let export = &config.engine.routing.rules[1].route;
        // The rules: `/api;v=1/export` is the export endpoint (limited as it).
        assert!(export.matches(&Method::GET, None, "/api;v=1/export"));
        assert_eq!(priority_of(yaml, "/api/export"), Some(Priority::Sheddable));
        // Rules match case-insensitively by default (`/API/Export` is the export rule's).
        assert!(export.matches(&Method::GET, None, "/API/Export"));
        let seen: Vec<_> = ["/api;v=1/export", "/API/Export"]
            .iter()
            .map(|p| (*p, priority_of(yaml, p)))
            .collect();
        assert!(
            seen.iter().all(|(_, p)| *p == Some(Priority::Sheddable)),
            "{seen:?}"
        );
    }
}
