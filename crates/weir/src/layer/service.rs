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
use axum::http::{Request, header};
use axum::response::{IntoResponse, Response};
use tower::{Service, ServiceExt};

use super::Settings;
use crate::edge::{self, Answer, Problem};
use crate::engine::{Engine, EngineHandle};

/// The service [`WeirLayer`](super::WeirLayer) wraps around an inner one.
#[derive(Debug, Clone)]
pub struct WeirService<S> {
    inner: S,
    engine: EngineHandle,
    settings: Arc<Settings>,
}

impl<S> WeirService<S> {
    pub(super) fn new(inner: S, engine: EngineHandle, settings: Arc<Settings>) -> Self {
        Self {
            inner,
            engine,
            settings,
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
        let settings = Arc::clone(&self.settings);
        Box::pin(async move { Ok(enforce(&engine, &settings, inner, request).await) })
    }
}

/// The answer to `request`: weir's own, or the inner service's with the RateLimit
/// fields, settled with its status.
async fn enforce<S>(
    engine: &Arc<Engine>,
    settings: &Settings,
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
    let (mut parts, body) = request.into_parts();
    let client = settings.client_ip.read(peer.ip(), &parts.headers);
    let sent = parts.uri.clone();
    let target = sent.path_and_query().map_or("/", |p| p.as_str());
    let (head, routed) = match engine.read(&parts.method, &sent, target, &parts.headers) {
        Ok(read) => read,
        Err(refused) => return edge::refused(&refused),
    };
    // The inner service reads what was decided: the canonical method and target, and
    // the host (an absolute-form target's, when the request has no Host).
    parts.method = head.method.clone();
    if let Some(canonical) = head.respelled() {
        match canonical.parse() {
            Ok(uri) => parts.uri = uri,
            Err(_) => {
                return Problem::invalid_request("the request target cannot be read one way")
                    .into_response();
            }
        }
    }
    if !parts.headers.contains_key(header::HOST)
        && let Some(host) = edge::host_of_target(&sent)
    {
        parts.headers.insert(header::HOST, host);
    }
    // What it is told of where the request came from is what weir read, not what a
    // client wrote (the gateway's rewriting of the forwarding headers).
    edge::write_forwarding(&client, &mut parts.headers, settings.client_ip.header);
    if routed.is_empty() {
        return call(inner, Request::from_parts(parts, body)).await;
    }
    let (body, bytes) = if routed.reads_body() {
        match settings.bodies.read(&parts.headers, body).await {
            Ok(bytes) => (Body::from(bytes.clone()), Some(bytes)),
            Err(answer) => return answer,
        }
    } else {
        (body, None)
    };
    let facts = head.facts(
        &parts.headers,
        client.ip,
        client.peer_trusted,
        bytes.as_deref(),
    );
    let verdict = engine.decide(routed, &facts).await;
    let allowed = match edge::answer(verdict, engine.legacy_headers()) {
        Answer::Proceed(allowed) => allowed,
        Answer::Stop(answer) => return answer,
    };
    let mut response = call(inner, Request::from_parts(parts, body)).await;
    edge::add_allowed_headers(response.headers_mut(), &allowed, engine.legacy_headers());
    match allowed.settlement {
        Some(settlement) => edge::settle(settlement, response).await,
        None => response,
    }
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
