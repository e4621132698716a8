//! weir's own answers to gRPC calls, as gRPC clients read them: a gRPC client reads
//! only `grpc-status` and `grpc-message` (an HTTP 429 is to it an unknown failure with
//! no reason and no wait), so the gateway answers a call (`content-type:
//! application/grpc*`) that it stops with HTTP 200 and a trailers-only response: the
//! status for the problem (`RESOURCE_EXHAUSTED`, 8, for a rate limit), the problem's
//! detail as the message, and the RateLimit fields, `Retry-After` and
//! `grpc-retry-pushback-ms` (the wait gRPC's retry policy honours) as metadata.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

/// The detail of one of weir's own problem answers, carried with it so that it can be
/// told apart from an upstream's answer and given to a gRPC client as its message.
#[derive(Debug, Clone)]
pub(crate) struct ProblemDetail(pub(crate) String);

/// Whether a request with `headers` is a gRPC call (`application/grpc`, `+proto`,
/// `+json`, `-web`...).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.len() >= 16 && value[..16].eq_ignore_ascii_case(b"application/grpc")
    })
}

/// The HTTP status a gRPC answer stands for, for the rules counted by outcome: its
/// `grpc-status` when the answer carries it in its headers (a trailers-only answer),
/// mapped as gRPC maps HTTP (UNAUTHENTICATED is 401, PERMISSION_DENIED 403...). `None`
/// for an answer that is not gRPC, or whose status comes only in its trailers: its
/// HTTP 200 says nothing of the call's outcome.
pub(crate) fn outcome_status(answer: &HeaderMap) -> Option<u16> {
    let code: u16 = answer
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(match code {
        0 => 200,
        1 => 499,
        3 | 9 | 11 => 400,
        4 => 504,
        5 => 404,
        6 | 10 => 409,
        7 => 403,
        8 => 429,
        12 => 501,
        14 => 503,
        16 => 401,
        _ => 500,
    })
}

/// `response` for a gRPC client, if it is weir's own problem; an upstream's answer
/// as it is.
pub(crate) fn for_grpc(response: Response) -> Response {
    let Some(ProblemDetail(detail)) = response.extensions().get::<ProblemDetail>().cloned() else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    let code = grpc_code(parts.status);
    parts.status = StatusCode::OK;
    let headers = &mut parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from(code));
    // An HTTP 200 that is a refusal: never kept by a cache.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(message) = HeaderValue::try_from(percent_encoded(&detail)) {
        headers.insert("grpc-message", message);
    }
    // The exact wait when weir gave it, else Retry-After's whole seconds.
    let retry_ms = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .or_else(|| {
            headers
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                .map(|secs| secs.saturating_mul(1000))
        });
    if let Some(ms) = retry_ms {
        headers.insert("grpc-retry-pushback-ms", HeaderValue::from(ms));
    }
    Response::from_parts(parts, axum::body::Body::empty())
}

/// The gRPC status code for weir's own answer `status`.
fn grpc_code(status: StatusCode) -> u16 {
    match status.as_u16() {
        // RESOURCE_EXHAUSTED: a limit, or a body past its bound.
        429 | 413 => 8,
        // INVALID_ARGUMENT: a request weir cannot read one way.
        400 | 415 | 421 | 431 => 3,
        // DEADLINE_EXCEEDED
        408 | 504 => 4,
        // UNAVAILABLE: the store, the upstream, or shedding.
        502 | 503 => 14,
        401 => 16,
        403 => 7,
        404 => 12,
        // UNKNOWN
        _ => 2,
    }
}

/// `text` as a `grpc-message`: bytes outside printable ASCII, and `%`, percent-encoded
/// (the gRPC HTTP/2 protocol's rule).
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;

    #[test]
    fn a_grpc_status_in_the_headers_stands_for_its_http_status() {
        let with = |code: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("grpc-status", HeaderValue::try_from(code).unwrap());
            outcome_status(&headers)
        };
        assert_eq!(with("0"), Some(200));
        assert_eq!(with("16"), Some(401));
        assert_eq!(with("7"), Some(403));
        assert_eq!(with("8"), Some(429));
        assert_eq!(with("14"), Some(503));
        assert_eq!(with("99"), Some(500));
        assert_eq!(with("x"), None);
        assert_eq!(outcome_status(&HeaderMap::new()), None);
    }
    use crate::edge::Problem;

    #[test]
    fn a_denial_is_resource_exhausted_with_its_wait_as_metadata() {
        let mut denied = Problem::rate_limited(vec!["api".into()], Some(3)).into_response();
        // The fields every door adds to a denial.
        let fields = denied.headers_mut();
        fields.insert("ratelimit", HeaderValue::from_static("\"api\";r=0;t=3"));
        fields.insert(header::RETRY_AFTER, HeaderValue::from(3));
        let answer = for_grpc(denied);
        assert_eq!(answer.status(), StatusCode::OK);
        let headers = answer.headers();
        assert_eq!(headers["content-type"], "application/grpc");
        assert_eq!(headers["grpc-status"], "8");
        assert_eq!(
            headers["grpc-message"],
            "Too many requests; try again in 3 seconds."
        );
        assert_eq!(headers["retry-after"], "3");
        assert_eq!(headers["grpc-retry-pushback-ms"], "3000");
        assert_eq!(headers["ratelimit"], "\"api\";r=0;t=3");
        assert!(headers.get("content-length").is_none());
    }

    #[test]
    fn other_answers_of_weir_have_their_codes_and_an_upstreams_is_left_alone() {
        let code = |response: Response| for_grpc(response).headers()["grpc-status"].clone();
        assert_eq!(code(Problem::store_unavailable().into_response()), "14");
        assert_eq!(code(Problem::invalid_request("x").into_response()), "3");
        assert_eq!(code(Problem::gateway_timeout("x").into_response()), "4");
        let upstream = (StatusCode::TOO_MANY_REQUESTS, "theirs").into_response();
        let answer = for_grpc(upstream);
        assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(answer.headers().get("grpc-status").is_none());
    }

    #[test]
    fn grpc_calls_are_told_by_their_content_type() {
        let headers = |value: &'static str| {
            let mut map = HeaderMap::new();
            map.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            map
        };
        assert!(is_grpc(&headers("application/grpc")));
        assert!(is_grpc(&headers("Application/GRPC+proto")));
        assert!(is_grpc(&headers("application/grpc-web")));
        assert!(!is_grpc(&headers("application/json")));
        assert!(!is_grpc(&HeaderMap::new()));
        assert_eq!(percent_encoded("50% off, café"), "50%25 off, caf%C3%A9");
    }
}
