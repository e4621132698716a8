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
pub struct Facts<'a> {
    /// The request's method.
    pub method: &'a Method,
    /// The request's path, without the query.
    pub path: &'a str,
    /// The host it was sent to, without port, lowercase (`None`: the request named none).
    pub host: Option<&'a str>,
    /// The request's headers.
    pub headers: &'a HeaderMap,
    /// The client's address (behind trusted proxies, the one they report).
    pub client_ip: IpAddr,
    /// The body, when a rule that applies keys on a body field.
    pub body: Option<&'a [u8]>,
}

/// The host name of a `Host` value or authority, as rules compare it: lowercase,
/// without port or trailing dot.
pub fn host_name(authority: &str) -> String {
    let name = match authority.rsplit_once(':') {
        // A port follows the last colon, unless it is inside an IPv6 literal.
        Some((name, port)) if !port.contains(']') => name,
        _ => authority,
    };
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn hosts_lose_case_port_and_trailing_dot() {
        assert_eq!(host_name("API.Example.com."), "api.example.com");
        assert_eq!(host_name("api.example.com:8080"), "api.example.com");
        assert_eq!(host_name("[::1]:8080"), "[::1]");
        assert_eq!(host_name("[::1]"), "[::1]");
    }
}
