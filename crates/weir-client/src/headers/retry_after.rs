//! `Retry-After` (RFC 9110, 10.2.3): delta seconds or an HTTP date; and
//! `Retry-After-Ms`, the same wait in milliseconds that weir, OpenAI and Azure send
//! beside it (read first: whole seconds can be a second too long). Anything else (two
//! values, a negative or fractional number, text) is no instruction at all; numbers too
//! large for a `u64` saturate, and the caller's `max_wait` decides what a huge wait
//! means. Nothing here can panic on what a server sends.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::RETRY_AFTER;

/// The wait `Retry-After-Ms`, else `Retry-After`, asks for, with the wall clock reading
/// `wall`: `None` when both are absent, repeated or unreadable; a date in the past is
/// no wait.
pub(crate) fn retry_after(headers: &HeaderMap, wall: SystemTime) -> Option<Duration> {
    if let Some(millis) = single(headers, RETRY_AFTER_MS).and_then(digits) {
        return Some(Duration::from_millis(millis));
    }
    let text = single(headers, RETRY_AFTER)?;
    if let Some(seconds) = digits(text) {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(text).ok()?;
    Some(date.duration_since(wall).unwrap_or(Duration::ZERO))
}

/// `Retry-After-Ms`.
const RETRY_AFTER_MS: &str = "retry-after-ms";

/// The field's one value, trimmed; `None` when absent, repeated or not text.
fn single(headers: &HeaderMap, name: impl http::header::AsHeaderName) -> Option<&str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    Some(value.to_str().ok()?.trim())
}

/// A whole number in ASCII digits; past a `u64` it saturates (a wait past any cap).
fn digits(text: &str) -> Option<u64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u64>().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    /// Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date.
    fn wall() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    fn parse(values: &[&[u8]]) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(RETRY_AFTER, HeaderValue::from_bytes(value).unwrap());
        }
        retry_after(&headers, wall())
    }

    #[test]
    fn milliseconds_come_first_and_fall_back_to_seconds() {
        let with = |ms: &[&str], secs: &str| {
            let mut headers = HeaderMap::new();
            for value in ms {
                headers.append(RETRY_AFTER_MS, HeaderValue::from_str(value).unwrap());
            }
            headers.append(RETRY_AFTER, HeaderValue::from_str(secs).unwrap());
            retry_after(&headers, wall())
        };
        assert_eq!(with(&["1250"], "2"), Some(Duration::from_millis(1250)));
        assert_eq!(with(&[" 40 "], "1"), Some(Duration::from_millis(40)));
        // Unreadable or repeated: the seconds decide.
        for bad in [&["1.5"][..], &["-3"], &["soon"], &["10", "20"], &[""]] {
            assert_eq!(with(bad, "2"), Some(Duration::from_secs(2)), "{bad:?}");
        }
        assert_eq!(
            with(&["99999999999999999999"], "1"),
            Some(Duration::from_millis(u64::MAX))
        );
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(parse(&[b"120"]), Some(Duration::from_secs(120)));
        assert_eq!(parse(&[b"0"]), Some(Duration::ZERO));
        assert_eq!(parse(&[b" 7 "]), Some(Duration::from_secs(7)));
        assert_eq!(parse(&[b"007"]), Some(Duration::from_secs(7)));
    }

    #[test]
    fn http_dates_in_each_form_the_rfc_accepts() {
        let later = Some(Duration::from_secs(60));
        assert_eq!(parse(&[b"Sun, 06 Nov 1994 08:50:37 GMT"]), later);
        assert_eq!(parse(&[b"Sunday, 06-Nov-94 08:50:37 GMT"]), later);
        assert_eq!(parse(&[b"Sun Nov  6 08:50:37 1994"]), later);
        assert_eq!(
            parse(&[b"Sun, 06 Nov 1994 08:00:00 GMT"]),
            Some(Duration::ZERO),
            "a date in the past is no wait"
        );
    }

    #[test]
    fn garbage_is_no_instruction() {
        for garbage in [
            &b""[..],
            b"soon",
            b"-5",
            b"1.5",
            b"+3",
            b"0x10",
            b"12 34",
            b"Sun, 06 Nov 1994 25:00:00 GMT",
            b"\xff\xfe",
        ] {
            assert_eq!(
                parse(&[garbage]),
                None,
                "{:?}",
                String::from_utf8_lossy(garbage)
            );
        }
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&[b"1", b"2"]), None, "two values: which one?");
    }

    #[test]
    fn huge_numbers_saturate() {
        assert_eq!(
            parse(&[b"18446744073709551615"]),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse(&[b"99999999999999999999999999999999999999"]),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse(&[b"Fri, 31 Dec 9999 23:59:59 GMT"]).map(|d| d > Duration::from_secs(1 << 37)),
            Some(true)
        );
    }
}
