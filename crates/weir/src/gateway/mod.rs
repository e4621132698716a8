//! The HTTP gateway: weir as a reverse proxy in front of an API.
//!
//! For each request it reads the facts the engine decides on (method, path, host,
//! headers, client IP, the body when a rule keys on it), asks the engine, and either
//! answers 429 or 503 itself or forwards the request to the upstream, adds the
//! RateLimit fields to the upstream's answer, and settles the request's reservations
//! with the answer's status.

mod pool;
mod proxy;
mod service;
mod websocket;

pub use self::service::Gateway;
pub(crate) use self::service::handle;
