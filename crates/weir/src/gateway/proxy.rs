//! Forwarding to the upstream: streamed bodies both ways, keep-alive connections,
//! hop-by-hop headers dropped, and bounded waits. (The forwarding headers the app reads
//! were written by the request step.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::uri::{self, PathAndQuery};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Uri, Version, header};
use axum::response::{IntoResponse, Response};

use super::pool::UpstreamPool;
use crate::config::Upstream;
use crate::edge::Problem;
use crate::engine::Throttle;

/// Headers that describe one connection (or how the message is framed on it), not the
/// message: never forwarded. `Trailer` is not among them (RFC 9110 6.6.2: it names the
/// trailer fields of the message, which weir passes on).
static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// The place of `name` in [`HOP_BY_HOP`]. Told by its text: a `match` is a length test
/// for most names, where comparing a name with each of the seven costs several times
/// more, on every message both ways.
fn hop_by_hop(name: &HeaderName) -> Option<usize> {
    Some(match name.as_str() {
        "connection" => 0,
        "keep-alive" => 1,
        "proxy-authenticate" => 2,
        "proxy-authorization" => 3,
        "te" => 4,
        "transfer-encoding" => 5,
        "upgrade" => 6,
        _ => return None,
    })
}

pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none, the others one or two (`Connection`): one pass over the
    // names, without hashing or allocating, finds which (a bit each), and only those
    // are removed.
    let present = headers
        .keys()
        .filter_map(hop_by_hop)
        .fold(0u8, |present, i| present | 1 << i);
    if present == 0 {
        return;
    }
    // Headers the Connection header names are hop-by-hop too (those not already
    // listed: usually none, so nothing is allocated; a listed one, `keep-alive` most
    // often, is told by its text, not parsed into a name of its own).
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|name| {
            !HOP_BY_HOP
                .iter()
                .any(|hop| hop.as_str().eq_ignore_ascii_case(name))
        })
        .filter_map(|name| HeaderName::try_from(name).ok())
        .collect();
    let listed = HOP_BY_HOP
        .iter()
        .enumerate()
        .filter(|(i, _)| present & 1 << i != 0)
        .map(|(_, name)| name);
    for name in listed.chain(&named) {
        headers.remove(name);
    }
}

/// Joins several `Cookie` lines into one, `; ` between them, as RFC 9113 8.2.3 asks of
/// a request going from HTTP/2 to HTTP/1.1 (one line, or none, stays as it is).
fn join_cookies(headers: &mut HeaderMap) {
    let mut lines = headers.get_all(header::COOKIE).iter();
    if lines.next().is_none() || lines.next().is_none() {
        return;
    }
    let joined: Vec<&[u8]> = headers
        .get_all(header::COOKIE)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    if let Ok(value) = HeaderValue::from_bytes(&joined.join(&b"; "[..])) {
        headers.insert(header::COOKIE, value);
    }
}

/// How often, at most, weir's own 502 and 504 are logged.
const FAILURES_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// weir's own 502 (the upstream could not be reached) and 504 (it did not answer in
/// time), logged with their reason at most once every 10 s: an upstream failing every
/// request must not flood the log, nor one failing now and then go unseen (a 504 on a
/// login counts as a failed attempt).
#[derive(Debug)]
pub(super) struct FailureLog {
    logged: Throttle,
    since: Instant,
}

impl FailureLog {
    pub(super) fn new() -> Self {
        Self {
            logged: Throttle::new(duration_ns(FAILURES_LOGGED_EVERY)),
            since: Instant::now(),
        }
    }

    /// Logs a failure answered `status` for `reason`, unless one was in the last 10 s.
    pub(super) fn log(&self, status: u16, reason: &dyn std::fmt::Display) {
        // Offset by a period, so that the first failure is logged.
        let now = duration_ns(self.since.elapsed() + FAILURES_LOGGED_EVERY);
        if self.logged.due(now) {
            tracing::warn!(
                status,
                %reason,
                "the upstream gave no answer; weir answered for it (logged at most every 10 s)"
            );
        }
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The target of `uri` in origin form (its path and query, else `/`): what the upstream
/// is sent. Moved out of the request's target, not written out and parsed again.
pub(super) fn origin_form(uri: Uri) -> Option<Uri> {
    let mut origin = uri::Parts::default();
    origin.path_and_query = Some(
        uri.into_parts()
            .path_and_query
            .unwrap_or_else(|| PathAndQuery::from_static("/")),
    );
    Uri::from_parts(origin).ok()
}

/// Sends the request to the upstream and returns its answer, or `Err` with weir's own
/// answer when the upstream gave none (a 502 or 504 problem, or a 400 for a target
/// that cannot be forwarded).
pub(super) async fn forward(
    pool: &Arc<UpstreamPool>,
    upstream: &Upstream,
    request: Request<Body>,
    failures: &FailureLog,
) -> Result<Response, Response> {
    let (mut parts, body) = request.into_parts();
    // Origin form (`/path?query`) on the connection to the upstream; the client's Host
    // is kept, or the upstream's given when the client sent none.
    parts.uri = match origin_form(std::mem::take(&mut parts.uri)) {
        Some(uri) => uri,
        None => {
            return Err(
                Problem::invalid_request("the request target cannot be forwarded").into_response(),
            );
        }
    };
    if !parts.headers.contains_key(header::HOST)
        && let Some(host) = upstream.base.authority()
        && let Ok(host) = HeaderValue::try_from(host.as_str())
    {
        parts.headers.insert(header::HOST, host);
    }
    strip_hop_by_hop(&mut parts.headers);
    // An HTTP/2 client's request goes on in HTTP/1.1, its cookie fields joined into
    // one line (RFC 9113 8.2.3: HTTP/2 may split them, HTTP/1.1 has one).
    parts.version = Version::HTTP_11;
    join_cookies(&mut parts.headers);
    // This hop takes trailers (a streamed answer's cost may come in one, `cost_from`),
    // and passes them on to clients that take them too; `TE` is named in `Connection`,
    // as RFC 9110 10.1.4 asks.
    parts
        .headers
        .insert(header::TE, HeaderValue::from_static("trailers"));
    parts
        .headers
        .insert(header::CONNECTION, HeaderValue::from_static("te"));
    let request = Request::from_parts(parts, body);
    match tokio::time::timeout(upstream.timeout, pool.send(request)).await {
        Err(_) => {
            let reason = format!("the upstream did not answer within {:?}", upstream.timeout);
            failures.log(504, &reason);
            Err(Problem::gateway_timeout(reason).into_response())
        }
        Ok(Err(error)) => {
            failures.log(502, &error);
            Err(Problem::bad_gateway("the upstream could not be reached").into_response())
        }
        Ok(Ok(response)) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            // A proxy answers in its own HTTP version, whatever the upstream's (RFC 9110
            // 6.2): an HTTP/1.0 upstream's answer is not an HTTP/1.0 answer to the client.
            parts.version = Version::default();
            Ok(Response::from_parts(parts, Body::new(body)))
        }
    }
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
    fn each_hop_by_hop_name_is_told_by_its_place() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop(name), Some(i), "{name}");
        }
        assert_eq!(hop_by_hop(&header::HOST), None);
        assert_eq!(hop_by_hop(&HeaderName::from_static("keep-alive-x")), None);
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
    fn an_http2_requests_cookie_fields_go_on_as_one_line() {
        let mut map = headers(&[("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")]);
        join_cookies(&mut map);
        assert_eq!(map, headers(&[("cookie", "a=1; b=2"), ("accept", "*/*")]));
        let mut one = headers(&[("cookie", "a=1")]);
        join_cookies(&mut one);
        assert_eq!(one, headers(&[("cookie", "a=1")]));
    }

    #[test]
    fn messages_without_hop_by_hop_headers_are_left_as_they_are() {
        let mut map = headers(&[("accept", "*/*"), ("x-api-key", "k"), ("x-api-key", "k2")]);
        let before = map.clone();
        strip_hop_by_hop(&mut map);
        assert_eq!(map, before);
    }
}
