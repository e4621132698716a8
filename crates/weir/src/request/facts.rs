//! What the engine knows of a request: everything a rule may match or key on, read once
//! by the front door that received it.

use std::net::IpAddr;

use axum::http::{HeaderMap, Method};

/// A request as the engine decides on it.
///
/// The gateway reads these from the request it proxies; `POST /v1/decide` takes them
/// from a service that received the request itself. Either way the engine decides on
/// these facts alone, so both reach the same verdict for the same request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    /// The request's method.
    pub method: &'a Method,
    /// The request's path, canonical ([`crate::request::canonical_path`]), without the
    /// query.
    pub path: &'a str,
    /// The query, as sent (`None`: the target had no `?`).
    pub query: Option<&'a str>,
    /// The host it was sent to, without port, lowercase (`None`: the request named none).
    pub host: Option<&'a str>,
    /// The request's headers.
    pub headers: &'a HeaderMap,
    /// The client's address (behind trusted proxies, the one they report).
    pub client_ip: IpAddr,
    /// Whether the request came from a trusted proxy, whose headers (a plan set by an
    /// authentication layer) are believed.
    pub trusted_peer: bool,
    /// The body, when a rule that applies keys on a body field.
    pub body: Option<&'a [u8]>,
}
