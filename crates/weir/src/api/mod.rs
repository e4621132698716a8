//! The HTTP front door of the decision API, and the operational endpoints.
//!
//! [`router`] builds the whole service as an axum `Router`, so tests can call it without
//! a socket and `weir serve` can put it on one.

mod check;
mod decide;

use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::edge::{self, Problem, ProblemJson};
use crate::engine::Engine;
use crate::reloadable::Reloadable;

/// The service: `POST /v1/check` (one rule), `POST /v1/decide` and `POST /v1/settle`
/// (a request's facts, decided as the gateway would), `GET /healthz`, `GET /readyz`,
/// `GET /metrics` (Prometheus), and problem+json for anything else.
pub fn router(engine: Reloadable<Engine>) -> Router {
    Router::new()
        .route("/v1/check", post(check::check))
        .route("/v1/decide", post(decide::decide))
        .route("/v1/settle", post(decide::settle))
        .route("/healthz", get(healthz))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .fallback(|uri: Uri| async move { Problem::not_found(uri.path()).into_response() })
        .method_not_allowed_fallback(|| async { Problem::method_not_allowed().into_response() })
        .with_state(engine)
}

/// How long a request's body may take to arrive after its head: a client announcing a
/// body and sending none (or `Expect: 100-continue` and nothing after) would otherwise
/// hold its connection, and a listener's slot, for as long as it likes.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// A request's body of at most `limit` bytes, or the problem to answer: 413 when it is
/// larger (or cannot be read), 408 when it is not in within [`BODY_TIMEOUT`]. A body
/// that came with its head is read without a timer.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, Problem> {
    edge::to_bytes_within(body, limit, BODY_TIMEOUT)
        .await
        .ok_or_else(|| Problem::body_timeout(BODY_TIMEOUT))?
        .map_err(|_| Problem::body_too_large(limit))
}

/// The decision API's part of the OpenAPI document: the operations above.
#[derive(utoipa::OpenApi)]
#[openapi(paths(check::check, decide::decide, decide::settle, healthz, ready, metrics))]
pub(crate) struct DecisionApi;

/// Whether the process is up (it answers `ok`; nothing else is checked).
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is up.", body = String, content_type = "text/plain")))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// Every metric in the OpenMetrics text format.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "The metrics (OpenMetrics text).", body = String,
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8")))]
async fn metrics(State(engine): State<Reloadable<Engine>>) -> Response {
    let text = engine.current().metrics().metrics().encode();
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
}

/// 200 when the store is answering, else 503 (weir still serves, under
/// each rule's failure policy, but its limits are not shared right now). For Redis,
/// what the store's health loop last saw and the circuit breaker's state: right within
/// about a second with or without traffic (see `weir_store::StoreHealth`).
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "The store is answering.", body = String, content_type = "text/plain"),
        (status = 503, description = "The store is not answering: rules follow their failure policy.", body = ProblemJson, content_type = "application/problem+json"),
    ))]
async fn ready(State(engine): State<Reloadable<Engine>>) -> Response {
    if engine.current().store().is_ready() {
        "ready\n".into_response()
    } else {
        Problem::not_ready().into_response()
    }
}
