//! The forward-auth door: `/v1/auth`, which a proxy already at the edge (nginx
//! `auth_request`, ingress-nginx `auth-url`, Caddy `forward_auth`, Traefik
//! `ForwardAuth`, Envoy `ext_authz`) asks before it forwards a request.
//!
//! ```text
//! caller outside auth.trusted_proxies                          -> 403, nothing decided
//! the original request, from the convention's headers         -> 400 naming a missing
//!   (original.rs)                                                or duplicated one
//! the one request step (no body reader: a body rule is 500)   -> its stops as they are,
//!                                                                a denial with denied_status
//! allowed                                                      -> 200 + RateLimit fields
//!                                                                (+ Weir-Reservation)
//! ```
//!
//! The door answers for the app without calling it, so it never settles: a settlement
//! (rules counted by outcome, costs stated by the answer) is parked for the app to
//! settle with `/v1/settle` (`auth.reservations: app`; the configuration refuses such
//! rules otherwise), as `/v1/decide` parks its own.

mod answer;
mod original;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderName, Request};
use axum::response::{IntoResponse, Response};

use crate::config::{AuthConfig, Convention};
use crate::edge::contract::{InvalidRequest, RateLimited, StoreUnavailable};
use crate::edge::{Problem, ProblemJson};
use crate::engine::Engine;
use crate::metrics::Door;
use crate::reloadable::Reloadable;
use crate::request::{ClientIpConfig, ForwardedHeader, canonical_ip};
use crate::step::{GoOn, RequestStep, Step};

/// The forward-auth door of one engine: replaced whole by a reload.
pub(crate) struct AuthDoor {
    config: AuthConfig,
    engine: Arc<Engine>,
    /// The request step, reading the client from `X-Forwarded-For` past the door's
    /// trusted proxies (and the `client_ip` section's), with no body reader.
    step: RequestStep,
    /// The headers callers are identified by (`convention: envoy`: a value Envoy joined
    /// from lines sent more than once is refused, never read as one key).
    identity_headers: Vec<HeaderName>,
}

impl std::fmt::Debug for AuthDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthDoor")
            .field("convention", &self.config.convention)
            .finish_non_exhaustive()
    }
}

impl AuthDoor {
    /// The door of `config`, deciding on `engine`. The client's address is read from
    /// the `X-Forwarded-For` the calling proxy wrote, right to left past the
    /// `client_ip` section's trusted proxies (the hops in front of the proxy), keyed by
    /// its IPv6 prefix: the gateway's reading. The door's own callers are believed but
    /// never skipped as hops: a calling proxy is not in the header it writes, and a
    /// client sharing a caller's address would otherwise skip past the address the
    /// proxy appended for it to one it wrote itself.
    pub(crate) fn new(config: AuthConfig, client_ip: &ClientIpConfig, engine: Arc<Engine>) -> Self {
        let reading = ClientIpConfig {
            trusted_proxies: client_ip.trusted_proxies.clone(),
            header: ForwardedHeader::XForwardedFor,
            ipv6_prefix: client_ip.ipv6_prefix,
            callers: config.trusted_proxies.clone(),
        };
        Self {
            step: RequestStep::without_bodies(reading),
            identity_headers: engine.identity_headers(),
            config,
            engine,
        }
    }

    /// Whether `peer` may call the door.
    fn trusts(&self, peer: IpAddr) -> bool {
        let peer = canonical_ip(peer);
        self.config
            .trusted_proxies
            .iter()
            .any(|net| net.contains(&peer))
    }

    /// The door's answer to `request`, which came from `peer`.
    async fn answer(&self, peer: IpAddr, request: Request<Body>) -> Response {
        if !self.trusts(peer) {
            return Problem::untrusted_caller().into_response();
        }
        let original = match original::rebuild(&self.config, request) {
            Ok(original) => original,
            Err(problem) => return problem.into_response(),
        };
        if self.config.convention == Convention::Envoy
            && let Some(joined) = original::joined(original.headers(), &self.identity_headers)
        {
            return joined.into_response();
        }
        match self.step.run(&self.engine, peer, original).await.0 {
            Step::Stop(answer) => answer::stopped(answer, self.config.denied_status).await,
            Step::GoOn(GoOn { unsettled, .. }) => answer::allowed(
                unsettled,
                &self.engine,
                self.config.reservations,
                self.config.convention,
            ),
        }
    }
}

/// The door as an axum router answering every method and path on its listener
/// (`weir serve --auth-listen`): the door serving now, from the peer axum's
/// `ConnectInfo` gives (a reload replaces the door for the requests after it).
pub(crate) fn router(door: Reloadable<AuthDoor>) -> Router {
    Router::new().fallback(handle).with_state(door)
}

/// The forward-auth door's part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(handle), modifiers(&OperationPerMethod))]
pub(crate) struct AuthApi;

/// Names each method's operation on `/v1/auth` apart (`auth_get`, `auth_post`...):
/// the path macro gives them all the handler's name, and an operation id is unique.
struct OperationPerMethod;

impl utoipa::Modify for OperationPerMethod {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                ("get", &mut item.get),
                ("head", &mut item.head),
                ("post", &mut item.post),
                ("put", &mut item.put),
                ("patch", &mut item.patch),
                ("delete", &mut item.delete),
                ("options", &mut item.options),
                ("trace", &mut item.trace),
            ];
            for (method, operation) in operations {
                if let Some(operation) = operation {
                    operation.operation_id = Some(format!("auth_{method}"));
                }
            }
        }
    }
}

/// Decides the request a proxy is about to forward, read from the headers of the
/// configured `auth.convention`; any method. Served on `--auth-listen` only, to callers
/// in `auth.trusted_proxies`. With `convention: envoy` the original path follows the
/// configured `path_prefix` (`/v1/auth/<original path>`).
#[utoipa::path(method(get, head, post, put, patch, delete, options, trace), path = "/v1/auth", tag = "forward auth",
    servers((url = "http://{auth_listen}", description = "The forward-auth listener (`weir serve --auth-listen`)",
        variables(("auth_listen" = (default = "127.0.0.1:8082", description = "Its address"))))),
    params(
        ("X-Forwarded-For" = String, Header, description = "The client's address as the proxy appended it (every convention)."),
        ("X-Forwarded-Method" = Option<String>, Header, description = "`convention: forwarded`: the original method."),
        ("X-Forwarded-Proto" = Option<String>, Header, description = "`convention: forwarded`: the original scheme."),
        ("X-Forwarded-Host" = Option<String>, Header, description = "`convention: forwarded`: the original host."),
        ("X-Forwarded-Uri" = Option<String>, Header, description = "`convention: forwarded`: the original target."),
        ("X-Original-Method" = Option<String>, Header, description = "`convention: original`: the original method."),
        ("X-Original-URI" = Option<String>, Header, description = "`convention: original`: the original target (the host from `Host`)."),
        ("X-Original-URL" = Option<String>, Header, description = "`convention: original` (ingress-nginx): the original absolute URL."),
    ),
    responses(
        (status = 200, description = "Allowed: copy the RateLimit fields onto the answer; pass `Weir-Reservation` upstream (overwriting any the client sent) for the app to settle with `/v1/settle`.",
            headers(
                ("RateLimit-Policy" = String), ("RateLimit" = String),
                ("Weir-Reservation" = String, description = "With `reservations: app`, when a rule is settled by the app."),
            )),
        (status = 429, response = RateLimited),
        (status = 400, response = InvalidRequest),
        (status = 403, description = "The caller is not in `auth.trusted_proxies` (nothing decided), or a denial when `auth.denied_status` is 403 (nginx).", body = ProblemJson, content_type = "application/problem+json"),
        (status = 503, response = StoreUnavailable),
    ))]
async fn handle(
    State(door): State<Reloadable<AuthDoor>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request<Body>,
) -> Response {
    let door = door.current();
    let response = door.answer(peer.ip(), request).await;
    door.engine
        .metrics()
        .door_answered(Door::Auth, response.status().as_u16());
    response
}
