//! Verified JWT claims: HS256 with a secret, RS256 / ES256 with a public key (PEM) or a
//! local JWKS file. The signature and the expiry are always checked; a token that fails
//! either is never trusted (the caller is anonymous).

use std::fmt;

use axum::http::{HeaderMap, HeaderName};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// How to verify tokens, and which claim to read.
#[derive(Clone)]
pub struct JwtVerifier {
    header: HeaderName,
    claim: String,
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("header", &self.header)
            .field("claim", &self.claim)
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// Where the verification key comes from.
#[derive(Debug, Clone)]
pub enum JwtKey {
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
    pub fn new(header: HeaderName, claim: String, key: JwtKey) -> Result<Self, String> {
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
        })
    }

    /// The claim of a valid token in the request, as a string; `None` when there is no
    /// token, or it is forged, expired, or lacks the claim.
    pub fn claim(&self, headers: &HeaderMap) -> Option<String> {
        self.verified(headers)
            .and_then(|claims| claims.get(&self.claim))
    }

    /// The claims of a valid token in the request (verified once, read as often as
    /// needed); `None` when there is no token, or it is forged or expired.
    pub fn verified(&self, headers: &HeaderMap) -> Option<Claims> {
        let value = headers.get(&self.header)?.to_str().ok()?.trim();
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
        validation.leeway = 0;
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(token, key, &validation).ok()?;
        Some(Claims(data.claims))
    }

    /// The claim this verifier identifies callers by.
    pub fn identity_claim(&self) -> &str {
        &self.claim
    }
}

/// The claims of a verified token.
#[derive(Debug, Clone)]
pub struct Claims(serde_json::Value);

impl Claims {
    /// A claim as a string (a non-empty string, or a number).
    pub fn get(&self, claim: &str) -> Option<String> {
        match self.0.get(claim)? {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}
