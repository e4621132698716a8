//! Which rules apply to a request, found from its request line alone (before its body
//! is read, which only some rules need).

use axum::http::{HeaderMap, HeaderName, Method, Uri};

use super::{Engine, PlanSource, Source};
use crate::request::{Head, Refused, read_head};

/// The rules whose route matches a request, found from its request line alone (before
/// its body is read, which only some rules need).
#[derive(Debug, Default)]
pub(crate) struct Routed {
    pub(super) rules: Vec<usize>,
    reads_body: bool,
}

impl Routed {
    /// Whether no rule applies: the request goes on unlimited.
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The index of the first rule that applies (the request's route, in metrics).
    pub(crate) fn first(&self) -> Option<usize> {
        self.rules.first().copied()
    }

    /// Whether a rule that applies keys on a field of the body.
    pub(crate) fn reads_body(&self) -> bool {
        self.reads_body
    }
}

impl Engine {
    /// The first rule among `routed` whose `match` gives a shedding priority: its
    /// name and the priority. (Such a rule is for every plan: the configuration
    /// refuses a priority on a rule for some plans, since the gateway sheds before the
    /// caller's plan is known.)
    pub(crate) fn shed_priority(&self, routed: &Routed) -> Option<(&str, weir_core::Priority)> {
        routed.rules.iter().find_map(|&i| {
            let rule = &self.routing.rules[i];
            rule.priority.map(|p| (rule.name.as_str(), p))
        })
    }

    /// Reads a request's head one way ([`read_head`], with this engine's path
    /// options) and finds the rules that apply to it: the first step of every door
    /// that receives HTTP. A refusal is counted before it is returned.
    pub(crate) fn read<'a>(
        &self,
        method: &Method,
        uri: &Uri,
        target: &'a str,
        headers: &HeaderMap,
    ) -> Result<(Head<'a>, Routed), Refused> {
        let head = read_head(method, uri, target, headers, self.routing.paths)
            .map_err(|refused| self.refused(refused))?;
        let routed = self.route(&head, headers)?;
        Ok((head, routed))
    }

    /// The rules whose route matches a request with this head (method, host and path
    /// canonical) and headers; a request whose values a matching rule cannot read one
    /// way is refused (see [`super::ValueMatch`]). When rules name hosts, a request naming none of them (an IP
    /// literal, another name) is refused with a 421, and one without a host with a
    /// 400, unless `requests.unknown_hosts` is `forward`: the app may serve it as one
    /// of the named hosts.
    fn route(&self, head: &Head<'_>, headers: &HeaderMap) -> Result<Routed, Refused> {
        let (method, host, path) = (&head.method, head.host.as_deref(), head.path());
        if !self.routing.forward_unknown_hosts && !self.named_hosts.is_empty() {
            let Some(host) = host else {
                return Err(self.refused(Refused::bad_request(
                    "this request names no host (Host), and the rules here depend on it",
                )));
            };
            if !self.named_hosts.iter().any(|named| named == host) {
                return Err(self.refused(Refused::misdirected(host)));
            }
        }
        let mut routed = Routed::default();
        for (i, rule) in self.routing.rules.iter().enumerate() {
            if rule.route.matches(method, host, path)
                && rule
                    .route
                    .values_match(headers, head.query())
                    .map_err(|refused| self.refused(refused))?
            {
                routed.rules.push(i);
                routed.reads_body |= self.reads_body[i];
            }
        }
        Ok(routed)
    }
}

impl Engine {
    /// The request headers a caller is identified or given a plan by (API key headers,
    /// JWT headers, a plan header): what must reach a door exactly as the client sent
    /// it.
    pub(crate) fn identity_headers(&self) -> Vec<HeaderName> {
        let identities =
            self.routing
                .identities
                .values()
                .filter_map(|identity| match &identity.source {
                    Source::Header(name) => Some(name.clone()),
                    Source::Jwt(verifier) => Some(verifier.header().clone()),
                    Source::BodyField(_)
                    | Source::QueryParam(_)
                    | Source::Cookie(_)
                    | Source::ClientIp => None,
                });
        let plans = self
            .routing
            .plans
            .iter()
            .filter_map(|plans| match &plans.source {
                PlanSource::Header(name) => Some(name.clone()),
                PlanSource::JwtClaim { verifier, .. } => Some(verifier.header().clone()),
                PlanSource::File { .. } => None,
            });
        let mut names: Vec<HeaderName> = identities.chain(plans).collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup();
        names
    }
}
