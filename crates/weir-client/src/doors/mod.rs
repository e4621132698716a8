//! The doors: the same core behind a reqwest-middleware middleware and a tower layer.

mod reqwest;
mod tower;

pub use self::reqwest::RetryMiddleware;
pub use self::tower::{Retry, RetryLayer};
