//! The tower door: a [`Layer`] and its [`Service`] for clients that send
//! `http::Request`s (hyper's client, tonic's channels, anything tower-shaped).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::core::{Core, Target};
use crate::idempotency::{Idempotent, may_repeat};
use crate::policy::Policy;

/// Wraps a service in [`Retry`], following one [`Policy`]. Services made from one
/// layer (and their clones) share its counts: budget, throttle, pacing.
#[derive(Debug, Clone)]
pub struct RetryLayer {
    core: Arc<Core>,
}

impl RetryLayer {
    /// A layer following `policy`.
    pub fn new(policy: Policy) -> Self {
        Self {
            core: Arc::new(Core::new(policy)),
        }
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            core: Arc::clone(&self.core),
        }
    }
}

/// A service that retries, waits and holds back as its [`Policy`] says.
///
/// The request body must be `Clone` to be sent again (`Full<Bytes>`, `String`, a
/// tonic request buffered as bytes); a stream must be buffered first. Errors are
/// boxed, as tower's own middleware boxes them: the inner service's error, or an
/// [`Error`](crate::Error) (`Throttled`) to downcast. Inner errors of repeatable
/// requests are retried with backoff.
#[derive(Debug, Clone)]
pub struct Retry<S> {
    inner: S,
    core: Arc<Core>,
}

/// The server a request names, for pacing: the target's authority, else `Host`.
fn server<B>(request: &Request<B>) -> String {
    if let Some(authority) = request.uri().authority() {
        return authority.as_str().to_owned();
    }
    request
        .headers()
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

impl<S, B, RB> Service<Request<B>> for Retry<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Clone + Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service driven to readiness serves the first attempt; a clone takes its
        // place (tower-service's documented pattern).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let core = Arc::clone(&self.core);
        Box::pin(async move {
            let repeatable = may_repeat(
                request.method(),
                request.headers(),
                request.extensions().get::<Idempotent>().is_some(),
                core.policy().retry_non_idempotent,
            );
            let target = Target {
                server: server(&request),
                repeatable,
            };
            let mut call = core.start(target)?;
            let mut first = true;
            loop {
                core.sleep(call.before_attempt()).await;
                if !first {
                    inner.ready().await.map_err(Into::into)?;
                }
                first = false;
                let result = inner.call(request.clone()).await.map_err(Into::into);
                let wait = match &result {
                    Ok(response) => call.answered(response.status(), response.headers()),
                    Err(_) => call.failed(),
                };
                match wait {
                    Some(wait) => {
                        drop(result);
                        core.sleep(wait).await;
                    }
                    None => return result,
                }
            }
        })
    }
}
