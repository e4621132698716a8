//! Costs known only once the request has been answered (`cost_from`): where a rule
//! reads a request's actual cost in the answer, and how a text found there is read.
//!
//! The rule's `cost` is the estimate reserved before the request goes on; when the
//! answer ends, the settlement gives back what the request did not use or charges what
//! it used beyond (a debt the caller waits out). A cost that cannot be read keeps the
//! estimate: an answer never settles for less than a number it states.

use axum::http::HeaderName;

/// Where a rule finds a request's actual cost in the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CostFrom {
    /// A header of the answer, e.g. `x-tokens-used: 1234`.
    ResponseHeader(HeaderName),
    /// A trailer, sent after a streamed answer's body (the body's end settles).
    Trailer(HeaderName),
    /// A number in the answer's JSON body, by JSON pointer (RFC 6901), e.g.
    /// `/usage/total_tokens`; read from a copy of a body labelled JSON, at most 4 MiB.
    Json(String),
}

impl CostFrom {
    /// A cost as a header or trailer states it: a whole number of units, in ASCII
    /// digits (surrounding spaces allowed); anything else is no cost.
    pub(crate) fn read_text(text: &[u8]) -> Option<u64> {
        let text = std::str::from_utf8(text).ok()?.trim();
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse().ok()
    }

    /// A cost as a JSON body states it at `pointer`: a non-negative integer (or an
    /// integral float, as some serialisers write counts); anything else is no cost.
    pub(crate) fn read_json(body: &serde_json::Value, pointer: &str) -> Option<u64> {
        let value = body.pointer(pointer)?;
        value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
                .map(|f| f as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_is_a_whole_number_or_nothing() {
        assert_eq!(CostFrom::read_text(b"1234"), Some(1234));
        assert_eq!(CostFrom::read_text(b" 7 "), Some(7));
        assert_eq!(CostFrom::read_text(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"-3",
            b"1.5",
            b"12abc",
            b"+4",
            b"\xff",
            b"99999999999999999999",
        ] {
            assert_eq!(CostFrom::read_text(bad), None, "{bad:?}");
        }
        let body = serde_json::json!({"usage": {"total_tokens": 812, "f": 3.0, "x": 2.5, "n": -1, "s": "9"}});
        assert_eq!(CostFrom::read_json(&body, "/usage/total_tokens"), Some(812));
        assert_eq!(CostFrom::read_json(&body, "/usage/f"), Some(3));
        for bad in [
            "/usage/x",
            "/usage/n",
            "/usage/s",
            "/usage/missing",
            "/usage",
        ] {
            assert_eq!(CostFrom::read_json(&body, bad), None, "{bad}");
        }
    }
}
