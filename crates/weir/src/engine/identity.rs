//! Who the caller is, for a rule: an API key header, a verified JWT claim, the client
//! IP, a field of the request body (a login email), normalised where users expect it.

use axum::http::{HeaderMap, HeaderName, header};

use super::facts::Facts;
use crate::gateway::jwt::JwtVerifier;

/// The longest identity used as is; a longer one is not trusted (the caller counts as
/// anonymous), which keeps keys bounded.
pub const MAX_IDENTITY_BYTES: usize = 1024;

/// Where an identity comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A request header, e.g. `X-Api-Key`.
    Header(HeaderName),
    /// A claim of a verified JWT.
    Jwt(JwtVerifier),
    /// A top-level field of a JSON or form body.
    BodyField(String),
    /// The client's IP address (behind trusted proxies, from the forwarding headers).
    ClientIp,
}

/// How an identity is normalised before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Normalize {
    /// As sent.
    #[default]
    None,
    /// Trimmed and lowercased: `Ana@X.io ` and `ana@x.io` are one account.
    Email,
}

/// A named way to identify callers.
#[derive(Debug, Clone)]
pub struct IdentitySource {
    /// The name rules refer to it by.
    pub name: String,
    /// Where it is read.
    pub source: Source,
    /// How it is normalised.
    pub normalize: Normalize,
}

impl IdentitySource {
    /// The caller's identity, or `None` when the request does not carry one (or carries
    /// an invalid one).
    pub fn identify(&self, facts: Facts<'_>) -> Option<String> {
        let raw = match &self.source {
            Source::Header(name) => facts.headers.get(name)?.to_str().ok()?.to_owned(),
            Source::Jwt(verifier) => verifier.claim(facts.headers)?,
            Source::BodyField(field) => body_field(facts.headers, facts.body?, field)?,
            Source::ClientIp => facts.client_ip.to_string(),
        };
        let value = match self.normalize {
            Normalize::None => raw,
            Normalize::Email => raw.trim().to_lowercase(),
        };
        (!value.is_empty() && value.len() <= MAX_IDENTITY_BYTES).then_some(value)
    }

    /// Whether identifying needs the request body.
    pub fn reads_body(&self) -> bool {
        matches!(self.source, Source::BodyField(_))
    }
}

/// A top-level string field of a JSON body, or a field of a form body.
fn body_field(headers: &HeaderMap, body: &[u8], field: &str) -> Option<String> {
    let content_type = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = content_type.split(';').next()?.trim().to_ascii_lowercase();
    match media.as_str() {
        "application/json" => match serde_json::from_slice::<serde_json::Value>(body)
            .ok()?
            .get(field)?
        {
            serde_json::Value::String(s) => Some(s.clone()),
            _ => None,
        },
        "application/x-www-form-urlencoded" => form_urlencoded::parse(body)
            .find(|(name, _)| name == field)
            .map(|(_, value)| value.into_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(headers: &'a HeaderMap, body: &'a [u8]) -> Facts<'a> {
        Facts {
            method: &axum::http::Method::POST,
            path: "/",
            host: None,
            headers,
            client_ip: "192.0.2.1".parse().unwrap(),
            body: Some(body),
        }
    }

    #[test]
    fn emails_are_normalised_from_json_and_forms() {
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
        assert_eq!(
            email.identify(facts(&json, br#"{"email": " Ana@X.io "}"#)),
            Some("ana@x.io".into())
        );
        let mut form = HeaderMap::new();
        form.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded".parse().unwrap(),
        );
        assert_eq!(
            email.identify(facts(&form, b"email=ana%40x.io&password=x")),
            Some("ana@x.io".into())
        );
        assert_eq!(email.identify(facts(&json, br#"{"email": 5}"#)), None);
        assert_eq!(email.identify(facts(&json, b"{not json")), None);
        assert_eq!(
            email.identify(facts(&HeaderMap::new(), br#"{"email": "a@b"}"#)),
            None
        );
    }

    #[test]
    fn headers_and_ips_identify_callers() {
        let key = IdentitySource {
            name: "api_key".into(),
            source: Source::Header(HeaderName::from_static("x-api-key")),
            normalize: Normalize::None,
        };
        let mut headers = HeaderMap::new();
        assert_eq!(key.identify(facts(&headers, b"")), None);
        headers.insert("x-api-key", "k-1".parse().unwrap());
        assert_eq!(key.identify(facts(&headers, b"")), Some("k-1".into()));
        headers.insert(
            "x-api-key",
            "k".repeat(MAX_IDENTITY_BYTES + 1).parse().unwrap(),
        );
        assert_eq!(key.identify(facts(&headers, b"")), None);
        let ip = IdentitySource {
            name: "ip".into(),
            source: Source::ClientIp,
            normalize: Normalize::None,
        };
        assert_eq!(ip.identify(facts(&headers, b"")), Some("192.0.2.1".into()));
    }
}
