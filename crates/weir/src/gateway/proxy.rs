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
use crate::edge::Problem;
use crate::edge::ratelimit::append_list;

/// Headers that describe one connection (or how the message is framed on it), not the
/// message: never forwarded.
static HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one pass over the names, without hashing, finds out.
    if !headers.keys().any(|name| HOP_BY_HOP.contains(name)) {
        return;
    }
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

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static FORWARDED: HeaderName = HeaderName::from_static("forwarded");

/// `X-Forwarded-For` (appended), `X-Forwarded-Proto` and `Forwarded` (appended).
fn add_forwarding(headers: &mut HeaderMap, peer: IpAddr) {
    append_list(headers, &X_FORWARDED_FOR, peer.to_string());
    let forwarded = match peer {
        IpAddr::V4(ip) => format!("for={ip};proto=http"),
        IpAddr::V6(ip) => format!("for=\"[{ip}]\";proto=http"),
    };
    append_list(headers, &FORWARDED, forwarded);
    headers.insert(X_FORWARDED_PROTO.clone(), HeaderValue::from_static("http"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_stripped() {
        let mut map = headers(&[
            ("connection", "keep-alive, X-Secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("transfer-encoding", "chunked"),
            ("proxy-authorization", "Basic eA=="),
            ("accept", "*/*"),
            ("set-cookie", "a=1"),
        ]);
        strip_hop_by_hop(&mut map);
        let mut left: Vec<&str> = map.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "set-cookie"]);

        // Without a Connection header too.
        let mut map = headers(&[("accept", "*/*"), ("transfer-encoding", "chunked")]);
        strip_hop_by_hop(&mut map);
        assert_eq!(map, headers(&[("accept", "*/*")]));
    }

    #[test]
    fn messages_without_hop_by_hop_headers_are_left_as_they_are() {
        let mut map = headers(&[("accept", "*/*"), ("x-api-key", "k"), ("x-api-key", "k2")]);
        let before = map.clone();
        strip_hop_by_hop(&mut map);
        assert_eq!(map, before);
    }

    #[test]
    fn forwarding_headers_append_this_hop_to_every_earlier_line() {
        let mut map = headers(&[
            ("x-forwarded-for", "203.0.113.1"),
            ("x-forwarded-for", "198.51.100.2, 192.0.2.3"),
            ("x-forwarded-proto", "https"),
        ]);
        add_forwarding(&mut map, "127.0.0.1".parse().unwrap());
        assert_eq!(
            map["x-forwarded-for"],
            "203.0.113.1, 198.51.100.2, 192.0.2.3, 127.0.0.1"
        );
        assert_eq!(map["forwarded"], "for=127.0.0.1;proto=http");
        // This hop's protocol (weir listens on plain HTTP) replaces what the client said.
        assert_eq!(map["x-forwarded-proto"], "http");
        assert_eq!(map.get_all("x-forwarded-for").iter().count(), 1);

        let mut map = headers(&[("forwarded", "for=192.0.2.60;proto=https")]);
        add_forwarding(&mut map, "::1".parse().unwrap());
        assert_eq!(
            map["forwarded"],
            "for=192.0.2.60;proto=https, for=\"[::1]\";proto=http"
        );
        assert_eq!(map["x-forwarded-for"], "::1");
    }
}
