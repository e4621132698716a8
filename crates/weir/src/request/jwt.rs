//! Verified JWT claims: HS256 with a secret, RS256 / ES256 with a public key (PEM) or a
//! local JWKS file. The signature and the expiry are always checked, `nbf` (not before)
//! when the token has one, and `aud` / `iss` when the configuration names an audience or
//! an issuer (a token without the claim is then refused too). A token that fails any
//! check is never trusted (the caller is anonymous).
//!
//! Clocks: both times are checked against the time the caller passes (the engine's
//! clock's wall time, so that expiry can be tested on a manual clock; jsonwebtoken's
//! own checks read the system time and are turned off), as jsonwebtoken checked them
//! before: a token is valid through its `exp` second and expired after it; `nbf` is
//! checked with [`NBF_LEEWAY`], as jsonwebtoken's default leeway: an issuer whose clock
//! is a little ahead of weir's gives tokens that are not yet valid here for a few
//! seconds, and refusing them would turn clock skew into failed requests. Times may be
//! fractional (RFC 7519's NumericDate), and are rounded to the nearest second; a
//! negative, non-numeric or absurd one invalidates the token.

use std::fmt;

use axum::http::{HeaderMap, HeaderName};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// How far in the future a token's `nbf` may be, in seconds, for clock skew.
pub(super) const NBF_LEEWAY: u64 = 60;

/// How to verify tokens, and which claim to read.
#[derive(Clone)]
pub(crate) struct JwtVerifier {
    header: HeaderName,
    claim: String,
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
    audience: Vec<String>,
    issuer: Vec<String>,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("header", &self.header)
            .field("claim", &self.claim)
            .field("keys", &self.keys.len())
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .finish()
    }
}

/// Where the verification key comes from.
#[derive(Debug, Clone)]
pub(crate) enum JwtKey {
    /// A shared secret (HS256).
    Hs256Secret(String),
    /// An RSA public key in PEM (RS256).
    Rs256Pem(Vec<u8>),
    /// An EC P-256 public key in PEM (ES256).
    Es256Pem(Vec<u8>),
    /// A JWKS document (RS256 and ES256 keys, chosen by `kid`).
    Jwks(String),
}

impl JwtVerifier {
    /// A verifier reading tokens from `header` (`Bearer <token>` or the bare token) and
    /// the claim `claim`.
    pub(crate) fn new(header: HeaderName, claim: String, key: JwtKey) -> Result<Self, String> {
        let keys = match key {
            JwtKey::Hs256Secret(secret) => {
                if secret.len() < 16 {
                    return Err("hs256_secret must be at least 16 bytes".into());
                }
                let key = DecodingKey::from_secret(secret.as_bytes())
                    .map_err(|e| format!("unusable secret: {e}"))?;
                vec![(None, Algorithm::HS256, key)]
            }
            JwtKey::Rs256Pem(pem) => vec![(
                None,
                Algorithm::RS256,
                DecodingKey::from_rsa_pem(&pem)
                    .map_err(|e| format!("not an RSA public key in PEM: {e}"))?,
            )],
            JwtKey::Es256Pem(pem) => vec![(
                None,
                Algorithm::ES256,
                DecodingKey::from_ec_pem(&pem)
                    .map_err(|e| format!("not an EC public key in PEM: {e}"))?,
            )],
            JwtKey::Jwks(json) => {
                let set: JwkSet =
                    serde_json::from_str(&json).map_err(|e| format!("not a JWKS document: {e}"))?;
                let mut keys = Vec::new();
                for jwk in &set.keys {
                    let algorithm = match &jwk.algorithm {
                        jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                        jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => {
                            Algorithm::ES256
                        }
                        _ => continue,
                    };
                    let key = DecodingKey::from_jwk(jwk)
                        .map_err(|e| format!("unusable key in the JWKS: {e}"))?;
                    keys.push((jwk.common.key_id.clone(), algorithm, key));
                }
                if keys.is_empty() {
                    return Err("the JWKS holds no RS256 or ES256 key".into());
                }
                keys
            }
        };
        Ok(Self {
            header,
            claim,
            keys,
            audience: Vec::new(),
            issuer: Vec::new(),
        })
    }

    /// Accepts only tokens whose `aud` names one of `audience` (none: `aud` is not
    /// checked).
    pub(crate) fn with_audience(mut self, audience: Vec<String>) -> Self {
        self.audience = audience;
        self
    }

    /// Accepts only tokens whose `iss` is one of `issuer` (none: `iss` is not checked).
    pub(crate) fn with_issuer(mut self, issuer: Vec<String>) -> Self {
        self.issuer = issuer;
        self
    }

    /// The claim of a valid token in the request, as a string, at `now_secs` (seconds
    /// since the Unix epoch); `None` when there is no token, or it is forged, expired,
    /// or lacks the claim.
    pub(crate) fn claim(&self, headers: &HeaderMap, now_secs: u64) -> Option<String> {
        self.verified(headers, now_secs)
            .and_then(|claims| claims.get(&self.claim))
    }

    /// The claims of a valid token in the request at `now_secs` (verified once, read as
    /// often as needed); `None` when there is no token, or it is forged, expired or not
    /// valid yet.
    pub(crate) fn verified(&self, headers: &HeaderMap, now_secs: u64) -> Option<Claims> {
        let mut lines = headers.get_all(&self.header).iter();
        let (Some(value), None) = (lines.next(), lines.next()) else {
            // None, or a token sent twice: no caller is believed on it.
            return None;
        };
        let value = value.to_str().ok()?.trim();
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .unwrap_or(value)
            .trim();
        let header = jsonwebtoken::decode_header(token).ok()?;
        let (_, algorithm, key) = self.keys.iter().find(|(kid, algorithm, _)| {
            *algorithm == header.alg && (kid.is_none() || *kid == header.kid)
        })?;
        let mut validation = Validation::new(*algorithm);
        // The times are checked below, against `now_secs`: jsonwebtoken would read the
        // system clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        let mut required = vec!["exp"];
        if self.audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.audience);
            required.push("aud");
        }
        if !self.issuer.is_empty() {
            validation.set_issuer(&self.issuer);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        let data = jsonwebtoken::decode::<serde_json::Value>(token, key, &validation).ok()?;
        let claims = Claims(data.claims);
        claims.valid_at(now_secs).then_some(claims)
    }

    /// The header tokens are read from.
    pub(crate) fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The claim this verifier identifies callers by.
    pub(crate) fn identity_claim(&self) -> &str {
        &self.claim
    }
}

impl Claims {
    /// Whether the token is valid at `now_secs`: through its `exp` second, and not
    /// before its `nbf` less [`NBF_LEEWAY`] when it has one.
    fn valid_at(&self, now_secs: u64) -> bool {
        let time = |name: &str| self.0.get(name).map(numeric_date);
        let unexpired = matches!(time("exp"), Some(Some(exp)) if now_secs <= exp);
        let started = match time("nbf") {
            None => true,
            Some(Some(nbf)) => nbf <= now_secs.saturating_add(NBF_LEEWAY),
            Some(None) => false,
        };
        unexpired && started
    }
}

/// A NumericDate claim in whole seconds: a non-negative number (fractions rounded, as
/// jsonwebtoken reads them), `None` for anything else.
fn numeric_date(value: &serde_json::Value) -> Option<u64> {
    if let Some(secs) = value.as_u64() {
        return Some(secs);
    }
    let secs = value.as_f64()?.round();
    // Below 2^64 exactly: `as` saturates, and a time that far off is no time at all.
    (secs.is_finite() && (0.0..18_446_744_073_709_551_615.0).contains(&secs)).then_some(secs as u64)
}

/// The claims of a verified token.
#[derive(Debug, Clone)]
pub(crate) struct Claims(serde_json::Value);

impl Claims {
    /// A claim as a string (a non-empty string, or a number).
    pub(crate) fn get(&self, claim: &str) -> Option<String> {
        match self.0.get(claim)? {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{Value, json};

    const SECRET: &str = "a-long-random-secret";

    /// The time the verifier is given (2026-12-01): tokens are made around it.
    const NOW: u64 = 1_796_083_200;

    fn now() -> i64 {
        NOW as i64
    }

    fn verifier() -> JwtVerifier {
        JwtVerifier::new(
            HeaderName::from_static("authorization"),
            "sub".into(),
            JwtKey::Hs256Secret(SECRET.into()),
        )
        .unwrap()
    }

    /// The `sub` the verifier reads from a token with these claims (plus `sub`).
    fn sub(verifier: &JwtVerifier, claims: Value) -> Option<String> {
        sub_at(verifier, claims, NOW)
    }

    /// The same, read at `now_secs`.
    fn sub_at(verifier: &JwtVerifier, mut claims: Value, now_secs: u64) -> Option<String> {
        claims["sub"] = json!("ana");
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
        )
        .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        verifier.claim(&headers, now_secs)
    }

    /// The times are read against the clock the verifier is given, not the system's:
    /// one token is valid, then expired, as that clock moves.
    #[test]
    fn times_follow_the_clock_given() {
        let v = verifier();
        let claims = json!({"exp": NOW + 10, "nbf": NOW + 100});
        assert_eq!(sub_at(&v, claims.clone(), NOW), None, "not valid yet");
        let claims = json!({"exp": NOW + 100, "nbf": NOW + 30});
        assert_eq!(
            sub_at(&v, claims.clone(), NOW),
            Some("ana".into()),
            "nbf within the leeway"
        );
        assert_eq!(
            sub_at(&v, claims.clone(), NOW + 100),
            Some("ana".into()),
            "valid through its exp second"
        );
        assert_eq!(
            sub_at(&v, claims.clone(), NOW + 101),
            None,
            "expired after it"
        );
        // Years from now on the system clock mean nothing to it.
        let far = json!({"exp": 4_102_444_800u64});
        assert_eq!(sub_at(&v, far.clone(), 4_102_444_800), Some("ana".into()));
        assert_eq!(sub_at(&v, far, 4_102_444_801), None);
    }

    /// NumericDates may be fractional (what `Date.now() / 1000` writes): rounded to the
    /// nearest second, as jsonwebtoken read them; negative or absurd ones invalidate.
    #[test]
    fn fractional_times_are_rounded() {
        let v = verifier();
        let at = NOW as f64;
        assert_eq!(sub(&v, json!({"exp": at + 10.4})), Some("ana".into()));
        assert_eq!(
            sub_at(&v, json!({"exp": at + 10.4}), NOW + 10),
            Some("ana".into())
        );
        assert_eq!(sub_at(&v, json!({"exp": at + 10.4}), NOW + 11), None);
        assert_eq!(
            sub_at(&v, json!({"exp": at + 10.6}), NOW + 11),
            Some("ana".into())
        );
        assert_eq!(
            sub(&v, json!({"exp": at + 600.0, "nbf": at + 30.5})),
            Some("ana".into())
        );
        assert_eq!(sub(&v, json!({"exp": at + 600.0, "nbf": at + 90.5})), None);
        assert_eq!(sub(&v, json!({"exp": -1.5})), None);
        assert_eq!(sub(&v, json!({"exp": 1e300})), None);
    }

    #[test]
    fn expiry_is_exact() {
        let v = verifier();
        assert_eq!(sub(&v, json!({"exp": now() + 5})), Some("ana".into()));
        assert_eq!(sub(&v, json!({"exp": now() - 2})), None);
        assert_eq!(sub(&v, json!({"exp": now() - 30})), None);
        assert_eq!(sub(&v, json!({})), None);
        assert_eq!(sub(&v, json!({"exp": "tomorrow"})), None);
    }

    #[test]
    fn not_before_is_checked_with_a_small_leeway() {
        let v = verifier();
        let exp = now() + 600;
        assert_eq!(
            sub(&v, json!({"exp": exp, "nbf": now() - 10})),
            Some("ana".into())
        );
        assert_eq!(
            sub(&v, json!({"exp": exp, "nbf": now() + 20})),
            Some("ana".into())
        );
        assert_eq!(sub(&v, json!({"exp": exp, "nbf": now() + 120})), None);
        assert_eq!(sub(&v, json!({"exp": exp, "nbf": "soon"})), None);
    }

    #[test]
    fn audience_and_issuer_are_checked_when_configured() {
        let exp = now() + 600;
        let open = verifier();
        assert_eq!(
            sub(&open, json!({"exp": exp, "aud": "x", "iss": "y"})),
            Some("ana".into())
        );
        let v = verifier()
            .with_audience(vec!["api".into(), "api2".into()])
            .with_issuer(vec!["https://idp.example".into()]);
        let iss = "https://idp.example";
        let cases = [
            (json!({"exp": exp, "aud": "api", "iss": iss}), true),
            (json!({"exp": exp, "aud": "api2", "iss": iss}), true),
            (
                json!({"exp": exp, "aud": ["other", "api"], "iss": iss}),
                true,
            ),
            (json!({"exp": exp, "aud": "other", "iss": iss}), false),
            (json!({"exp": exp, "aud": [], "iss": iss}), false),
            (json!({"exp": exp, "iss": iss}), false),
            (json!({"exp": exp, "aud": "api"}), false),
            (
                json!({"exp": exp, "aud": "api", "iss": "https://evil.example"}),
                false,
            ),
            (json!({"exp": exp, "aud": "API", "iss": iss}), false),
        ];
        for (claims, accepted) in cases {
            let want = accepted.then(|| "ana".to_owned());
            assert_eq!(sub(&v, claims.clone()), want, "{claims}");
        }
        let only_aud = verifier().with_audience(vec!["api".into()]);
        assert_eq!(
            sub(&only_aud, json!({"exp": exp, "aud": "api"})),
            Some("ana".into())
        );
    }
}
