//! Who the caller is, for a rule: an API key header, a verified JWT claim, the client
//! IP, a field of the request body (a login email), normalised where users expect it.

use axum::http::HeaderName;
use weir_core::Clock;

use crate::request::{
    Facts, Found, JwtVerifier, Refused, body_field, cookie, ip_key, normalize_email, one_header,
    query_param,
};

/// The longest identity accepted; a request with a longer one is refused, which keeps
/// keys bounded.
pub(super) const MAX_IDENTITY_BYTES: usize = 1024;

/// Where an identity comes from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A request header, e.g. `X-Api-Key`.
    Header(HeaderName),
    /// A claim of a verified JWT.
    Jwt(JwtVerifier),
    /// A top-level field of a JSON or form body.
    BodyField(String),
    /// A parameter of the query string.
    QueryParam(String),
    /// A cookie.
    Cookie(String),
    /// The client's IP address (behind trusted proxies, from the forwarding headers).
    ClientIp,
}

/// How an identity is normalised before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Normalize {
    /// As sent.
    #[default]
    None,
    /// One account however it is written: invisible characters removed, NFKC, case
    /// folded, trimmed (see [`crate::request::identity_text`]): `Ana@X.io ` and
    /// `ana@x.io` are one account.
    Email,
}

/// A caller's identity as read from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The identity, normalised.
    pub value: String,
    /// Whether the request wrote it exactly so. An identity that normalising changed
    /// (`ANA@x.io`) may be another account to an app that compares exactly: such a
    /// request never resets keys (`reset_statuses`), so that a success on an account
    /// the attacker owns cannot clear another's failures.
    pub exact: bool,
}

/// A named way to identify callers.
#[derive(Debug, Clone)]
pub(crate) struct IdentitySource {
    /// The name rules refer to it by.
    pub name: String,
    /// Where it is read.
    pub source: Source,
    /// How it is normalised.
    pub normalize: Normalize,
}

impl IdentitySource {
    /// The caller's identity: `None` when the request does not carry it (or carries a
    /// token that fails verification: the caller is anonymous), an error when it
    /// carries it in a way that cannot be read one way (the request is refused).
    pub(crate) fn identify(
        &self,
        facts: Facts<'_>,
        ipv6_prefix: u8,
        clock: &dyn Clock,
    ) -> Result<Option<Identity>, Refused> {
        // Whether the request wrote the identity's name and value exactly so (a query
        // parameter or cookie may be respelled, as a normalised value may).
        let mut spelled_exactly = true;
        let mut respelled = |found: Found| {
            spelled_exactly = found.exact;
            found.value
        };
        let raw = match &self.source {
            Source::Header(name) => {
                let Some(value) = one_header(facts.headers, name).map_err(Refused::bad_request)?
                else {
                    return Ok(None);
                };
                value
                    .to_str()
                    .map_err(|_| {
                        Refused::bad_request(format!("`{name}` must be visible ASCII text"))
                    })?
                    .to_owned()
            }
            // A token sent twice could be read as either: the app may read the other.
            Source::Jwt(verifier)
                if facts
                    .headers
                    .get_all(verifier.header())
                    .iter()
                    .nth(1)
                    .is_some() =>
            {
                return Err(Refused::bad_request(format!(
                    "`{}` is sent more than once; send one token",
                    verifier.header()
                )));
            }
            Source::Jwt(verifier) => match verifier.claim(facts.headers, clock.wall_secs()) {
                Some(claim) => claim,
                None => return Ok(None),
            },
            Source::BodyField(field) => {
                let Some(body) = facts.body else {
                    return Ok(None);
                };
                match body_field(facts.headers, body, field, facts.query) {
                    Ok(Some(value)) => value,
                    Ok(None) => return Ok(None),
                    Err(e) if e.is_unsupported_media_type() => {
                        return Err(Refused::unsupported_media_type(e.to_string()));
                    }
                    Err(e) => return Err(Refused::bad_request(e.to_string())),
                }
            }
            Source::QueryParam(name) => match facts.query.map(|q| query_param(q, name)) {
                None | Some(Ok(None)) => return Ok(None),
                Some(Ok(Some(found))) => respelled(found),
                Some(Err(e)) => return Err(Refused::bad_request(e.to_string())),
            },
            Source::Cookie(name) => match cookie(facts.headers, name) {
                Ok(None) => return Ok(None),
                Ok(Some(found)) => respelled(found),
                Err(e) => return Err(Refused::bad_request(e.to_string())),
            },
            Source::ClientIp => ip_key(facts.client_ip, ipv6_prefix),
        };
        if raw.is_empty() {
            return Ok(None);
        }
        let value = match self.normalize {
            Normalize::None => raw.clone(),
            Normalize::Email => normalize_email(&raw).map_err(|_| {
                Refused::bad_request(format!(
                    "`{}` has nothing but spaces or invisible characters",
                    self.name
                ))
            })?,
        };
        if value.len() > MAX_IDENTITY_BYTES {
            return Err(Refused::bad_request(format!(
                "`{}` is longer than {MAX_IDENTITY_BYTES} bytes",
                self.name
            )));
        }
        Ok(Some(Identity {
            exact: spelled_exactly && value == raw,
            value,
        }))
    }

    /// Whether identifying needs the request body.
    pub(crate) fn reads_body(&self) -> bool {
        matches!(self.source, Source::BodyField(_))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, Method, header};

    use super::*;

    fn facts<'a>(headers: &'a HeaderMap, body: &'a [u8]) -> Facts<'a> {
        Facts {
            method: &Method::POST,
            path: "/",
            query: None,
            host: None,
            headers,
            client_ip: "2001:db8:1:2:3:4:5:6".parse().unwrap(),
            trusted_peer: false,
            body: Some(body),
        }
    }

    fn read(
        source: &IdentitySource,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Option<String>, u16> {
        source
            .identify(facts(headers, body), 64, &weir_core::ManualClock::new(0))
            .map(|i| i.map(|i| i.value))
            .map_err(|r| r.status())
    }

    #[test]
    fn emails_are_one_account_however_written_and_unreadable_ones_refuse() {
        let email = IdentitySource {
            name: "email".into(),
            source: Source::BodyField("email".into()),
            normalize: Normalize::Email,
        };
        let mut json = HeaderMap::new();
        json.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        for written in [r#"" Ana@X.io ""#, r#""\u200bana@x.io""#, r#""ａｎａ@x.io""#] {
            let body = format!(r#"{{"email": {written}}}"#);
            assert_eq!(
                read(&email, &json, body.as_bytes()),
                Ok(Some("ana@x.io".into())),
                "{written}"
            );
        }
        let mut form = HeaderMap::new();
        form.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded".parse().unwrap(),
        );
        assert_eq!(
            read(&email, &form, b"email=ana%40x.io&password=x"),
            Ok(Some("ana@x.io".into()))
        );
        assert_eq!(
            read(&email, &json, br#"{"password": "x"}"#),
            Ok(None),
            "absent"
        );
        assert_eq!(read(&email, &json, br#"{"email": 5}"#), Err(400));
        assert_eq!(read(&email, &json, b"{not json"), Err(400));
        assert_eq!(
            read(&email, &json, br#"{"email": "a@b", "EMAIL": "c@d"}"#),
            Err(400)
        );
        assert_eq!(read(&email, &form, b"email=decoy&email=victim"), Err(400));
        assert_eq!(read(&email, &json, br#"{"email": "\u200b "}"#), Err(400));
        assert_eq!(
            read(&email, &HeaderMap::new(), br#"{"email": "a@b"}"#),
            Err(415)
        );
    }

    #[test]
    fn headers_are_read_once_and_ips_by_prefix() {
        let key = IdentitySource {
            name: "api_key".into(),
            source: Source::Header(HeaderName::from_static("x-api-key")),
            normalize: Normalize::None,
        };
        let mut headers = HeaderMap::new();
        assert_eq!(read(&key, &headers, b""), Ok(None));
        headers.insert("x-api-key", "k-1".parse().unwrap());
        assert_eq!(read(&key, &headers, b""), Ok(Some("k-1".into())));
        headers.append("x-api-key", "k-2".parse().unwrap());
        assert_eq!(
            read(&key, &headers, b""),
            Err(400),
            "two values: which one?"
        );
        let mut underscored = HeaderMap::new();
        underscored.insert("x-api-key", "k-1".parse().unwrap());
        underscored.insert("x_api_key", "k-2".parse().unwrap());
        assert_eq!(
            read(&key, &underscored, b""),
            Err(400),
            "X_Api_Key is X-Api-Key to WSGI"
        );
        headers.insert(
            "x-api-key",
            "k".repeat(MAX_IDENTITY_BYTES + 1).parse().unwrap(),
        );
        assert_eq!(read(&key, &headers, b""), Err(400));
        let ip = IdentitySource {
            name: "ip".into(),
            source: Source::ClientIp,
            normalize: Normalize::None,
        };
        assert_eq!(
            read(&ip, &headers, b""),
            Ok(Some("2001:db8:1:2::/64".into()))
        );
    }
}
