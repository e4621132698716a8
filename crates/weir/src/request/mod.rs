//! Reading a request the way the app behind the gateway will: one canonical reading of
//! its path, host, body fields and identity texts, or a refusal.
//!
//! weir decides on one reading of a request, and what it forwards is what it decided
//! on. Where two readings are possible (a path the app may decode differently, a field
//! sent twice, a host that disagrees with the request target), these functions return
//! a typed error rather than pick one: the gateway answers it with a 400 (or 415)
//! problem, and never falls back to a weaker key.
//!
//! Every function here is pure: no I/O, no clock, no configuration beyond its
//! arguments.

mod address;
pub mod body;
pub mod headers;
pub mod host;
pub mod identity_text;
pub mod path;

pub use self::address::push_ip;
pub use self::body::{BodyError, body_field};
pub use self::headers::{canonical_method, check_routing_headers};
pub use self::host::{HostError, canonical_host};
pub use self::identity_text::{IdentityTextError, normalize_email, normalize_identity};
pub use self::path::{
    EscapedSlashes, PathError, PathMatchOptions, PathOptions, canonical_path,
    canonical_path_and_query, match_form,
};
