//! A rule's match on a request's values: a header, a query parameter or a cookie, each
//! read one way ([`crate::request`]: sent once, decoded once) and compared exactly, by
//! prefix, by a regular expression over the whole value, or by presence alone.
//!
//! A value that cannot be read one way (a header on two lines, `?tier=a&TIER=b`, a
//! cookie sent twice) refuses the request rather than match or miss: either answer
//! could be the one an attacker chose to escape the rule.

use axum::http::{HeaderMap, HeaderName};
use regex::{Regex, RegexBuilder};

use crate::request::{Refused, cookie, one_header, query_param};

/// The longest regular expression a match may give.
pub(crate) const MAX_REGEX_BYTES: usize = 1024;

/// What a compiled regular expression may take in memory: a pattern costing more
/// (`\w{1000}`) is refused when the configuration is loaded.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Where a matched value is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueSource {
    /// A request header.
    Header(HeaderName),
    /// A parameter of the query string.
    Query(String),
    /// A cookie.
    Cookie(String),
}

/// How a value is compared.
#[derive(Debug, Clone)]
pub(crate) enum Condition {
    /// Equal to this text.
    Exact(String),
    /// Starting with this text.
    Prefix(String),
    /// Matched whole by this expression.
    Regex(Regex),
    /// Sent (`true`) or not sent (`false`), whatever its value.
    Present(bool),
}

impl PartialEq for Condition {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Exact(a), Self::Exact(b)) | (Self::Prefix(a), Self::Prefix(b)) => a == b,
            (Self::Regex(a), Self::Regex(b)) => a.as_str() == b.as_str(),
            (Self::Present(a), Self::Present(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Condition {}

impl Condition {
    /// A condition that `pattern` matches the whole value.
    pub(crate) fn regex(pattern: &str) -> Result<Self, String> {
        if pattern.len() > MAX_REGEX_BYTES {
            return Err(format!(
                "the regular expression is longer than {MAX_REGEX_BYTES} bytes"
            ));
        }
        let build = |pattern: &str| {
            RegexBuilder::new(pattern)
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| format!("invalid regular expression: {e}"))
        };
        // Built as written first, so that an error quotes the pattern as written.
        build(pattern)?;
        build(&format!("^(?:{pattern})$")).map(Self::Regex)
    }

    fn holds(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (Self::Present(present), value) => *present == value.is_some(),
            (_, None) => false,
            (Self::Exact(want), Some(value)) => value == want,
            (Self::Prefix(prefix), Some(value)) => value.starts_with(prefix.as_str()),
            (Self::Regex(regex), Some(value)) => regex.is_match(value),
        }
    }
}

/// One condition on one value of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValueMatch {
    /// Where the value is read.
    pub source: ValueSource,
    /// How it is compared.
    pub condition: Condition,
}

impl ValueMatch {
    /// Whether a request with these headers and raw query holds the condition; a
    /// refusal when the value cannot be read one way.
    pub(crate) fn matches(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<bool, Refused> {
        let read = |found: Option<crate::request::Found>| found.map(|f| f.value);
        let value = match &self.source {
            ValueSource::Header(name) => one_header(headers, name)
                .map_err(Refused::bad_request)?
                .map(|value| {
                    value.to_str().map(str::to_owned).map_err(|_| {
                        Refused::bad_request(format!("`{name}` must be visible ASCII text"))
                    })
                })
                .transpose()?,
            ValueSource::Query(name) => match query {
                None => None,
                Some(query) => read(
                    query_param(query, name).map_err(|e| Refused::bad_request(e.to_string()))?,
                ),
            },
            ValueSource::Cookie(name) => {
                read(cookie(headers, name).map_err(|e| Refused::bad_request(e.to_string()))?)
            }
        };
        Ok(self.condition.holds(value.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn on(source: ValueSource, condition: Condition) -> ValueMatch {
        ValueMatch { source, condition }
    }

    #[test]
    fn headers_match_exactly_by_prefix_regex_or_presence() {
        let tier = || ValueSource::Header(HeaderName::from_static("x-tier"));
        let free = headers(&[("x-tier", "free-2024")]);
        let none = HeaderMap::new();
        let exact = on(tier(), Condition::Exact("free-2024".into()));
        assert_eq!(exact.matches(&free, None), Ok(true));
        assert_eq!(exact.matches(&none, None), Ok(false));
        let prefix = on(tier(), Condition::Prefix("free-".into()));
        assert_eq!(prefix.matches(&free, None), Ok(true));
        assert_eq!(
            prefix.matches(&headers(&[("x-tier", "pro")]), None),
            Ok(false)
        );
        // The whole value: `free` does not match `not-free`.
        let regex = on(tier(), Condition::regex("free|trial").unwrap());
        assert_eq!(
            regex.matches(&headers(&[("x-tier", "not-free")]), None),
            Ok(false)
        );
        assert_eq!(
            regex.matches(&headers(&[("x-tier", "trial")]), None),
            Ok(true)
        );
        let absent = on(tier(), Condition::Present(false));
        assert_eq!(absent.matches(&none, None), Ok(true));
        assert_eq!(absent.matches(&free, None), Ok(false));
    }

    #[test]
    fn a_value_read_two_ways_refuses_the_request() {
        let tier = on(
            ValueSource::Header(HeaderName::from_static("x-tier")),
            Condition::Exact("free".into()),
        );
        let twice = headers(&[("x-tier", "free"), ("x-tier", "pro")]);
        assert_eq!(tier.matches(&twice, None).map_err(|r| r.status()), Err(400));
        let underscored = headers(&[("x-tier", "free"), ("x_tier", "pro")]);
        assert!(tier.matches(&underscored, None).is_err());
        let format = on(
            ValueSource::Query("format".into()),
            Condition::Exact("csv".into()),
        );
        let none = HeaderMap::new();
        for query in [
            "format=csv",
            "FORMAT=csv",
            "f%6Frmat=csv",
            "format=c%73v",
            "x=1&format=csv",
        ] {
            assert_eq!(format.matches(&none, Some(query)), Ok(true), "{query}");
        }
        for query in [
            "format=csv&format=json",
            "format=json&Format=csv",
            "format[]=csv",
            "format=csv;format=json",
            "format=%zz",
        ] {
            assert!(format.matches(&none, Some(query)).is_err(), "{query}");
        }
        assert_eq!(format.matches(&none, None), Ok(false));
        let beta = on(
            ValueSource::Cookie("beta".into()),
            Condition::Exact("on".into()),
        );
        for cookies in [
            &[("cookie", "beta=on")][..],
            &[("cookie", "a=1; beta=\"on\"")],
            &[("cookie", "a=1"), ("cookie", "beta=%6Fn")],
        ] {
            assert_eq!(
                beta.matches(&headers(cookies), None),
                Ok(true),
                "{cookies:?}"
            );
        }
        for cookies in [
            &[("cookie", "beta=on; beta=off")][..],
            &[("cookie", "beta=on"), ("cookie", "Beta=off")],
            &[("cookie", "beta=%zz")],
            // Python's cookie parsers decode escapes in a quoted value, and read a
            // cookie after a space or comma in another's value.
            &[("cookie", "beta=\"o\\156\"")],
            &[("cookie", "x=1 beta=on")],
            &[("cookie", "x=1, beta=on")],
        ] {
            assert!(
                beta.matches(&headers(cookies), None).is_err(),
                "{cookies:?}"
            );
        }
    }

    #[test]
    fn costly_or_broken_expressions_are_refused() {
        assert!(Condition::regex("(").is_err());
        assert!(Condition::regex(&"a".repeat(MAX_REGEX_BYTES + 1)).is_err());
        assert!(Condition::regex(r"\w{1000}\w{1000}").is_err());
        assert!(Condition::regex(r"v[0-9]+").is_ok());
    }
}
