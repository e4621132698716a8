//! The HTTP gateway: weir as a reverse proxy in front of an API.
//!
//! For each request it reads the facts the engine decides on (method, path, host,
//! headers, client IP, the body when a rule keys on it), asks the engine, and either
//! answers 429 or 503 itself or forwards the request to the upstream, adds the
//! RateLimit fields to the upstream's answer, and settles the request's reservations
//! with the answer's status.

pub mod client_ip;
pub mod jwt;
mod pool;
mod proxy;
mod service;

use std::time::Duration;

use axum::http::Uri;

use self::client_ip::ClientIpConfig;
pub use self::service::{Gateway, SHADOW_HEADER, handle};

/// Where allowed requests go.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `http://host:port` of the upstream.
    pub base: Uri,
    /// The longest a connection to the upstream may take to open.
    pub connect_timeout: Duration,
    /// The longest the upstream may take to start answering.
    pub timeout: Duration,
    /// The largest request body read when a rule identifies callers by a body field.
    pub max_body_bytes: usize,
    /// The most body bytes held at once across all requests being read (each counts
    /// for its `Content-Length`, or `max_body_bytes` without one); past it, `503`.
    pub max_buffered_bytes: usize,
    /// The longest a client may take to send such a body (else `408`).
    pub body_timeout: Duration,
}

/// What the gateway needs besides the engine: where to forward, and whom to believe.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where allowed requests go.
    pub upstream: Upstream,
    /// Whom to believe about the client's address, and what to tell the upstream.
    pub client_ip: ClientIpConfig,
}
