//! Reading a request the way the app behind the gateway will: one canonical reading of
//! its path, host, client address, token, body fields and identity texts, or a refusal.
//!
//! weir decides on one reading of a request, and what it forwards is what it decided
//! on. Where two readings are possible (a path the app may decode differently, a field
//! sent twice, a host that disagrees with the request target), these functions return
//! a typed error rather than pick one: the door answers it with a 400 (or 415)
//! problem, and never falls back to a weaker key. [`read_head`] is the one reading of
//! a request's method, target and host that every door receiving HTTP shares.
//!
//! Every function here is pure: no I/O, no clock reads (a token's expiry is checked
//! against the time it is given), no configuration beyond its arguments.

mod address;
mod body;
mod client_ip;
mod facts;
mod head;
mod headers;
mod host;
mod identity_text;
mod jwt;
mod path;
mod refused;

pub(crate) use self::address::push_ip;
pub(crate) use self::body::{Found, body_field, cookie, query_param};
pub use self::client_ip::client_ip;
#[cfg(test)]
pub(crate) use self::client_ip::test_support as client_ip_test_support;
pub(crate) use self::client_ip::{
    ClientAddress, ClientIpConfig, ForwardedHeader, IPV6_PREFIX, canonical_ip, canonical_net,
    ip_key,
};
pub(crate) use self::facts::Facts;
pub(crate) use self::head::{Head, read_head};
pub(crate) use self::headers::{canonical_method, check_routing_headers, one_header};
pub(crate) use self::host::canonical_host;
pub(crate) use self::identity_text::normalize_email;
pub(crate) use self::jwt::{JwtKey, JwtVerifier};
pub(crate) use self::path::{
    EscapedSlashes, PathMatchOptions, PathOptions, canonical_path, canonical_path_and_query,
    match_form,
};
pub(crate) use self::refused::{Refusal, Refused};
