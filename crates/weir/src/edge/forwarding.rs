//! The forwarding headers sent on: what the app behind the gateway reads about where a
//! request came from is rewritten from the client address weir keyed.

use std::fmt::Write;
use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri};

use crate::request::{ClientAddress, ForwardedHeader, push_ip};

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static FORWARDED: HeaderName = HeaderName::from_static("forwarded");
/// Headers only a trusted proxy may set; dropped when the peer is not one.
static PROXY_ONLY: [HeaderName; 3] = [
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-prefix"),
];

/// Replaces the forwarding headers of a request about to be forwarded with what weir
/// decided: the app reads the client weir keyed, whichever header it reads.
///
/// - `X-Forwarded-For`: the client, the trusted hops, the peer (`client, hop...,
///   peer`); from an untrusted peer just the peer. Entries left of the client (which
///   anyone could have written) are dropped, and so are the lines the peer sent.
/// - `Forwarded`: the same chain, each hop `for=...`, this hop ending in
///   `;proto=http` (`https` when the client came over TLS, `tls`); when trusted proxies write `Forwarded`, their elements are kept
///   as written from the client's on (their `proto`, `host`...), this hop appended.
/// - `X-Real-IP`: the client.
/// - `X-Forwarded-Proto`: a trusted peer's single `http` or `https` is kept, else
///   how the client came to weir: `https` over TLS, else `http`.
/// - `X-Forwarded-Host`, `-Port`, `-Prefix`: kept from a trusted peer, dropped from
///   any other.
pub(crate) fn write_forwarding(
    address: &ClientAddress,
    headers: &mut HeaderMap,
    header: ForwardedHeader,
    tls: bool,
) {
    let scheme = if tls { "https" } else { "http" };
    // The chain, client first: one pass per header, written into one string each
    // (this runs for every forwarded request).
    let client = (address.ip != address.peer || !address.hops.is_empty()).then_some(address.ip);
    let chain = || client.into_iter().chain(address.hops.iter().copied());

    let mut xff = String::with_capacity(48);
    for ip in chain() {
        push_ip(&mut xff, ip);
        xff.push_str(", ");
    }
    push_ip(&mut xff, address.peer);
    insert(headers, &X_FORWARDED_FOR, xff);

    let mut forwarded = String::with_capacity(64);
    if address.peer_trusted
        && header == ForwardedHeader::Forwarded
        && !address.forwarded_elements().is_empty()
    {
        for element in address.forwarded_elements() {
            forwarded.push_str(element);
            forwarded.push_str(", ");
        }
    } else {
        for ip in chain() {
            write_forwarded_node(&mut forwarded, ip);
            forwarded.push_str(", ");
        }
    }
    write_forwarded_node(&mut forwarded, address.peer);
    forwarded.push_str(";proto=");
    forwarded.push_str(scheme);
    insert(headers, &FORWARDED, forwarded);
    let mut real = String::with_capacity(40);
    push_ip(&mut real, address.ip);
    insert(headers, &X_REAL_IP, real);

    let proto = if address.peer_trusted {
        let mut lines = headers.get_all(&X_FORWARDED_PROTO).iter();
        match (lines.next(), lines.next()) {
            (Some(v), None) if v == "https" || v == "http" => v.clone(),
            _ => HeaderValue::from_static(scheme),
        }
    } else {
        HeaderValue::from_static(scheme)
    };
    headers.insert(X_FORWARDED_PROTO.clone(), proto);
    if !address.peer_trusted {
        for name in &PROXY_ONLY {
            headers.remove(name);
        }
    }
    drop_underscored(headers);
}

/// Removes the underscore spellings of the forwarding headers (`X_Forwarded_For`):
/// CGI and WSGI servers give apps both spellings under one name, so a client's would
/// stand beside what weir wrote. Most requests have no `_` in any name: one scan.
fn drop_underscored(headers: &mut HeaderMap) {
    if !headers.keys().any(|name| name.as_str().contains('_')) {
        return;
    }
    let forwarding = |name: &HeaderName| {
        let dashed = name.as_str().replace('_', "-");
        dashed.starts_with("x-forwarded-") || dashed == "forwarded" || dashed == "x-real-ip"
    };
    let underscored: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().contains('_') && forwarding(name))
        .cloned()
        .collect();
    for name in underscored {
        headers.remove(name);
    }
}

/// The `Host` to give the app for a request whose absolute-form target names its host
/// (`GET http://api.example.com:8080/x` without a `Host` line): the target's host and
/// port as sent, without any user information. `None` for other targets.
pub(crate) fn host_of_target(target: &Uri) -> Option<HeaderValue> {
    let authority = target.authority()?;
    let host = match authority.port() {
        Some(port) => format!("{}:{port}", authority.host()),
        None => authority.host().to_owned(),
    };
    HeaderValue::try_from(host).ok()
}

/// Appends a `Forwarded` node for `ip`: `for=192.0.2.1`, or `for="[2001:db8::1]"`.
fn write_forwarded_node(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(_) => {
            out.push_str("for=");
            push_ip(out, ip);
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "for=\"[{v6}]\"");
        }
    }
}

fn insert(headers: &mut HeaderMap, name: &HeaderName, value: String) {
    // Addresses, `for=`, `;`, `,`, quotes and spaces: always a valid header value.
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.insert(name.clone(), value);
    }
}

#[cfg(test)]
mod tests;
