//! One request through the gateway: read its facts, ask the engine, answer 429 or 503
//! or forward, then settle with the upstream's status.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::pool::UpstreamPool;
use super::proxy::forward;
use super::shed::Shedding;
use crate::config::GatewayConfig;
use crate::edge::{self, Answer, BodyReader, Problem};
use crate::engine::Engine;
use crate::request::Refusal;

/// The gateway: the engine that decides, and where allowed requests go.
pub struct Gateway {
    config: GatewayConfig,
    engine: Arc<Engine>,
    /// Reads the bodies rules key on, within the upstream section's bounds.
    bodies: BodyReader,
    /// Sheds by route priority when the upstream is overloaded, when configured.
    shedding: Option<Shedding>,
    /// Tells this gateway's upstream clients apart from a reloaded one's.
    id: u64,
}

/// Gateways made so far, for their ids.
static GATEWAYS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Each server thread's connections to upstreams, by gateway id: a connection
    /// stays on the thread (and runtime) that opened it.
    static POOLS: RefCell<Vec<(u64, Arc<UpstreamPool>)>> = const { RefCell::new(Vec::new()) };
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstream", &self.config.upstream.base)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway for `config`, asking `engine` about every request.
    pub fn new(config: GatewayConfig, engine: Arc<Engine>) -> Self {
        let upstream = &config.upstream;
        let bodies = BodyReader::new(
            upstream.max_body_bytes,
            upstream.body_timeout,
            upstream.max_buffered_bytes,
        );
        let shedding = config.shedding.clone().map(Shedding::new);
        if let Some(shedding) = &shedding {
            engine.metrics().shed_limit(shedding.limit());
        }
        Self {
            bodies,
            shedding,
            config,
            engine,
            id: GATEWAYS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// This thread's connections to the upstream.
    fn pool(&self) -> Arc<UpstreamPool> {
        POOLS.with(|pools| {
            let mut pools = pools.borrow_mut();
            if let Some((_, found)) = pools.iter().find(|(id, _)| *id == self.id) {
                return Arc::clone(found);
            }
            // Pools of gateways replaced by reloads go, oldest first.
            if pools.len() >= 4 {
                pools.remove(0);
            }
            let upstream = &self.config.upstream;
            let made = UpstreamPool::new(&upstream.base, upstream.connect_timeout);
            pools.push((self.id, Arc::clone(&made)));
            made
        })
    }
}

/// The gateway's handler: every request on its listener, from `peer`.
///
/// The request is read once, canonically (its host, its path, where it came from), and
/// what is forwarded is what was decided on: the canonical path, and forwarding headers
/// rewritten from the client address weir keyed. A request that cannot be read one way
/// is refused (400), whether or not a rule applies to it.
pub async fn handle(gateway: Arc<Gateway>, peer: SocketAddr, request: Request) -> Response {
    let counted = gateway.engine.metrics().gateway_request();
    // One block rather than a nested function: the request's future stays one state
    // machine (a nested future is copied whole when it is made: a measurable cost).
    let (response, route) = 'answer: {
        let (config, engine) = (&gateway.config, &gateway.engine);
        let (mut parts, body) = request.into_parts();
        let client = config.client_ip.read(peer.ip(), &parts.headers);
        // A handle on the target as sent (cheap: shared bytes), so that the request's own
        // can be replaced by the canonical one.
        let sent = parts.uri.clone();
        let target = sent.path_and_query().map_or("/", |p| p.as_str());
        let (head, routed) = match engine.read(&parts.method, &sent, target, &parts.headers) {
            Ok(read) => read,
            Err(refused) => break 'answer (edge::refused(&refused), None),
        };
        // Forwarded as decided: the canonical method and target (most targets are
        // canonical already: only another spelling replaces it).
        parts.method = head.method.clone();
        if let Some(canonical) = head.respelled() {
            match canonical.parse() {
                Ok(uri) => parts.uri = uri,
                Err(_) => {
                    break 'answer unreadable(engine, "the request target cannot be forwarded");
                }
            }
        }
        // An absolute-form target without Host names the host in the target: the app gets
        // it as Host, as sent (not the upstream's own name).
        if !parts.headers.contains_key(header::HOST)
            && let Some(host) = edge::host_of_target(&sent)
        {
            parts.headers.insert(header::HOST, host);
        }
        let route = routed.first();
        let header = config.client_ip.header;
        // Shed before deciding, so that a shed request takes nothing from its limits;
        // the ticket is held until the upstream's answer starts.
        let admitted = match &gateway.shedding {
            None => None,
            Some(shedding) => match shedding.admit(
                parts.uri.path(),
                engine.shed_priority(&routed),
                engine.metrics(),
            ) {
                Some(admitted) => Some(admitted),
                None => break 'answer (Problem::overloaded().into_response(), route),
            },
        };
        if routed.is_empty() {
            let pool = gateway.pool();
            let started = Instant::now();
            let forwarded = forward(&pool, &config.upstream, parts, body, &client, header).await;
            let forwarded = forwarded.unwrap_or_else(|own| own);
            engine.metrics().upstream_latency(started.elapsed());
            if let Some(admitted) = admitted {
                admitted.finish(
                    started.elapsed(),
                    forwarded.status().as_u16(),
                    engine.metrics(),
                );
            }
            break 'answer (forwarded, route);
        }

        // Read the body only when a rule identifies callers by it; then forward the copy.
        let (body, bytes) = if routed.reads_body() {
            match gateway.bodies.read(&parts.headers, body).await {
                Ok(bytes) => (Body::from(bytes.clone()), Some(bytes)),
                Err(answer) => break 'answer (answer, route),
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
            Answer::Stop(answer) => break 'answer (answer, route),
        };
        let pool = gateway.pool();
        let started = Instant::now();
        let answer = forward(&pool, &config.upstream, parts, body, &client, header).await;
        engine.metrics().upstream_latency(started.elapsed());
        if let Some(admitted) = admitted {
            let status = match &answer {
                Ok(response) | Err(response) => response.status().as_u16(),
            };
            admitted.finish(started.elapsed(), status, engine.metrics());
        }
        // weir's own 502 or 504 is no answer from the app: the attempt stays counted.
        let (mut response, answered) = match answer {
            Ok(response) => (response, true),
            Err(own) => (own, false),
        };
        edge::add_allowed_headers(response.headers_mut(), &allowed, engine.legacy_headers());
        if answered && let Some(settlement) = allowed.settlement {
            response = edge::settle(settlement, response).await;
        }
        (response, route)
    };
    counted.answered(route, response.status().as_u16());
    response
}

/// A request that cannot be read one way (400), counted as such.
fn unreadable(engine: &Engine, detail: impl Into<String>) -> (Response, Option<usize>) {
    engine.metrics().refused(Refusal::Unreadable);
    (Problem::invalid_request(detail).into_response(), None)
}
