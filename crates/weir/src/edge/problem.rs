//! Errors as `application/problem+json` (RFC 9457), made once, at the edge.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::request::Refusal;

/// A problem to report to the client: a status, a stable type and a human detail.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    status: StatusCode,
    kind: &'static str,
    title: &'static str,
    detail: String,
    retry_after_secs: Option<u64>,
    violated: Vec<String>,
}

/// The body of every error answer (`application/problem+json`, RFC 9457).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Problem)]
pub(crate) struct ProblemJson<'a> {
    /// A stable path naming the kind of problem, e.g. `/problems/rate-limited`.
    #[serde(rename = "type")]
    #[schema(example = "/problems/invalid-request")]
    kind: String,
    /// A short human summary of the kind of problem.
    title: &'a str,
    /// The HTTP status of the answer.
    status: u16,
    /// What went wrong with this request, for a person to read.
    detail: &'a str,
    /// The rules that denied the request (rate-limited answers only).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    #[schema(required = false)]
    violated: &'a [String],
}

impl Problem {
    /// The admin API was called without the right bearer token (401).
    pub(crate) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            "the admin API needs `Authorization: Bearer <token>` with the configured admin token",
        )
    }

    /// The request is malformed (400).
    pub(crate) fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            "Invalid request",
            detail,
        )
    }

    /// A request weir will not decide on: 400 (it cannot be read one way), 415 (a body
    /// weir does not read, on a route keyed by one of its fields), 421 (a host no rule
    /// names), 403 (a client on a deny list).
    pub(crate) fn refused(reason: Refusal, detail: String) -> Self {
        match reason {
            Refusal::UnsupportedBody => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-body",
                "Body not readable",
                detail,
            ),
            Refusal::UnknownHost => Self::new(
                StatusCode::MISDIRECTED_REQUEST,
                "unknown-host",
                "Unknown host",
                detail,
            ),
            Refusal::Unreadable => Self::invalid_request(detail),
            Refusal::Listed => Self::denied_by_list(detail),
        }
    }

    /// No rule has the name asked for (404).
    pub(crate) fn unknown_rule(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown-rule",
            "Unknown rule",
            format!("no rule is named `{}`", name.escape_debug()),
        )
    }

    /// The key has no override in force to delete (404).
    pub(crate) fn no_override() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown-override",
            "Unknown override",
            "the key has no override in force under this rule (expired, deleted, or never set)",
        )
    }

    /// No list entry set at runtime matches the one to remove (404).
    pub(crate) fn no_list_entry() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown-list-entry",
            "Unknown list entry",
            "no entry of this list set at runtime matches (expired, removed, or never set)",
        )
    }

    /// The entry to remove is the configuration's, not one set at runtime (409).
    pub(crate) fn configured_entry(detail: String) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "configured-list-entry",
            "List entry in the configuration",
            detail,
        )
    }

    /// No settlement is waiting under the id given: settled already, expired, or made
    /// before a reload (404). Its reservations stay counted.
    pub(crate) fn unknown_settlement() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown-settlement",
            "Unknown settlement",
            "no settlement is waiting under this id (settled already, expired, or made before a reload); its reservations stay counted",
        )
    }

    /// Nothing is served at this path (404).
    pub(crate) fn not_found(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            format!("nothing is served at `{}`", path.escape_debug()),
        )
    }

    /// The path exists but not for this method (405).
    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
            "Method not allowed",
            "this path does not accept this method",
        )
    }

    /// The body is larger than the server reads (413).
    pub(crate) fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Request body too large",
            format!("the body must be at most {limit} bytes"),
        )
    }

    /// The gateway's rate limits deny the request (429). `violated` names the rules;
    /// the caller adds `Retry-After` and the RateLimit fields.
    pub(crate) fn rate_limited(violated: Vec<String>, retry_after_secs: Option<u64>) -> Self {
        let detail = match retry_after_secs {
            Some(secs) => format!("Too many requests; {}.", try_again_in(secs)),
            None => "This request costs more than the limit ever allows.".to_owned(),
        };
        Self {
            violated,
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate-limited",
                "Too many requests",
                detail,
            )
        }
    }

    /// The caller's key is banned under the rules `violated` (a rule's `on_limited`):
    /// 429, or 403 when the rule says `status: 403`, until the ban's end. The caller
    /// adds `Retry-After` (the ban's end) and the RateLimit fields.
    pub(crate) fn banned(
        violated: Vec<String>,
        retry_after_secs: Option<u64>,
        forbidden: bool,
    ) -> Self {
        let detail = match retry_after_secs {
            Some(secs) => {
                format!(
                    "Banned after too many denied requests; {}.",
                    try_again_in(secs)
                )
            }
            None => "Banned after too many denied requests.".to_owned(),
        };
        let status = if forbidden {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        Self {
            violated,
            ..Self::new(status, "banned", "Banned", detail)
        }
    }

    /// The client is on a deny list (403).
    pub(crate) fn denied_by_list(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "denied", "Denied", detail)
    }

    /// The gateway is at a bound it keeps for everyone's sake (503, retry in a
    /// second).
    pub(crate) fn busy(detail: impl Into<String>) -> Self {
        Self {
            retry_after_secs: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", "Busy", detail)
        }
    }

    /// The upstream is overloaded and this request's route is shed before others
    /// (503, retry in a second): load shedding by priority.
    pub(crate) fn overloaded() -> Self {
        Self {
            retry_after_secs: Some(1),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "Upstream overloaded",
                "the upstream is overloaded and this route gives way to others; try again shortly",
            )
        }
    }

    /// The client took too long to send the body (408).
    pub(crate) fn body_timeout(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "body-timeout",
            "Request body too slow",
            format!("the body must arrive within {limit:?}"),
        )
    }

    /// weir's tower layer was given a request without the connection's address (500):
    /// the embedding service is set up without `ConnectInfo`, and no rule could be
    /// keyed on the client. A fault of the service, not of its caller.
    pub(crate) fn no_client_address() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no-client-address",
            "Client address unknown",
            "the service cannot tell where this request came from",
        )
    }

    /// A rule that applies keys on a body field, at a door that never sees a body
    /// (the forward-auth door): not decided without it (500, a fault of the
    /// configuration, which `weir check-config` refuses).
    pub(crate) fn body_not_seen() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "body-not-seen",
            "Body not seen",
            "a rule that applies to this request keys on a body field, and this door never sees a body: it is not decided without it",
        )
    }

    /// The forward-auth door was called by an address outside its `trusted_proxies`
    /// (403): nothing is decided, or anyone who reached it could spend a victim's
    /// budget.
    pub(crate) fn untrusted_caller() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "untrusted-caller",
            "Not a trusted proxy",
            "this door answers only the proxies listed in auth.trusted_proxies",
        )
    }

    /// The upstream could not be reached or failed (502).
    pub(crate) fn bad_gateway(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "bad-gateway",
            "Upstream unavailable",
            detail,
        )
    }

    /// The upstream did not answer in time (504).
    pub(crate) fn gateway_timeout(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "gateway-timeout",
            "Upstream timed out",
            detail,
        )
    }

    /// The limiter could not decide: its store failed (503). Not the client's fault,
    /// and never reported as a denial. The detail is fixed: what failed is in weir's
    /// log and metrics, never in a public answer (a store's own error text can name
    /// hosts, keys or versions).
    pub(crate) fn store_unavailable() -> Self {
        Self::unavailable("the rate limit store cannot decide right now; try again shortly")
    }

    /// `/readyz` while the store is unreachable (503): weir still serves, under each
    /// rule's failure policy, but its limits are not shared right now.
    pub(crate) fn not_ready() -> Self {
        Self::unavailable("degraded: the store is unreachable; rules follow their failure policy")
    }

    fn unavailable(detail: &'static str) -> Self {
        Self {
            retry_after_secs: Some(1),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store-unavailable",
                "Rate limit store unavailable",
                detail,
            )
        }
    }

    fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            kind,
            title,
            detail: detail.into(),
            retry_after_secs: None,
            violated: Vec::new(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = ProblemJson {
            kind: format!("/problems/{}", self.kind),
            title: self.title,
            status: self.status.as_u16(),
            detail: &self.detail,
            violated: &self.violated,
        };
        let json = serde_json::to_vec(&body).unwrap_or_default();
        let mut response = (self.status, json).into_response();
        response
            .extensions_mut()
            .insert(super::grpc::ProblemDetail(self.detail));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// "try again in N seconds", in the singular for one.
fn try_again_in(secs: u64) -> String {
    match secs {
        1 => "try again in 1 second".to_owned(),
        secs => format!("try again in {secs} seconds"),
    }
}

#[cfg(test)]
mod tests {
    use super::Problem;

    /// The wait reads as English: one second, not "1 seconds".
    #[test]
    fn the_wait_agrees_with_its_number() {
        let detail = |secs| Problem::rate_limited(vec!["api".into()], secs).detail;
        assert_eq!(detail(Some(1)), "Too many requests; try again in 1 second.");
        assert_eq!(
            detail(Some(2)),
            "Too many requests; try again in 2 seconds."
        );
        assert_eq!(
            detail(None),
            "This request costs more than the limit ever allows."
        );
        let banned = |secs| Problem::banned(vec!["login".into()], Some(secs), false).detail;
        assert_eq!(
            banned(1),
            "Banned after too many denied requests; try again in 1 second."
        );
        assert_eq!(
            banned(900),
            "Banned after too many denied requests; try again in 900 seconds."
        );
    }
}
