//! The door's answers: allowed (200 with the RateLimit fields, and a reservation for
//! the app to settle), denied (the configured status with what the gateway's 429
//! carries), and the step's other stops as they are.

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::config::{Convention, Reservations};
use crate::engine::Engine;
use crate::step::Unsettled;

/// The header the allowed answer carries a reservation's id in, for the proxy to pass
/// upstream (overwriting any a client sent) and the app to settle with `/v1/settle`.
static WEIR_RESERVATION: HeaderName = HeaderName::from_static("weir-reservation");

/// Envoy's ext_authz drops the request headers an allowed answer names here before the
/// request goes upstream: a client's own `Weir-Reservation` when weir sends none (Envoy
/// overwrites it only with one weir sends).
static ENVOY_HEADERS_TO_REMOVE: HeaderName =
    HeaderName::from_static("x-envoy-auth-headers-to-remove");

/// The largest problem body the door rewrites (weir's own are a few hundred bytes).
const MAX_PROBLEM_BYTES: usize = 16 * 1024;

/// 200 with the RateLimit fields and the shadow rules that would have denied; with
/// `reservations: app`, a pending settlement parked under the id sent in
/// `Weir-Reservation`. Never settled with this 200: it is not the app's answer.
pub(super) fn allowed(
    unsettled: Unsettled<'_>,
    engine: &Engine,
    reservations: Reservations,
    convention: Convention,
) -> Response {
    let mut response = StatusCode::OK.into_response();
    let settlement = unsettled.hand_over(response.headers_mut());
    if let Some(settlement) = settlement {
        match reservations {
            Reservations::App => {
                let id = engine.park(settlement).to_string();
                if let Ok(id) = HeaderValue::try_from(id) {
                    response.headers_mut().insert(WEIR_RESERVATION.clone(), id);
                }
            }
            // Unreachable with a checked configuration (such rules are refused): the
            // reservation is dropped unsettled, so kept, as an attempt with no answer.
            Reservations::None => drop(settlement),
        }
    }
    if convention == Convention::Envoy && !response.headers().contains_key(&WEIR_RESERVATION) {
        response.headers_mut().insert(
            ENVOY_HEADERS_TO_REMOVE.clone(),
            HeaderValue::from_static("weir-reservation"),
        );
    }
    response
}

/// The step's stop: a denial (429) with `denied` as its status (the problem's
/// `status` member too), with its `Retry-After`, `Retry-After-Ms` and RateLimit
/// fields; any other stop as it is.
pub(super) async fn stopped(answer: Response, denied: StatusCode) -> Response {
    if answer.status() != StatusCode::TOO_MANY_REQUESTS || denied == StatusCode::TOO_MANY_REQUESTS {
        return answer;
    }
    let (mut parts, body) = answer.into_parts();
    parts.status = denied;
    let bytes = axum::body::to_bytes(body, MAX_PROBLEM_BYTES)
        .await
        .unwrap_or_default();
    let body = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut problem) if problem.is_object() => {
            problem["status"] = denied.as_u16().into();
            serde_json::to_vec(&problem).unwrap_or_else(|_| bytes.to_vec())
        }
        _ => bytes.to_vec(),
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}
