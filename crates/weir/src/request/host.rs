//! The canonical host of a request: what `host:` in a rule is compared with.
//!
//! - The authority of an absolute-form target (`GET http://api.example.com/ HTTP/1.1`)
//!   wins over `Host`, as RFC 9112 section 3.2.2 says; a `Host` that names another host
//!   or port is refused, since the app (or a proxy before it) may read either one.
//! - Two `Host` lines are refused (RFC 9112 section 3.2: a 400).
//! - Names are lower-cased, without the port and without a trailing dot
//!   (`API.Example.com.:8080` is `api.example.com`). A name holds ASCII letters,
//!   digits, `-` and `_` in dot-separated labels of 1 to 63 characters, 253 at most;
//!   anything else (percent-encoding, non-ASCII, spaces, a user name) is refused. An
//!   internationalised name arrives in its `xn--` form and is compared in that form.
//! - IP literals come back in one spelling: IPv4 dotted decimal, IPv6 compressed and
//!   without brackets (`[2001:DB8:0::1]:443` is `2001:db8::1`). A name whose last label
//!   is numeric must be a dotted-decimal IPv4 address: `127.1`, `0x7f.0.0.1`,
//!   `2130706433` and `1.2.3.04`, which some resolvers read as addresses, are refused,
//!   as the WHATWG URL standard does.
//! - No `Host` and no absolute-form target (an HTTP/1.0 request), or an empty `Host`:
//!   `Ok(None)`. The caller decides what that means; a rule with a `host` never
//!   matches a request without one.

use std::net::{Ipv4Addr, Ipv6Addr};

use axum::http::{HeaderMap, Uri, header};

use super::push_ip;

/// Why a request's host cannot be read one way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum HostError {
    /// More than one `Host` header line.
    #[error("the request has more than one Host header")]
    MultipleHosts,
    /// `Host` and the absolute-form request target name different hosts or ports.
    #[error("the Host header disagrees with the host in the request target")]
    Disagrees,
    /// Not a host name or IP literal, with an optional port.
    #[error("the host `{0}` is not a valid host name or IP address")]
    Invalid(String),
}

/// The canonical host of a request (see the [module docs](self)).
pub(crate) fn canonical_host(headers: &HeaderMap, uri: &Uri) -> Result<Option<String>, HostError> {
    let mut lines = headers.get_all(header::HOST).iter();
    let host_line = lines.next();
    if lines.next().is_some() {
        return Err(HostError::MultipleHosts);
    }
    let from_header = match host_line {
        None => None,
        Some(value) => {
            let text = value
                .to_str()
                .map_err(|_| HostError::Invalid(String::from_utf8_lossy(value.as_bytes()).into()))?
                .trim_matches([' ', '\t']);
            if text.is_empty() {
                None
            } else {
                Some(host_and_port(text)?)
            }
        }
    };
    let Some(authority) = uri.authority() else {
        return Ok(from_header.map(|(host, _)| host));
    };
    if authority.as_str().contains('@') {
        return Err(HostError::Invalid(authority.as_str().to_owned()));
    }
    let (host, port) = host_and_port(authority.as_str())?;
    let default_port = match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("https") => Some(443),
        Some(s) if s.eq_ignore_ascii_case("http") => Some(80),
        _ => None,
    };
    let effective = |port: Option<u16>| port.or(default_port);
    if let Some((header_host, header_port)) = from_header
        && (header_host != host || effective(header_port) != effective(port))
    {
        return Err(HostError::Disagrees);
    }
    Ok(Some(host))
}

/// Reads `host[:port]` into the canonical host and the port, if any.
fn host_and_port(text: &str) -> Result<(String, Option<u16>), HostError> {
    let invalid = || HostError::Invalid(text.to_owned());
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (literal, after) = rest.split_once(']').ok_or_else(invalid)?;
        let ip: Ipv6Addr = literal.parse().map_err(|_| invalid())?;
        let port = match after {
            "" => None,
            p => port(p.strip_prefix(':').ok_or_else(invalid)?).ok_or_else(invalid)?,
        };
        return Ok((ip.to_string(), port));
    } else {
        match text.rsplit_once(':') {
            Some((host, p)) => (host, port(p).ok_or_else(invalid)?),
            None => (text, None),
        }
    };
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() || name.len() > 253 {
        return Err(invalid());
    }
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !name.split('.').all(label_ok) {
        return Err(invalid());
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || (last.len() > 1
            && last[..2].eq_ignore_ascii_case("0x")
            && last[2..].bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        let ip: Ipv4Addr = name.parse().map_err(|_| invalid())?;
        let mut text = String::with_capacity(15);
        push_ip(&mut text, ip.into());
        return Ok((text, port));
    }
    Ok((name.to_ascii_lowercase(), port))
}

/// A port: empty (no port, as RFC 3986 allows) or 1 to 5 digits up to 65535.
fn port(text: &str) -> Option<Option<u16>> {
    if text.is_empty() {
        return Some(None);
    }
    if text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn read(hosts: &[&str], target: &str) -> Result<Option<String>, HostError> {
        let mut headers = HeaderMap::new();
        for host in hosts {
            headers.append(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        canonical_host(&headers, &target.parse().unwrap())
    }

    fn host(h: &str) -> Result<Option<String>, HostError> {
        read(&[h], "/")
    }

    #[test]
    fn names_are_lower_case_without_port_or_trailing_dot() {
        let cases = [
            ("api.example.com", "api.example.com"),
            ("API.Example.COM", "api.example.com"),
            ("api.example.com:8080", "api.example.com"),
            ("api.example.com.", "api.example.com"),
            ("API.example.com.:443", "api.example.com"),
            ("api.example.com:", "api.example.com"),
            ("[::1]:", "::1"),
            (" api.example.com ", "api.example.com"),
            ("localhost", "localhost"),
            ("my_service.internal", "my_service.internal"),
            ("xn--bcher-kva.de", "xn--bcher-kva.de"),
            ("a1.b-2.c3", "a1.b-2.c3"),
            ("0x.example", "0x.example"),
            ("1.2.3.example", "1.2.3.example"),
        ];
        for (raw, want) in cases {
            assert_eq!(host(raw), Ok(Some(want.into())), "{raw}");
        }
    }

    #[test]
    fn ip_literals_have_one_spelling() {
        let cases = [
            ("192.0.2.1", "192.0.2.1"),
            ("192.0.2.1:80", "192.0.2.1"),
            ("[2001:DB8:0:0::1]", "2001:db8::1"),
            ("[2001:db8::1]:8443", "2001:db8::1"),
            ("[::1]", "::1"),
            ("[::FFFF:192.0.2.1]", "::ffff:192.0.2.1"),
        ];
        for (raw, want) in cases {
            assert_eq!(host(raw), Ok(Some(want.into())), "{raw}");
        }
    }

    #[test]
    fn invalid_hosts_are_refused() {
        for raw in [
            "exa mple.com",
            "example..com",
            ".example.com",
            "example.com..",
            "ex%41mple.com",
            "user@example.com",
            "example.com:http",
            "example.com:65536",
            "example.com:123456",
            "example.com:-1",
            "example.com:80:80",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "1.2.3.04",
            "256.0.0.1",
            "example.123",
            "a.0x1f",
            "[2001:db8::1",
            "[2001:db8::zz]",
            "[v1.fe]",
            "[fe80::1%25eth0]",
            "[::1]x",
            "[::1]:x",
            "2001:db8::1",
            &"a".repeat(64),
            &format!("{}.com", ["abc"; 70].join(".")),
            "bücher.de",
        ] {
            assert!(
                matches!(host(raw), Err(HostError::Invalid(_))),
                "{raw}: {:?}",
                host(raw)
            );
        }
    }

    #[test]
    fn absolute_form_targets_win_and_must_agree_with_host() {
        assert_eq!(
            read(&[], "http://API.example.com:80/x"),
            Ok(Some("api.example.com".into()))
        );
        assert_eq!(
            read(&["api.example.com"], "http://api.example.com/x"),
            Ok(Some("api.example.com".into()))
        );
        assert_eq!(
            read(&["API.example.com:80"], "http://api.example.com/x"),
            Ok(Some("api.example.com".into()))
        );
        assert_eq!(
            read(&["api.example.com:443"], "https://api.example.com/x"),
            Ok(Some("api.example.com".into()))
        );
        assert_eq!(
            read(&["other.example.com"], "http://api.example.com/x"),
            Err(HostError::Disagrees)
        );
        assert_eq!(
            read(&["api.example.com:8080"], "http://api.example.com/x"),
            Err(HostError::Disagrees)
        );
        assert_eq!(
            read(&["api.example.com"], "http://api.example.com:8080/x"),
            Err(HostError::Disagrees)
        );
        assert!(matches!(
            read(&["api.example.com"], "http://u@api.example.com/x"),
            Err(HostError::Invalid(_))
        ));
        assert_eq!(read(&[""], "http://[::1]:80/"), Ok(Some("::1".into())));
    }

    #[test]
    fn two_host_lines_are_refused_and_none_is_none() {
        assert_eq!(
            read(&["a.example", "a.example"], "/"),
            Err(HostError::MultipleHosts)
        );
        assert_eq!(
            read(&["a.example", "b.example"], "http://a.example/"),
            Err(HostError::MultipleHosts)
        );
        assert_eq!(read(&[], "/"), Ok(None));
        assert_eq!(read(&[""], "/"), Ok(None));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            HeaderValue::from_bytes(b"caf\xe9.fr").unwrap(),
        );
        assert!(matches!(
            canonical_host(&headers, &"/".parse().unwrap()),
            Err(HostError::Invalid(_))
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        #[test]
        fn a_canonical_host_reads_as_itself(text in "[a-zA-Z0-9.:_\\[\\]-]{0,40}") {
            if let Ok(Some(canonical)) = host(&text) {
                // IPv6 literals come back without brackets; put them back to re-read.
                let again = if canonical.contains(':') {
                    format!("[{canonical}]")
                } else {
                    canonical.clone()
                };
                proptest::prop_assert_eq!(host(&again), Ok(Some(canonical)));
            }
        }
    }
}
