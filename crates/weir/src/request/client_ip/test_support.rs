//! Requests and settings the client address tests and the forwarding tests share.

use std::net::IpAddr;

use axum::http::HeaderMap;

use super::{ClientIpConfig, ForwardedHeader};

/// Headers from name-value pairs, in order (a name may repeat).
pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, value.parse().unwrap());
    }
    map
}

/// An address from its text.
pub(crate) fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Trusted proxies in 10/8, 127.0.0.1 and 2001:db8:ffff::/48, with `header`.
pub(crate) fn config(header: ForwardedHeader) -> ClientIpConfig {
    ClientIpConfig {
        trusted_proxies: vec![
            "10.0.0.0/8".parse().unwrap(),
            "127.0.0.1/32".parse().unwrap(),
            "2001:db8:ffff::/48".parse().unwrap(),
        ],
        header,
        ipv6_prefix: 64,
        callers: Vec::new(),
    }
}
