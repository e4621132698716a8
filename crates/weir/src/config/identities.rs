//! The `identities` section: named ways to identify callers (a header, a verified JWT
//! claim, a body field, the client IP).

use axum::http::HeaderName;
use serde_saphyr::{Location, Spanned};

use super::ConfigError;
use super::error::Errors;
use super::file::{NormalizeName, OneOrMany, RawIdentity, RawJwt};
use crate::engine::{CLIENT_IP, IdentitySource, Normalize, Source};
use crate::request::{JwtKey, JwtVerifier};

pub(super) fn identity(
    name: &str,
    raw: &Spanned<RawIdentity>,
    errors: &Errors<'_>,
) -> Result<IdentitySource, ConfigError> {
    let field = format!("identities.{name}");
    let at = raw.referenced;
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) || name == CLIENT_IP {
        return Err(errors.at(
            at,
            field,
            format!(
                "invalid identity name `{name}`: use a-z, 0-9 and `_` (`{CLIENT_IP}` is built in)"
            ),
        ));
    }
    let raw = &raw.value;
    let sources = usize::from(raw.header.is_some())
        + usize::from(raw.jwt.is_some())
        + usize::from(raw.body_field.is_some())
        + usize::from(raw.query_param.is_some())
        + usize::from(raw.cookie.is_some())
        + usize::from(raw.client_ip);
    if sources != 1 {
        return Err(errors.at(
            at,
            field,
            "give exactly one of `header`, `jwt`, `body_field`, `query_param`, `cookie`, `client_ip`",
        ));
    }
    for (given, name) in [(&raw.query_param, "query_param"), (&raw.cookie, "cookie")] {
        if let Some(text) = given
            && let Err(message) = field_name(text)
        {
            return Err(errors.at(at, format!("{field}.{name}"), message));
        }
    }
    let source = if let Some(header) = &raw.header {
        Source::Header(
            header_name(header).map_err(|m| errors.at(at, format!("{field}.header"), m))?,
        )
    } else if let Some(jwt) = &raw.jwt {
        Source::Jwt(verifier(jwt, at, &format!("{field}.jwt"), errors)?)
    } else if let Some(body_field) = &raw.body_field {
        Source::BodyField(body_field.clone())
    } else if let Some(name) = &raw.query_param {
        Source::QueryParam(name.clone())
    } else if let Some(name) = &raw.cookie {
        Source::Cookie(name.clone())
    } else {
        Source::ClientIp
    };
    let normalize = match raw.normalize {
        None | Some(NormalizeName::None) => Normalize::None,
        Some(NormalizeName::Email) => Normalize::Email,
    };
    Ok(IdentitySource {
        name: name.to_owned(),
        source,
        normalize,
    })
}

/// A query parameter's or cookie's name as configured: printable ASCII without the
/// characters that separate or bracket names, which no request could send as one name.
pub(super) fn field_name(name: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_graphic() && !"=&;[]%\"".contains(c);
    if name.is_empty() || name.len() > 128 || !name.chars().all(plain) {
        return Err(format!(
            "`{}` is not a parameter or cookie name: printable ASCII without `= & ; [ ] % \"`, at most 128 characters",
            name.escape_debug()
        ));
    }
    Ok(())
}

pub(super) fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::try_from(name.to_ascii_lowercase())
        .map_err(|_| format!("`{name}` is not a header name"))
}

fn verifier(
    raw: &RawJwt,
    at: Location,
    field: &str,
    errors: &Errors<'_>,
) -> Result<JwtVerifier, ConfigError> {
    let keys = usize::from(raw.hs256_secret.is_some())
        + usize::from(raw.rs256_public_key_file.is_some())
        + usize::from(raw.es256_public_key_file.is_some())
        + usize::from(raw.jwks_file.is_some());
    if keys != 1 {
        return Err(errors.at(at, field, "give exactly one of `hs256_secret`, `rs256_public_key_file`, `es256_public_key_file`, `jwks_file`"));
    }
    let key = if let Some(secret) = &raw.hs256_secret {
        JwtKey::Hs256Secret(secret.clone())
    } else if let Some(file) = &raw.rs256_public_key_file {
        JwtKey::Rs256Pem(errors.read(at, field, file)?)
    } else if let Some(file) = &raw.es256_public_key_file {
        JwtKey::Es256Pem(errors.read(at, field, file)?)
    } else if let Some(file) = &raw.jwks_file {
        let bytes = errors.read(at, field, file)?;
        JwtKey::Jwks(
            String::from_utf8(bytes)
                .map_err(|_| errors.at(at, field, "the JWKS file is not UTF-8"))?,
        )
    } else {
        unreachable!("one key source was counted above")
    };
    let header =
        header_name(&raw.header).map_err(|m| errors.at(at, format!("{field}.header"), m))?;
    let values = |list: &Option<OneOrMany>, name: &str| {
        let values = list.as_ref().map_or_else(Vec::new, OneOrMany::to_vec);
        if list.is_some() && (values.is_empty() || values.iter().any(String::is_empty)) {
            return Err(errors.at(
                at,
                format!("{field}.{name}"),
                format!("`{name}` lists one or more non-empty values"),
            ));
        }
        Ok(values)
    };
    let audience = values(&raw.audience, "audience")?;
    let issuer = values(&raw.issuer, "issuer")?;
    Ok(JwtVerifier::new(header, raw.claim.clone(), key)
        .map_err(|m| errors.at(at, field, m))?
        .with_audience(audience)
        .with_issuer(issuer))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_saphyr::Location;

    use super::*;
    use crate::config::file::RawJwt;

    #[test]
    fn jwt_audience_and_issuer_are_one_value_or_a_list() {
        let errors = Errors {
            file: Path::new("weir.yaml"),
        };
        let jwt = |yaml: &str| -> Result<String, String> {
            let raw: RawJwt = serde_saphyr::from_str(&format!(
                "claim: sub\nhs256_secret: a-long-random-secret\n{yaml}"
            ))
            .map_err(|e| e.to_string())?;
            verifier(&raw, Location::UNKNOWN, "identities.user.jwt", &errors)
                .map(|v| format!("{v:?}"))
                .map_err(|e| e.to_string())
        };
        let v = jwt("audience: api\nissuer: [https://a.example, https://b.example]\n").unwrap();
        assert!(
            v.contains(r#"audience: ["api"], issuer: ["https://a.example", "https://b.example"]"#),
            "{v}"
        );
        assert!(jwt("").unwrap().contains("audience: [], issuer: []"));
        for bad in ["audience: []\n", "audience: \"\"\n", "issuer: [a, \"\"]\n"] {
            let e = jwt(bad).unwrap_err();
            assert!(
                e.contains("lists one or more non-empty values"),
                "{bad}: {e}"
            );
        }
    }
}
