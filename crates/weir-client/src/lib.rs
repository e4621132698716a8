//! A client that behaves under rate limits: it waits as long as the server asks,
//! backs off with jitter, retries little, and slows down before it is cut off.
//!
//! Retrying a refusal at once only keeps a limit in force longer and makes the
//! limiter (and the Redis behind it) decide every attempt. This crate gives Rust
//! callers the well-behaved alternative, as a [`reqwest_middleware`] middleware
//! ([`RetryMiddleware`]) and a tower [`Layer`](tower::Layer) for `http::Request`
//! clients such as hyper's and tonic's ([`RetryLayer`]), both following one
//! [`Policy`]:
//!
//! - **On 429 or 503** it waits what the server asked: `Retry-After` (seconds or an
//!   HTTP date), else the RateLimit field's `t` of the quota with nothing left, plus
//!   full jitter (uniform below that wait, at most the backoff cap, or below the
//!   backoff step when that is longer), so clients refused together do not come back
//!   together. A server
//!   asking for longer than [`Policy::max_wait`] (a 15-minute lockout) gets its answer
//!   returned at once. Garbage or huge values never panic: garbage is ignored, huge
//!   values are past any cap.
//! - **On 502, 504 and connection errors**: exponential backoff with full jitter and a
//!   cap (backon's schedule; a wait uniform below each step).
//! - **A retry budget**: retries are at most 10% of the requests of the last 10 s (plus
//!   a reserve of 10), as Google's SRE book counsels, so an overloaded server sees at
//!   most 1.1x its load from retries, however many clients retry.
//! - **Slowing down**: when an answer's RateLimit fields say less than 10% of a quota
//!   is left, requests to that server are spaced at the quota's own rate (`w / q`)
//!   until its reset.
//! - **An adaptive throttle** (optional): requests refused locally with probability
//!   `max(0, (requests - K * accepts) / (requests + 1))`, the SRE book's client-side
//!   throttling.
//! - **Only idempotent requests are retried** (GET, HEAD, PUT, DELETE, OPTIONS, TRACE),
//!   unless the request carries an `Idempotency-Key`, the [`Idempotent`] marker, or
//!   the policy says [`retry_non_idempotent`](Policy::retry_non_idempotent).
//!
//! Time and randomness are handed in ([`Clock`], [`Random`]), so tests move a
//! [`ManualClock`] instead of sleeping.
//!
//! # With reqwest
//!
//! ```
//! use reqwest_middleware::ClientBuilder;
//! use weir_client::{Policy, RetryMiddleware};
//!
//! # fn main() -> Result<(), weir_client::Error> {
//! let policy = Policy::default().adaptive_throttle(2.0, std::time::Duration::from_secs(120))?;
//! let client = ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryMiddleware::new(policy))
//!     .build();
//! // client.get("http://127.0.0.1:8080/api/books").send().await? as with reqwest.
//! # drop(client);
//! # Ok(())
//! # }
//! ```
//!
//! # With tower (hyper, tonic)
//!
//! A server that refuses once with `Retry-After: 2`, on a manual clock: the client
//! waits the two seconds plus a jitter below two seconds, then gets its answer.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::{Duration, SystemTime};
//!
//! use http::{Request, Response, StatusCode};
//! use tower::{Layer, ServiceExt, service_fn};
//! use weir_client::{FastRandom, ManualClock, Policy, RetryLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower::BoxError> {
//! let calls = Arc::new(AtomicU32::new(0));
//! let server = service_fn(move |_request: Request<String>| {
//!     let refused = calls.fetch_add(1, Ordering::Relaxed) == 0;
//!     async move {
//!         let mut response = Response::new(String::new());
//!         if refused {
//!             *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
//!             response.headers_mut().insert("retry-after", "2".parse()?);
//!         }
//!         Ok::<_, tower::BoxError>(response)
//!     }
//! });
//! let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
//! let policy = Policy::default().clock(clock.clone()).random(Arc::new(FastRandom::seeded(1)));
//! let client = RetryLayer::new(policy).layer(server);
//!
//! let response = client.oneshot(Request::get("http://api.test/books").body(String::new())?).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! let slept = clock.slept();
//! assert_eq!(slept.len(), 1);
//! assert!(slept[0] >= Duration::from_secs(2) && slept[0] < Duration::from_secs(4));
//! # Ok(())
//! # }
//! ```
//!
//! # What it does not do
//!
//! The counts (budget, throttle, pacing) belong to one middleware or layer and the
//! clients made from it: separate processes pace and budget each on their own.
//! Pacing is per server (host and port), not per quota. Bodies that cannot be cloned
//! are sent once.

#![deny(missing_docs)]

mod clock;
mod core;
mod doors;
mod error;
mod headers;
mod idempotency;
mod limits;
mod policy;
mod random;
mod schedule;

pub use self::clock::{Clock, ManualClock, Sleep, TokioClock};
pub use self::doors::{Retry, RetryLayer, RetryMiddleware};
pub use self::error::Error;
pub use self::idempotency::Idempotent;
pub use self::policy::Policy;
pub use self::random::{FastRandom, Random};
