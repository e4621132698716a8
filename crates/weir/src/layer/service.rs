//! One request through the layer: read, decide, answer or call the inner service, then
//! settle with its status.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::{IntoResponse, Response};
use tower::{Service, ServiceExt};

use crate::edge::Problem;
use crate::engine::Engine;
use crate::metrics::Door;
use crate::reloadable::Reloadable;
use crate::step::{GoOn, RequestStep, Step};

/// The service [`WeirLayer`](super::WeirLayer) wraps around an inner one.
#[derive(Debug, Clone)]
pub struct WeirService<S> {
    inner: S,
    engine: Reloadable<Engine>,
    step: Arc<RequestStep>,
}

impl<S> WeirService<S> {
    pub(super) fn new(inner: S, engine: Reloadable<Engine>, step: Arc<RequestStep>) -> Self {
        Self {
            inner,
            engine,
            step,
        }
    }
}

impl<S> Service<Request<Body>> for WeirService<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The inner service is made ready when a request goes on to it: many requests
        // are answered by weir alone, and waiting for the inner one would hold them.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let engine = self.engine.current();
        let step = Arc::clone(&self.step);
        Box::pin(async move { Ok(enforce(&engine, &step, inner, request).await) })
    }
}

/// The answer to `request`: weir's own, or the inner service's with the RateLimit
/// fields, settled with its status.
async fn enforce<S>(
    engine: &Arc<Engine>,
    step: &RequestStep,
    inner: S,
    request: Request<Body>,
) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    let Some(ConnectInfo(peer)) = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .copied()
    else {
        tracing::error!(
            "weir's layer has no client address: serve with into_make_service_with_connect_info::<SocketAddr>()"
        );
        return Problem::no_client_address().into_response();
    };
    let response = match step.run(engine, peer.ip(), request).await.0 {
        Step::Stop(answer) => answer,
        Step::GoOn(GoOn { request, unsettled }) => {
            let response = call(inner, request).await;
            unsettled.finish(Ok(response)).await
        }
    };
    engine
        .metrics()
        .door_answered(Door::Layer, response.status().as_u16());
    response
}

/// The inner service's answer.
async fn call<S>(inner: S, request: Request<Body>) -> Response
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    match inner.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
