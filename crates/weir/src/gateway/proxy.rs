//! Forwarding to the upstream: streamed bodies both ways, keep-alive connections, the
//! forwarding headers a proxy adds, and bounded waits.

use std::net::IpAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Uri, header};
use axum::response::{IntoResponse, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::Upstream;
use crate::api::Problem;

/// A pooled HTTP/1.1 client to the upstream.
pub(super) type UpstreamClient = Client<HttpConnector, Body>;

/// Idle upstream connections kept per client (one client per server thread): a burst
/// may open more, but no more than this many wait around afterwards.
const MAX_IDLE_CONNECTIONS: usize = 64;

/// How long an idle upstream connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A client with the upstream's connect timeout; connections are kept alive and reused.
pub(super) fn client(upstream: &Upstream) -> UpstreamClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(upstream.connect_timeout));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .build(connector)
}

/// Headers that describe one connection, not the message: never forwarded.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers the Connection header names are hop-by-hop too.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&named) {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// Sends the request to the upstream and returns its answer (or a 502/504 problem).
pub(super) async fn forward(
    client: &UpstreamClient,
    upstream: &Upstream,
    mut parts: Parts,
    body: Body,
    peer: IpAddr,
) -> Response {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut uri = upstream.base.clone().into_parts();
    uri.path_and_query = path.parse().ok();
    parts.uri = match Uri::from_parts(uri) {
        Ok(uri) => uri,
        Err(_) => {
            return Problem::invalid_request("the request target cannot be forwarded")
                .into_response();
        }
    };
    strip_hop_by_hop(&mut parts.headers);
    add_forwarding(&mut parts.headers, peer);
    let request = Request::from_parts(parts, body);
    match tokio::time::timeout(upstream.timeout, client.request(request)).await {
        Err(_) => Problem::gateway_timeout(format!(
            "the upstream did not answer within {:?}",
            upstream.timeout
        ))
        .into_response(),
        Ok(Err(error)) => {
            tracing::warn!(%error, "upstream request failed");
            Problem::bad_gateway("the upstream could not be reached").into_response()
        }
        Ok(Ok(response)) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Body::new(body))
        }
    }
}

/// `X-Forwarded-For` (appended), `X-Forwarded-Proto` and `Forwarded` (appended).
fn add_forwarding(headers: &mut HeaderMap, peer: IpAddr) {
    // Every earlier line of the header, then this hop.
    let appended = |name: &str, item: String| {
        let mut items: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.trim().is_empty())
            .collect();
        items.push(&item);
        HeaderValue::try_from(items.join(", ")).ok()
    };
    let xff = appended("x-forwarded-for", peer.to_string());
    let node = match peer {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("\"[{ip}]\""),
    };
    let forwarded = appended("forwarded", format!("for={node};proto=http"));
    for (name, value) in [("x-forwarded-for", xff), ("forwarded", forwarded)] {
        if let Some(value) = value {
            headers.insert(name, value);
        }
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
}
