//! One field of a request body (a login's email), a query parameter or a cookie, read
//! as strictly as the strictest app would, and refused wherever two apps could read it
//! differently.
//!
//! # Media types
//!
//! `application/json`, `text/json` and any `application/*+json` are read as JSON;
//! `application/x-www-form-urlencoded` as a form. A `charset` parameter other than
//! `utf-8` is refused, and so is every other media type (multipart, XML, text...) on a
//! route keyed by a body field: [`BodyError::is_unsupported_media_type`] says which
//! errors are a 415. A non-empty body without `Content-Type` is refused the same way
//! (apps guess differently); an empty one has no fields. So is any `Content-Encoding`
//! but `identity`: weir does not inflate bodies (a gzip bomb would cost it what it is
//! there to protect), so it could not read them the way an app that inflates does.
//!
//! # JSON
//!
//! Strict RFC 8259, as serde_json reads it, and stricter where apps disagree: a UTF-8
//! byte order mark is refused (serde_json and Node's `JSON.parse` refuse it, some
//! others skip it), UTF-16 and UTF-32 are refused, and so are, anywhere in the
//! document: lone surrogate escapes (`"\ud800"`, which JavaScript accepts), numbers too
//! large for a double (`1e999`, read as `Infinity` in JavaScript), and nesting deeper
//! than [`MAX_DEPTH`]. The field is looked for at the top level of an object (any
//! other document has no field). It must be a string; another type (`null` included)
//! is refused. It must appear once: a second key equal to it, or equal once both are
//! normalised by [`normalize_identity`](super::normalize_identity) (`"email"` and
//! `"EMAIL"`, as apps binding case-insensitively read them), is refused: serde_json
//! keeps the last of two keys, other parsers the first.
//!
//! # Forms
//!
//! Names and values are read with `+` as a space and percent-escapes decoded; names are
//! compared as JSON keys are, also after PHP's renaming of `.` and spaces to `_`. The
//! field must appear once; `email[]=` or `email[x]=` (an array to PHP and Rails) is
//! refused. `;` separates pairs for some frameworks (Rack 2, old Python): when
//! reading `;` as a separator changes what the field holds, the body is refused. The
//! field's name and value must decode to UTF-8 with valid escapes.
//!
//! # The query string
//!
//! Frameworks merge query parameters with body fields (Rails `params`, PHP
//! `$_REQUEST`, Spring `@RequestParam`, ASP.NET model binding): a field of the same
//! name in the query string is refused, whether or not the body has it, since an app
//! could read either one.
//!
//! # Query parameters and cookies as identities
//!
//! [`query_param`] reads a parameter of the query string as a form's field is read.
//! [`cookie`] reads a cookie from the `Cookie` lines joined: names compared as form
//! names are (so `Session` beside `session` is refused as ambiguous), the value
//! unquoted and decoded once. Both say whether the request wrote the name and value
//! exactly so.
//!
//! A field found nowhere is `Ok(None)`.

mod fields;
mod form;
mod json;
mod media;
#[cfg(test)]
mod tests;

use axum::http::{HeaderMap, header};

use self::fields::FieldName;
pub(crate) use self::form::Found;
use self::form::{cookie_field, form_field, query_field, query_has};
use self::json::json_field;
use self::media::{Kind, media_kind};

/// The deepest nesting of arrays and objects accepted in a JSON body.
pub(super) const MAX_DEPTH: usize = 64;

/// The most names with non-ASCII characters compared with the field in one list of
/// names (the query string, a form, a JSON body's top-level keys). Comparing such a name means
/// normalising it (a few microseconds); ASCII names cost next to nothing. A request
/// with more is refused rather than read partly: a login body has a handful of fields.
pub(super) const MAX_UNICODE_NAMES: usize = 256;

/// Why a body field cannot be read one way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BodyError {
    /// A media type that is not JSON or a form (or none, with a body).
    #[error(
        "the body must be JSON or a URL-encoded form (application/json or application/x-www-form-urlencoded), not {0}"
    )]
    UnsupportedMediaType(String),
    /// A `Content-Encoding` other than `identity`.
    #[error(
        "compressed bodies are not accepted here (Content-Encoding: {0}); send the body uncompressed"
    )]
    UnsupportedEncoding(String),
    /// A `charset` other than UTF-8.
    #[error("the body must be UTF-8 (charset={0} is not accepted)")]
    UnsupportedCharset(String),
    /// More than one `Content-Type` line.
    #[error("the request has more than one Content-Type header")]
    MultipleContentTypes,
    /// Not JSON, or JSON some apps read differently.
    #[error("the JSON body is invalid: {0}")]
    InvalidJson(String),
    /// A JSON body nested deeper than [`MAX_DEPTH`].
    #[error("the JSON body is nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
    /// A form whose field cannot be decoded.
    #[error("the form body is invalid: {0}")]
    InvalidForm(&'static str),
    /// A query parameter whose value cannot be decoded.
    #[error("the query string is invalid: {0}")]
    InvalidQuery(&'static str),
    /// A cookie whose value cannot be decoded.
    #[error("the Cookie header is invalid: {0}")]
    InvalidCookie(&'static str),
    /// More than [`MAX_UNICODE_NAMES`] names with non-ASCII characters.
    #[error("the request has more than {MAX_UNICODE_NAMES} field names with non-ASCII characters")]
    TooManyUnicodeNames,
    /// The field appears more than once, or can be read two ways.
    #[error("the field `{field}` is ambiguous: {why}")]
    AmbiguousField {
        /// The field looked for.
        field: String,
        /// How.
        why: &'static str,
    },
    /// The field is there but is not a string.
    #[error("the field `{0}` must be a string")]
    FieldNotString(String),
    /// The field is in the query string.
    #[error("the field `{0}` must be sent in the body only, not in the query string")]
    FieldInQuery(String),
}

impl BodyError {
    /// Whether the error is about the body's type or encoding (an HTTP 415) rather than
    /// its content (a 400).
    pub(crate) fn is_unsupported_media_type(&self) -> bool {
        matches!(
            self,
            BodyError::UnsupportedMediaType(_)
                | BodyError::UnsupportedEncoding(_)
                | BodyError::UnsupportedCharset(_)
        )
    }
}

/// The string value of `field` in a request's body (see the [module docs](self)), given
/// its headers (`Content-Type`, `Content-Encoding`) and its raw query string.
pub(crate) fn body_field(
    headers: &HeaderMap,
    body: &[u8],
    field: &str,
    query: Option<&str>,
) -> Result<Option<String>, BodyError> {
    let name = FieldName::new(field);
    if let Some(query) = query
        && query_has(query, &name)?
    {
        return Err(BodyError::FieldInQuery(field.to_owned()));
    }
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let text = String::from_utf8_lossy(value.as_bytes());
        for coding in text.split(',').map(str::trim) {
            if !coding.is_empty() && !coding.eq_ignore_ascii_case("identity") {
                return Err(BodyError::UnsupportedEncoding(coding.to_owned()));
            }
        }
    }
    name.unicode_names.set(0);
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let content_type = types.next();
    if types.next().is_some() {
        return Err(BodyError::MultipleContentTypes);
    }
    let Some(content_type) = content_type else {
        return if body.is_empty() {
            Ok(None)
        } else {
            Err(BodyError::UnsupportedMediaType(
                "a body without Content-Type".into(),
            ))
        };
    };
    let content_type = String::from_utf8_lossy(content_type.as_bytes());
    match media_kind(&content_type)? {
        Kind::Json => json_field(body, &name),
        Kind::Form => form_field(body, &name),
    }
}

/// The value of the query parameter `name` in a request's raw query string, read as a
/// form's field is (see the [module docs](self)): once, under any spelling of its name
/// an app binding case-insensitively or PHP's way reads as it, decoded once.
pub(crate) fn query_param(query: &str, name: &str) -> Result<Option<Found>, BodyError> {
    query_field(query, &FieldName::new(name))
}

/// The value of the cookie `name`: the `Cookie` lines joined with `; ` (as HTTP/2
/// sends one line per cookie), the cookie found once under any spelling of its name an
/// app reads as it, its value unquoted and percent-decoded once (`+` as a space, as PHP
/// reads it: the reading that joins the most spellings into one value).
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Result<Option<Found>, BodyError> {
    let mut lines = headers.get_all(header::COOKIE).iter().peekable();
    if lines.peek().is_none() {
        return Ok(None);
    }
    let mut text = String::new();
    for line in lines {
        let line = line
            .to_str()
            .map_err(|_| BodyError::InvalidCookie("the header must be visible ASCII text"))?;
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(line);
    }
    cookie_field(&text, &FieldName::new(name))
}
