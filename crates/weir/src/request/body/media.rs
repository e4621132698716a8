//! Which bodies are read, by media type: JSON (`application/json`, `text/json`,
//! `application/*+json`) and forms, in UTF-8; anything else is a 415.

use super::BodyError;

pub(super) enum Kind {
    Json,
    Form,
}

pub(super) fn media_kind(content_type: &str) -> Result<Kind, BodyError> {
    let mut parts = content_type.split(';');
    let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let unsupported = || BodyError::UnsupportedMediaType(format!("`{media}`"));
    let (kind, subtype) = media.split_once('/').ok_or_else(unsupported)?;
    let kind = match (kind, subtype) {
        ("application", "json") | ("text", "json") => Kind::Json,
        ("application", s) if s.len() > 5 && s.ends_with("+json") && !s.contains('/') => Kind::Json,
        ("application", "x-www-form-urlencoded") => Kind::Form,
        _ => return Err(unsupported()),
    };
    for parameter in parts {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("charset") {
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            if !value.eq_ignore_ascii_case("utf-8") {
                return Err(BodyError::UnsupportedCharset(value.to_owned()));
            }
        }
    }
    Ok(kind)
}
