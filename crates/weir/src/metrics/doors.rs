//! The series the doors count into, beside the engine's own (an [`EngineMetrics`] is
//! resolved once per engine): the gateway's answers by route and status class, its
//! upstream's latency and requests in flight, load shedding, and the Envoy door's
//! descriptors.

use std::time::Duration;

use super::families::{DoorLabels, ShedLabels};
use super::series::{EngineMetrics, NONE};
use super::sharded::Counter;

/// The status classes counted.
pub(crate) const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// A way in to the engine, as its answers are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    /// The gateway.
    Gateway,
    /// The tower layer (in process).
    Layer,
    /// `POST /v1/check`.
    Check,
    /// `POST /v1/decide`.
    Decide,
    /// `/v1/auth`, the forward-auth door.
    Auth,
    /// Envoy's `ShouldRateLimit`, over gRPC or `POST /json`.
    Envoy,
}

impl Door {
    /// Every door, in the order their series are kept.
    pub(crate) const ALL: [Door; 6] = [
        Self::Gateway,
        Self::Layer,
        Self::Check,
        Self::Decide,
        Self::Auth,
        Self::Envoy,
    ];

    /// Its `door` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Layer => "layer",
            Self::Check => "check",
            Self::Decide => "decide",
            Self::Auth => "auth",
            Self::Envoy => "envoy",
        }
    }
}

/// The door series of `families`, per door, per status class.
pub(super) fn door_series(
    families: &super::families::Families,
) -> [[Counter; CLASSES.len()]; Door::ALL.len()] {
    Door::ALL.map(|door| {
        CLASSES.map(|status| {
            families.door_answers.get_or_create_owned(&DoorLabels {
                door: door.as_str(),
                status,
            })
        })
    })
}

/// What became of one descriptor of a `ShouldRateLimit` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvoyOutcome {
    /// Within its limit.
    Ok,
    /// Over its limit.
    OverLimit,
    /// Over its limit, in shadow mode: answered OK.
    ShadowOverLimit,
    /// `unlimited: true`.
    Unlimited,
    /// No limit matched (or it was replaced).
    NoLimit,
    /// Decided on this instance's local fallback.
    Fallback,
    /// The store could not decide.
    Unavailable,
}

impl EnvoyOutcome {
    pub(super) const ALL: [EnvoyOutcome; 7] = [
        Self::Ok,
        Self::OverLimit,
        Self::ShadowOverLimit,
        Self::Unlimited,
        Self::NoLimit,
        Self::Fallback,
        Self::Unavailable,
    ];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::OverLimit => "over_limit",
            Self::ShadowOverLimit => "over_limit_shadow",
            Self::Unlimited => "unlimited",
            Self::NoLimit => "no_limit",
            Self::Fallback => "fallback",
            Self::Unavailable => "unavailable",
        }
    }
}

impl EngineMetrics {
    /// Counts a request the gateway shed: `route` is the shedding route's path prefix
    /// (`None`: no route, a default request).
    pub(crate) fn shed(&self, route: Option<&str>, priority: weir_core::Priority) {
        let priority = match priority {
            weir_core::Priority::Critical => "critical",
            weir_core::Priority::Default => "default",
            weir_core::Priority::Sheddable => "sheddable",
        };
        let labels = ShedLabels {
            route: route.unwrap_or(NONE).to_owned(),
            priority,
        };
        self.metrics.families.shed.get_or_create(&labels).inc();
    }

    /// Sets the shedder's current limit on requests in flight.
    pub(crate) fn shed_limit(&self, limit: u32) {
        self.metrics.families.shed_limit.set(i64::from(limit));
    }

    /// Counts one descriptor of a `ShouldRateLimit` call.
    pub(crate) fn envoy_descriptor(&self, outcome: EnvoyOutcome) {
        self.envoy[outcome as usize].inc();
    }

    /// Starts counting a gateway request (in flight until its answer's headers are
    /// sent, or the client hangs up before).
    pub(crate) fn gateway_request(&self) -> GatewayRequest<'_> {
        self.metrics.families.in_flight.inc();
        GatewayRequest { metrics: self }
    }

    /// Counts an answer of `door` with `status`.
    pub(crate) fn door_answered(&self, door: Door, status: u16) {
        self.doors[door as usize][class(status)].inc();
    }

    /// Every door's answers so far (since the process started: reloads keep them).
    pub(crate) fn door_totals(&self) -> [(Door, [u64; CLASSES.len()]); Door::ALL.len()] {
        Door::ALL.map(|door| (door, self.doors[door as usize].each_ref().map(|c| c.get())))
    }

    /// Records the time the upstream took to answer.
    pub(crate) fn upstream_latency(&self, took: Duration) {
        self.metrics.families.upstream_latency.observe(took);
    }
}

/// The index of `status`'s class in [`CLASSES`] (below 100: `1xx`; above 599: `5xx`).
fn class(status: u16) -> usize {
    usize::from(status / 100).clamp(1, 5) - 1
}

/// A gateway request being answered.
pub(crate) struct GatewayRequest<'m> {
    metrics: &'m EngineMetrics,
}

impl GatewayRequest<'_> {
    /// Counts the answer: `route` is the index of the first rule whose match applied
    /// (`None`: none did), `status` the status sent.
    pub(crate) fn answered(self, route: Option<usize>, status: u16) {
        let routes = &self.metrics.gateway;
        let none = routes.len() - 1;
        let route = route.filter(|&r| r < none).unwrap_or(none);
        routes[route][class(status)].inc();
        self.metrics.door_answered(Door::Gateway, status);
    }
}

impl Drop for GatewayRequest<'_> {
    fn drop(&mut self) {
        self.metrics.metrics.families.in_flight.dec();
    }
}
