//! weir's gateway decision on Cloudflare's Pingora, for benchmarks only (issue 41):
//! Pingora's HTTP/1.1 server and upstream pool around weir's engine, asked through
//! weir's public tower layer ([`weir::WeirService`]) exactly as weir's gateway asks it
//! (the request step: the head read canonically, the client's address, the rules, the
//! store, the RateLimit fields on the answer). Only the HTTP stack differs.
//!
//!     weir-pingora-bench LISTEN UPSTREAM CONFIG
//!
//! LISTEN (`127.0.0.1:PORT`) is served; UPSTREAM (`127.0.0.1:PORT`) is asked over
//! HTTP/1.1 with keep-alive (Pingora's pool); CONFIG is a weir configuration (its
//! rules and store; its `upstream` section, if any, gives the body bounds only).
//! `PINGORA_THREADS` (default 2) sets the worker threads, `PINGORA_WORK_STEALING=1`
//! one work-stealing runtime rather than one runtime per thread (weir's shape).
//!
//! What it does not do, unlike weir's gateway: read a body for rules keyed on body
//! fields (the layer sees an empty body), settle `count_statuses` rules with the
//! upstream's status (the layer sees the go-ahead's 200), HTTP/2, WebSockets, TLS.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::net::SocketAddr;
use std::path::Path;
use std::task::{Context, Poll};

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt;
use pingora_core::server::Server;
use pingora_core::server::configuration::ServerConf;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{ProxyHttp, Session};
use tower::ServiceExt;
use weir::{Config, WeirLayer, WeirService};

/// The inner service behind weir's layer: reached only when weir lets the request go
/// on, it answers with the go-ahead (the canonical target weir decided on), to which
/// the layer adds the RateLimit fields.
#[derive(Debug, Clone, Copy)]
struct GoAhead;

/// What the go-ahead carries: the request to send upstream, as weir's step made it.
#[derive(Debug, Clone)]
struct Target(http::request::Parts);

/// The fields of one connection, which a proxy does not pass on (weir's gateway strips
/// the same).
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "transfer-encoding",
    "upgrade",
];

impl tower::Service<Request<Body>> for GoAhead {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let mut response = Response::new(Body::empty());
        let (parts, _) = request.into_parts();
        response.extensions_mut().insert(Target(parts));
        ready(Ok(response))
    }
}

/// The proxy: weir decides in `request_filter`; the request goes upstream with the
/// forwarding fields weir's gateway writes; the answer comes back with weir's
/// RateLimit fields.
struct Gate {
    weir: WeirService<GoAhead>,
    upstream: SocketAddr,
}

/// One request's state between Pingora's phases.
#[derive(Default)]
struct Decided {
    /// The request weir let go on, to send upstream.
    target: Option<Target>,
    /// The fields weir adds to the upstream's answer.
    fields: HeaderMap,
}

#[async_trait]
impl ProxyHttp for Gate {
    type CTX = Decided;

    fn new_ctx(&self) -> Decided {
        Decided::default()
    }

    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Decided,
    ) -> pingora_core::Result<bool> {
        let peer = session.client_addr().and_then(|a| a.as_inet()).copied();
        let Some(peer) = peer else {
            session.respond_error(500).await?;
            return Ok(true);
        };
        let mut request = Request::from_parts(session.req_header().as_owned_parts(), Body::empty());
        request.extensions_mut().insert(ConnectInfo(peer));
        let Ok(response) = self.weir.clone().oneshot(request).await;
        let (parts, body) = response.into_parts();
        let (mut parts, body) = (parts, body);
        if let Some(target) = parts.extensions.remove::<Target>() {
            ctx.target = Some(target);
            ctx.fields = parts.headers;
            return Ok(false);
        }
        // weir's own answer (429, 400, 503...).
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut answer = ResponseHeader::build(parts.status, Some(parts.headers.len() + 1))?;
        for (name, value) in &parts.headers {
            answer.append_header(name.clone(), value.clone())?;
        }
        answer.set_content_length(body.len())?;
        session
            .write_response_header(Box::new(answer), false)
            .await?;
        session.write_response_body(Some(body), true).await?;
        Ok(true)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut Decided,
    ) -> pingora_core::Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream: &mut RequestHeader,
        ctx: &mut Decided,
    ) -> pingora_core::Result<()> {
        // The request as weir's step left it: its canonical target, and the forwarding
        // fields it wrote (X-Forwarded-For, Forwarded, X-Real-IP, X-Forwarded-Proto by
        // default); less the hop-by-hop fields, as weir's gateway strips them.
        if let Some(Target(mut parts)) = ctx.target.take() {
            for name in HOP_BY_HOP {
                parts.headers.remove(name);
            }
            *upstream = RequestHeader::from(parts);
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        answer: &mut ResponseHeader,
        ctx: &mut Decided,
    ) -> pingora_core::Result<()> {
        for (name, value) in std::mem::take(&mut ctx.fields) {
            if let Some(name) = name {
                answer.insert_header(name, value)?;
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, upstream, config] = &args[..] else {
        return Err("usage: weir-pingora-bench LISTEN UPSTREAM CONFIG".into());
    };
    let upstream: SocketAddr = upstream.parse()?;
    let config = Config::load(Path::new(config))?;

    // The engine's own tasks (the memory store's sweeps) on a runtime of their own;
    // the checks run on Pingora's threads.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let instance = runtime.block_on(weir::instance(&config))?;
    let layer = WeirLayer::new(&config, instance.engine.clone());
    std::thread::spawn(move || {
        let _instance = instance;
        runtime.block_on(std::future::pending::<()>());
    });

    let threads = std::env::var("PINGORA_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let dir = std::env::temp_dir();
    let conf = ServerConf {
        threads,
        work_stealing: std::env::var("PINGORA_WORK_STEALING").is_ok_and(|v| v == "1"),
        pid_file: dir
            .join(format!("weir-pingora-{}.pid", std::process::id()))
            .display()
            .to_string(),
        upgrade_sock: dir
            .join(format!("weir-pingora-{}.sock", std::process::id()))
            .display()
            .to_string(),
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let gate = Gate {
        weir: tower::Layer::layer(&layer, GoAhead),
        upstream,
    };
    let mut proxy = pingora_proxy::http_proxy_service(&server.configuration, gate);
    proxy.add_tcp(listen);
    server.add_service(proxy);
    println!("pingora listening on http://{listen}");
    server.run_forever();
}
