//! `GET /openapi.json`: the OpenAPI 3.1 document of what a listener serves, put
//! together from the parts each door describes beside its handlers. Generated from
//! the code at start, so it cannot drift from the handlers it names.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use utoipa::OpenApi;

use crate::admin::AdminApi;
use crate::api::DecisionApi;
use crate::auth::AuthApi;
use crate::edge::ProblemJson;
use crate::edge::contract::problem_answers;

/// The document's frame: what weir is, and the schemas every part shares.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "weir",
        description = "weir's decision API, forward-auth door and admin API. Every error is `application/problem+json` (RFC 9457) with a stable `type`; allowed and denied answers carry the IETF RateLimit header fields.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    components(schemas(ProblemJson)),
    tags(
        (name = "decision", description = "Asking whether a request may go on."),
        (name = "forward auth", description = "The door proxies ask before they forward a request."),
        (name = "admin", description = "The admin API (the admin listener, with the admin token)."),
        (name = "operations", description = "Health, readiness and metrics."),
    )
)]
struct Frame;

/// Which parts a listener serves.
#[derive(Debug, Clone, Copy)]
pub(super) struct Parts {
    /// The admin API (the admin listener, with an `admin` section).
    pub(super) admin: bool,
    /// The forward-auth door (with an `auth` section; served on its own listener,
    /// described here so a client of the decision API finds it too).
    pub(super) auth: bool,
}

/// The document of a listener serving `parts` beside the decision API.
pub(super) fn document(parts: Parts) -> utoipa::openapi::OpenApi {
    let mut document = Frame::openapi();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    document.merge(DecisionApi::openapi());
    if parts.admin {
        document.merge(AdminApi::openapi());
    }
    if parts.auth {
        document.merge(AuthApi::openapi());
    }
    let components = document.components.get_or_insert_with(Default::default);
    components.responses.extend(problem_answers());
    document
}

/// `GET /openapi.json` serving the document of `parts`, written once.
pub(super) fn route(parts: Parts) -> Router {
    let json = bytes::Bytes::from(document(parts).to_json().unwrap_or_default());
    let answer = move || {
        let json = json.clone();
        async move { ([(header::CONTENT_TYPE, "application/json")], json).into_response() }
    };
    Router::new().route("/openapi.json", get(answer))
}
