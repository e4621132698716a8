//! Forwarding to the upstream: streamed bodies both ways, keep-alive connections, the
//! forwarding headers a proxy adds, and bounded waits.

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Uri, header};
use axum::response::{IntoResponse, Response};

use super::Upstream;
use super::pool::UpstreamPool;
use crate::api::Problem;

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
    pool: &Arc<UpstreamPool>,
    upstream: &Upstream,
    mut parts: Parts,
    body: Body,
    peer: IpAddr,
) -> Response {
    // Origin form (`/path?query`) on the connection to the upstream; the client's Host
    // is kept, or the upstream's given when the client sent none.
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = match path.parse::<Uri>() {
        Ok(uri) => uri,
        Err(_) => {
            return Problem::invalid_request("the request target cannot be forwarded")
                .into_response();
        }
    };
    if !parts.headers.contains_key(header::HOST)
        && let Some(host) = upstream.base.authority()
        && let Ok(host) = HeaderValue::try_from(host.as_str())
    {
        parts.headers.insert(header::HOST, host);
    }
    strip_hop_by_hop(&mut parts.headers);
    add_forwarding(&mut parts.headers, peer);
    let request = Request::from_parts(parts, body);
    match tokio::time::timeout(upstream.timeout, pool.send(request)).await {
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
