//! The one request step every HTTP door takes: read the request's head one way (its
//! canonical method, target and host), shed it when the upstream is overloaded, read
//! its body when a rule keys on a body field, ask the engine, and either stop with
//! weir's own answer or go on with the request as decided.
//!
//! ```text
//! head -> canonical target and host -> shed? -> body? -> facts -> decide -> Stop(answer)
//!                                                                       \-> GoOn(request, Unsettled)
//! ```
//!
//! A door that passes requests on (the gateway, the tower layer) sends [`GoOn::request`]
//! where it goes and hands the answer it gets to [`Unsettled::finish`], which adds the
//! RateLimit fields and settles the rules counted by outcome. A door that only decides
//! (`/v1/decide`) uses the reading half, [`Engine::read`], and answers the verdict
//! in its own JSON. Every door thus reaches the same
//! verdict, status and counts for one request: `tests/doors.rs` holds them to it.

mod holding;
mod shed;
mod unsettled;

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Request, header};
use axum::response::{IntoResponse, Response};

pub(crate) use self::holding::until_sent;
use self::shed::Shedding;
pub(crate) use self::unsettled::Unsettled;
use crate::config::SheddingConfig;
use crate::edge::{self, Answer, BodyReader, Problem};
use crate::engine::Engine;
use crate::request::{ClientAddress, ClientIpConfig, Refusal};

/// What a door reads every request with: where clients are, how bodies are bounded
/// (none: the door never sees a body), and (the gateway's) shedding by priority.
#[derive(Debug)]
pub(crate) struct RequestStep {
    client_ip: ClientIpConfig,
    bodies: Option<BodyReader>,
    shedding: Option<Shedding>,
}

/// Where a request goes after the step.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and taken apart at once: boxing would allocate per request"
)]
pub(crate) enum Step<'s> {
    /// On to the app, as decided.
    GoOn(GoOn<'s>),
    /// Answered by weir: a 429, a refusal (400, 413, 415, 421...), a shed 503, or a 503
    /// under the failure policy.
    Stop(Response),
}

/// A request that goes on.
#[derive(Debug)]
pub(crate) struct GoOn<'s> {
    /// The request as decided on: its canonical method and target, a Host (an
    /// absolute-form target's, when it had none), the forwarding headers rewritten from
    /// the client address weir read, and its body (a copy, when it was read).
    pub(crate) request: Request<Body>,
    /// What is owed once the app answers.
    pub(crate) unsettled: Unsettled<'s>,
}

/// The first rule whose match applied to a request (`None`: none did, or the request
/// was not read that far): what a door's own counts are kept by.
pub(crate) type Route = Option<usize>;

impl RequestStep {
    /// A step reading clients by `client_ip` and bodies within `bodies`' bounds.
    pub(crate) fn new(client_ip: ClientIpConfig, bodies: BodyReader) -> Self {
        Self {
            client_ip,
            bodies: Some(bodies),
            shedding: None,
        }
    }

    /// A step for a door that never sees a body (the forward-auth door: a proxy's
    /// subrequest carries none): a request reaching a rule keyed on a body field is
    /// refused ([`Problem::body_not_seen`]), never decided without it.
    pub(crate) fn without_bodies(client_ip: ClientIpConfig) -> Self {
        Self {
            client_ip,
            bodies: None,
            shedding: None,
        }
    }

    /// This step, shedding as `config` says (the gateway's `shedding` section), its
    /// limit shown in `engine`'s metrics.
    pub(crate) fn shedding(self, config: SheddingConfig, engine: &Engine) -> Self {
        let shedding = Shedding::new(config);
        engine.metrics().shed_limit(shedding.limit());
        Self {
            shedding: Some(shedding),
            ..self
        }
    }

    /// Takes `request`, which came from `peer`, through the step on `engine`: the
    /// answer, or the request to pass on; and its route.
    pub(crate) async fn run<'s>(
        &'s self,
        engine: &'s Arc<Engine>,
        peer: IpAddr,
        request: Request<Body>,
    ) -> (Step<'s>, Route) {
        let (mut parts, body) = request.into_parts();
        let client = self.client_ip.read(peer, &parts.headers);
        // A handle on the target as sent (cheap: shared bytes), so that the request's own
        // can be replaced by the canonical one.
        let sent = parts.uri.clone();
        let target = sent.path_and_query().map_or("/", |p| p.as_str());
        let (head, routed) = match engine.read(&parts.method, &sent, target, &parts.headers) {
            Ok(read) => read,
            Err(refused) => return (Step::Stop(edge::refused(&refused)), None),
        };
        // Passed on as decided: the canonical method and target (most targets are
        // canonical already: only another spelling replaces it).
        parts.method = head.method.clone();
        if let Some(canonical) = head.respelled() {
            match canonical.parse() {
                Ok(uri) => parts.uri = uri,
                Err(_) => {
                    engine.metrics().refused(Refusal::Unreadable);
                    let answer =
                        Problem::invalid_request("the request target cannot be read one way");
                    let answer = answer.into_response();
                    return (Step::Stop(answer), None);
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
        // Shed before deciding, so that a shed request takes nothing from its limits;
        // the ticket is held until the app's answer starts.
        let admitted = match &self.shedding {
            None => None,
            Some(shedding) => match shedding.admit(
                parts.uri.path(),
                engine.shed_priority(&routed),
                engine.metrics(),
            ) {
                Some(admitted) => Some(admitted),
                None => {
                    let answer = Problem::overloaded().into_response();
                    return (Step::Stop(answer), route);
                }
            },
        };
        // A request no rule routes is decided only when a global deny list may refuse it.
        if routed.is_empty() && !engine.denies_unrouted() {
            let unsettled = Unsettled::new(engine, None, admitted);
            return (self.go_on(parts, body, &client, unsettled), route);
        }
        // Read the body only when a rule identifies callers by it; then pass the copy on.
        let (body, bytes) = if routed.reads_body() {
            let Some(bodies) = &self.bodies else {
                return (Step::Stop(Problem::body_not_seen().into_response()), route);
            };
            match bodies.read(&parts.headers, body).await {
                Ok(bytes) => (Body::from(bytes.clone()), Some(bytes)),
                Err(answer) => return (Step::Stop(answer), route),
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
        match edge::answer(verdict, engine.legacy_headers()) {
            Answer::Proceed(allowed) => {
                let unsettled = Unsettled::new(engine, Some(allowed), admitted);
                (self.go_on(parts, body, &client, unsettled), route)
            }
            Answer::Stop(answer) => (Step::Stop(answer), route),
        }
    }

    /// The request going on: what the app reads of where it came from is what weir
    /// read, not what a client wrote (written once the facts were read from the
    /// headers as sent).
    fn go_on<'s>(
        &self,
        mut parts: Parts,
        body: Body,
        client: &ClientAddress,
        unsettled: Unsettled<'s>,
    ) -> Step<'s> {
        let tls = parts.extensions.get::<edge::OverTls>().is_some();
        edge::write_forwarding(client, &mut parts.headers, self.client_ip.header, tls);
        let request = Request::from_parts(parts, body);
        Step::GoOn(GoOn { request, unsettled })
    }
}
