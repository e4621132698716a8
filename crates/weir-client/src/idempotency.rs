//! Which requests may be sent twice. A retry repeats a request the server may have
//! acted on (a 503 can come after the work, a connection can drop after it), so only
//! requests whose repetition is harmless are retried: the idempotent methods of
//! RFC 9110 (9.2.2), and others only when the caller says so.

use http::{HeaderMap, Method};

/// A marker to put in a request's extensions: this request may be retried whatever
/// its method (the server deduplicates it, say).
///
/// With reqwest-middleware: `client.post(url).with_extension(Idempotent)`; with the
/// tower layer: `request.extensions_mut().insert(Idempotent)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Idempotent;

/// Whether a request may be retried: an idempotent method, an `Idempotency-Key`
/// header, the [`Idempotent`] marker (`marked`), or a policy that retries everything.
pub(crate) fn may_repeat(method: &Method, headers: &HeaderMap, marked: bool, always: bool) -> bool {
    always
        || marked
        || headers.contains_key("idempotency-key")
        || matches!(
            *method,
            Method::GET
                | Method::HEAD
                | Method::OPTIONS
                | Method::TRACE
                | Method::PUT
                | Method::DELETE
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_and_patch_are_repeated_only_when_the_caller_says_so() {
        let none = HeaderMap::new();
        for method in [
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ] {
            assert!(may_repeat(&method, &none, false, false), "{method}");
        }
        for method in [Method::POST, Method::PATCH, Method::CONNECT] {
            assert!(!may_repeat(&method, &none, false, false), "{method}");
            assert!(may_repeat(&method, &none, true, false));
            assert!(may_repeat(&method, &none, false, true));
        }
        let mut keyed = HeaderMap::new();
        keyed.insert("idempotency-key", "8e03978e".parse().unwrap());
        assert!(may_repeat(&Method::POST, &keyed, false, false));
    }
}
