//! The reqwest door: a [`reqwest_middleware::Middleware`].

use std::sync::Arc;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::core::{Core, Target};
use crate::idempotency::{Idempotent, may_repeat};
use crate::policy::Policy;

/// Retries, waits and holds back as its [`Policy`] says, for a
/// [`reqwest_middleware::ClientWithMiddleware`]. Clones share their counts (budget,
/// throttle, pacing); so does one client cloned across tasks.
///
/// A request the throttle refuses fails with `reqwest_middleware::Error::Middleware`
/// holding an [`Error::Throttled`](crate::Error::Throttled). A request whose body
/// cannot be cloned (a stream) is sent once. Connection and timeout errors of
/// repeatable requests are retried with backoff; other errors are returned at once.
#[derive(Debug, Clone)]
pub struct RetryMiddleware {
    core: Arc<Core>,
}

impl RetryMiddleware {
    /// A middleware following `policy`.
    pub fn new(policy: Policy) -> Self {
        Self {
            core: Arc::new(Core::new(policy)),
        }
    }
}

/// The server a URL names, for pacing: host and port.
fn server(url: &reqwest::Url) -> String {
    format!(
        "{}:{}",
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    )
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let marked = extensions.get::<Idempotent>().is_some();
        let repeatable = may_repeat(
            request.method(),
            request.headers(),
            marked,
            self.core.policy().retry_non_idempotent,
        ) && request.try_clone().is_some();
        let target = Target {
            server: server(request.url()),
            repeatable,
        };
        let mut call = self
            .core
            .start(target)
            .map_err(reqwest_middleware::Error::middleware)?;
        let mut request = request;
        loop {
            self.core.sleep(call.before_attempt()).await;
            // Kept for a retry; checked above to be clonable when it is repeatable.
            let again = if repeatable {
                request.try_clone()
            } else {
                None
            };
            let result = next.clone().run(request, extensions).await;
            let wait = match &result {
                Ok(response) => call.answered(response.status(), response.headers()),
                Err(reqwest_middleware::Error::Reqwest(error))
                    if error.is_connect() || error.is_timeout() =>
                {
                    call.failed()
                }
                Err(_) => None,
            };
            match (wait, again) {
                (Some(wait), Some(again)) => {
                    drop(result);
                    self.core.sleep(wait).await;
                    request = again;
                }
                _ => return result,
            }
        }
    }
}
