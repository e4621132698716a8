//! One field of a request body (a login's email), read as strictly as the strictest app
//! would, and refused wherever two apps could read it differently.
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
//! A field found nowhere is `Ok(None)`.

use std::cell::{Cell, RefCell};
use std::fmt;

use axum::http::{HeaderMap, header};
use percent_encoding::percent_decode;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::identity_text::normalize_identity;

/// The deepest nesting of arrays and objects accepted in a JSON body.
pub const MAX_DEPTH: usize = 64;

/// The most names with non-ASCII characters compared with the field in one list of
/// names (the query string, a form, a JSON body's top-level keys). Comparing such a name means
/// normalising it (a few microseconds); ASCII names cost next to nothing. A request
/// with more is refused rather than read partly: a login body has a handful of fields.
pub const MAX_UNICODE_NAMES: usize = 256;

/// Why a body field cannot be read one way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
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
    pub fn is_unsupported_media_type(&self) -> bool {
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
pub fn body_field(
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

enum Kind {
    Json,
    Form,
}

fn media_kind(content_type: &str) -> Result<Kind, BodyError> {
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

/// The field looked for, in the forms names are compared in.
struct FieldName<'a> {
    text: &'a str,
    key: Option<String>,
    /// Names with non-ASCII characters compared so far.
    unicode_names: Cell<usize>,
}

impl<'a> FieldName<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            key: normalize_identity(text).ok(),
            unicode_names: Cell::new(0),
        }
    }

    /// Whether a key names this field, exactly or once both are normalised.
    fn is(&self, key: &str) -> Result<bool, BodyError> {
        if key == self.text {
            return Ok(true);
        }
        let Some(want) = &self.key else {
            return Ok(false);
        };
        if key.is_ascii() {
            return Ok(ascii_key_is(key, want));
        }
        let seen = self.unicode_names.get() + 1;
        if seen > MAX_UNICODE_NAMES {
            return Err(BodyError::TooManyUnicodeNames);
        }
        self.unicode_names.set(seen);
        Ok(normalize_identity(key).is_ok_and(|k| k == *want))
    }

    /// Whether a form name names this field: as a JSON key does, or after PHP's renaming
    /// of `.` and ` ` to `_`; `Some(true)` when it does with brackets (`email[]`).
    fn in_form(&self, name: &str) -> Result<Option<bool>, BodyError> {
        let (base, bracketed) = match name.find('[') {
            Some(i) if i > 0 => (&name[..i], true),
            _ => (name, false),
        };
        let named = self.is(base)?
            || (base.contains(['.', ' ']) && self.is(&base.replace(['.', ' '], "_"))?);
        Ok(named.then_some(bracketed))
    }
}

/// [`normalize_identity`] of an ASCII `key` equals `want`, without allocating: ASCII
/// controls removed, White_Space trimmed, letters compared without case.
fn ascii_key_is(key: &str, want: &str) -> bool {
    let trimmed = key.trim_matches(|c: char| c.is_ascii_control() || c.is_whitespace());
    let mut kept = trimmed.bytes().filter(|b| !b.is_ascii_control());
    let mut wanted = want.bytes();
    loop {
        match (kept.next(), wanted.next()) {
            (None, None) => return true,
            (Some(k), Some(w)) if k.to_ascii_lowercase() == w => {}
            _ => return false,
        }
    }
}

fn query_has(query: &str, field: &FieldName<'_>) -> Result<bool, BodyError> {
    for pair in query.split(['&', ';']) {
        let name = pair.split_once('=').map_or(pair, |(name, _)| name);
        if !name.is_empty() && field.in_form(&decode_lossy(name))?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `+` as a space, percent-escapes decoded, invalid escapes and bytes kept/replaced.
fn decode_lossy(text: &str) -> String {
    let spaced = text.replace('+', " ");
    percent_decode(spaced.as_bytes())
        .decode_utf8_lossy()
        .into_owned()
}

/// `+` as a space, percent-escapes decoded; `None` for a broken escape or non-UTF-8.
fn decode_strict(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
        {
            return None;
        }
    }
    let spaced = text.replace('+', " ");
    percent_decode(spaced.as_bytes())
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

fn form_field(body: &[u8], field: &FieldName<'_>) -> Result<Option<String>, BodyError> {
    let text =
        std::str::from_utf8(body).map_err(|_| BodyError::InvalidForm("the body is not UTF-8"))?;
    // Apps that decode JSON whatever the Content-Type (Go's json.Decoder, Flask's
    // get_json(force=True)) would read such a body as JSON, and find another field.
    if text.trim_start().starts_with(['{', '[']) {
        return Err(BodyError::InvalidForm(
            "a form body must not start like JSON (`{` or `[`): apps that decode JSON whatever the type would read it differently",
        ));
    }
    let ambiguous = |why| BodyError::AmbiguousField {
        field: field.text.to_owned(),
        why,
    };
    // The field as read with `&` alone between pairs, and with `;` too.
    let read = |separators: &[char]| -> Result<Option<&str>, BodyError> {
        field.unicode_names.set(0);
        let mut found = None;
        for pair in text.split(separators).filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match field.in_form(&decode_lossy(name))? {
                None => {}
                Some(true) => return Err(ambiguous("a bracketed name is read as a list")),
                Some(false) if found.is_some() => {
                    return Err(ambiguous("it appears more than once"));
                }
                Some(false) => found = Some(value),
            }
        }
        Ok(found)
    };
    let with_ampersands = read(&['&'])?;
    let with_semicolons = read(&['&', ';'])?;
    if with_ampersands != with_semicolons {
        return Err(ambiguous(
            "`;` is read as a separator by some frameworks; send it as %3B",
        ));
    }
    with_ampersands
        .map(|value| {
            decode_strict(value).ok_or(BodyError::InvalidForm(
                "the field's value has a broken percent-escape or is not UTF-8",
            ))
        })
        .transpose()
}

fn json_field(body: &[u8], field: &FieldName<'_>) -> Result<Option<String>, BodyError> {
    if body.starts_with(b"\xEF\xBB\xBF") {
        return Err(BodyError::InvalidJson(
            "it starts with a byte order mark; send UTF-8 without one".into(),
        ));
    }
    if body.starts_with(b"\xFE\xFF")
        || body.starts_with(b"\xFF\xFE")
        || body.iter().take(4).any(|&b| b == 0)
    {
        return Err(BodyError::InvalidJson(
            "it is UTF-16 or UTF-32; send UTF-8".into(),
        ));
    }
    let text =
        std::str::from_utf8(body).map_err(|_| BodyError::InvalidJson("it is not UTF-8".into()))?;
    let state = RefCell::new(State::default());
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Top {
        field,
        state: &state,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    let state = state.into_inner();
    if let Some(problem) = state.problem {
        return Err(problem);
    }
    parsed.map_err(|e| BodyError::InvalidJson(e.to_string()))?;
    Ok(state.found)
}

/// What the walk over a JSON document found.
#[derive(Default)]
struct State {
    found: Option<String>,
    /// A refusal of ours, reported instead of the serde error that stopped the walk.
    problem: Option<BodyError>,
}

fn stop<E: de::Error>(state: &RefCell<State>, problem: BodyError) -> E {
    let message = problem.to_string();
    state.borrow_mut().problem = Some(problem);
    E::custom(message)
}

/// The document: looks for the field at the top level, walks everything.
struct Top<'a> {
    field: &'a FieldName<'a>,
    state: &'a RefCell<State>,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<String>()? {
            let is_field = match self.field.is(&key) {
                Ok(is_field) => is_field,
                Err(problem) => return Err(stop(self.state, problem)),
            };
            if !is_field {
                map.next_value_seed(Walk {
                    depth: 2,
                    state: self.state,
                })?;
                continue;
            }
            if seen {
                return Err(stop(
                    self.state,
                    BodyError::AmbiguousField {
                        field: self.field.text.to_owned(),
                        why: "it appears more than once (keys are compared ignoring case and Unicode form)",
                    },
                ));
            }
            seen = true;
            let value = map.next_value_seed(FieldValue {
                field: self.field,
                state: self.state,
            })?;
            self.state.borrow_mut().found = Some(value);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Walk {
            depth: 1,
            state: self.state,
        }
        .visit_seq(seq)
        .map(drop)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The field's value: a string, or a refusal.
struct FieldValue<'a> {
    field: &'a FieldName<'a>,
    state: &'a RefCell<State>,
}

impl<'de> DeserializeSeed<'de> for FieldValue<'_> {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        let state = self.state;
        let field = self.field.text;
        match deserializer.deserialize_any(Walk { depth: 2, state }) {
            Ok(Some(text)) => Ok(text),
            Ok(None) => Err(stop(state, BodyError::FieldNotString(field.to_owned()))),
            Err(e) => Err(e),
        }
    }
}

/// Any value, walked in full so that every string and number in the document is
/// checked; gives the text of a string.
struct Walk<'a> {
    depth: usize,
    state: &'a RefCell<State>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Option<String>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(stop(self.state, BodyError::TooDeep));
        }
        while map.next_key::<String>()?.is_some() {
            map.next_value_seed(Walk {
                depth: self.depth + 1,
                state: self.state,
            })?;
        }
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<String>, A::Error> {
        if self.depth > MAX_DEPTH {
            return Err(stop(self.state, BodyError::TooDeep));
        }
        while seq
            .next_element_seed(Walk {
                depth: self.depth + 1,
                state: self.state,
            })?
            .is_some()
        {}
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<String>, E> {
        Ok(Some(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Option<String>, E> {
        Ok(Some(text))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Option<String>, E> {
        // serde_json already refuses numbers out of a double's range; kept as a guard.
        if value.is_finite() {
            Ok(None)
        } else {
            Err(E::custom("a number is out of range"))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn json(body: &str) -> Result<Option<String>, BodyError> {
        body_field(
            &headers(&[("content-type", "application/json")]),
            body.as_bytes(),
            "email",
            None,
        )
    }

    fn form(body: &str) -> Result<Option<String>, BodyError> {
        body_field(
            &headers(&[("content-type", "application/x-www-form-urlencoded")]),
            body.as_bytes(),
            "email",
            None,
        )
    }

    fn ambiguous(why: &'static str) -> BodyError {
        BodyError::AmbiguousField {
            field: "email".into(),
            why,
        }
    }

    const TWICE_JSON: &str =
        "it appears more than once (keys are compared ignoring case and Unicode form)";

    #[test]
    fn a_json_string_field_is_read() {
        let cases = [
            (r#"{"email": "ana@x.io"}"#, Some("ana@x.io")),
            (
                r#" {"password": "p", "email": " Ana@X.io "} "#,
                Some(" Ana@X.io "),
            ),
            (r#"{"email": "a\u0040x.io"}"#, Some("a@x.io")),
            (r#"{"email": "\ud83d\ude00"}"#, Some("\u{1F600}")),
            (r#"{"email": ""}"#, Some("")),
            (r#"{"user": {"email": "nested"}}"#, None),
            (r#"{"emails": "x", "e_mail": "y"}"#, None),
            (r#"{}"#, None),
            (r#"["email", "ana@x.io"]"#, None),
            (r#""email""#, None),
            (r#"42"#, None),
            (
                r#"{"n": 1e308, "m": -1e308, "s": 1e-999, "i": 123456789012345678901234567890}"#,
                None,
            ),
        ];
        for (body, want) in cases {
            assert_eq!(json(body), Ok(want.map(String::from)), "{body}");
        }
    }

    #[test]
    fn json_media_types_and_utf8_charset_are_accepted() {
        for content_type in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
            "text/json",
            "application/vnd.api+json",
            "application/merge-patch+json; charset=utf-8",
        ] {
            let h = headers(&[("content-type", content_type)]);
            assert_eq!(
                body_field(&h, br#"{"email":"a"}"#, "email", None),
                Ok(Some("a".into())),
                "{content_type}"
            );
        }
        let h = headers(&[
            ("content-type", "application/json"),
            ("content-encoding", "identity"),
        ]);
        assert_eq!(
            body_field(&h, br#"{"email":"a"}"#, "email", None),
            Ok(Some("a".into()))
        );
    }

    #[test]
    fn other_types_charsets_and_encodings_are_unsupported() {
        let cases: [(&[(&'static str, &str)], BodyError); 9] = [
            (
                &[("content-type", "multipart/form-data; boundary=x")],
                BodyError::UnsupportedMediaType("`multipart/form-data`".into()),
            ),
            (
                &[("content-type", "text/plain")],
                BodyError::UnsupportedMediaType("`text/plain`".into()),
            ),
            (
                &[("content-type", "application/+json")],
                BodyError::UnsupportedMediaType("`application/+json`".into()),
            ),
            (
                &[("content-type", "json")],
                BodyError::UnsupportedMediaType("`json`".into()),
            ),
            (
                &[],
                BodyError::UnsupportedMediaType("a body without Content-Type".into()),
            ),
            (
                &[("content-type", "application/json; charset=utf-16")],
                BodyError::UnsupportedCharset("utf-16".into()),
            ),
            (
                &[(
                    "content-type",
                    "application/x-www-form-urlencoded; charset=iso-8859-1",
                )],
                BodyError::UnsupportedCharset("iso-8859-1".into()),
            ),
            (
                &[
                    ("content-type", "application/json"),
                    ("content-encoding", "gzip"),
                ],
                BodyError::UnsupportedEncoding("gzip".into()),
            ),
            (
                &[
                    ("content-type", "application/json"),
                    ("content-encoding", "identity, br"),
                ],
                BodyError::UnsupportedEncoding("br".into()),
            ),
        ];
        for (pairs, want) in cases {
            let got = body_field(&headers(pairs), br#"{"email":"a"}"#, "email", None);
            assert!(want.is_unsupported_media_type());
            assert_eq!(got, Err(want), "{pairs:?}");
        }
        let two = headers(&[
            ("content-type", "application/json"),
            ("content-type", "application/json"),
        ]);
        let got = body_field(&two, br#"{"email":"a"}"#, "email", None);
        assert_eq!(got, Err(BodyError::MultipleContentTypes));
        assert!(!BodyError::MultipleContentTypes.is_unsupported_media_type());
        // No type and no body: no field.
        assert_eq!(body_field(&HeaderMap::new(), b"", "email", None), Ok(None));
    }

    #[test]
    fn json_some_apps_read_differently_is_refused() {
        let invalid = |body: &[u8]| {
            body_field(
                &headers(&[("content-type", "application/json")]),
                body,
                "email",
                None,
            )
        };
        let bom = b"\xEF\xBB\xBF{\"email\":\"a\"}";
        assert_eq!(
            invalid(bom),
            Err(BodyError::InvalidJson(
                "it starts with a byte order mark; send UTF-8 without one".into()
            ))
        );
        let utf16 = "{\"email\":\"a\"}"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect::<Vec<u8>>();
        let utf16_error = Err(BodyError::InvalidJson(
            "it is UTF-16 or UTF-32; send UTF-8".into(),
        ));
        assert_eq!(invalid(&utf16), utf16_error);
        assert_eq!(invalid(b"\xFF\xFE{\0}\0"), utf16_error);
        assert_eq!(
            invalid(b"{\"email\":\"\xFF\"}"),
            Err(BodyError::InvalidJson("it is not UTF-8".into()))
        );
        for body in [
            r#"{"email": "\ud800"}"#,
            r#"{"email": "a", "x": "\udc00"}"#,
            r#"{"x": ["\ud800x"], "email": "a"}"#,
            r#"{"\ud800": 1, "email": "a"}"#,
            r#"{"email": "a", "n": 1e999}"#,
            r#"{"n": [-1e999], "email": "a"}"#,
            r#"{"email": "a"} x"#,
            r#"{"email": "a",}"#,
            r#"{"email": 'a'}"#,
            r#"{"email": "a"} {"email": "b"}"#,
            r#"{email: "a"}"#,
            r#"{"email": "a" /* c */}"#,
            r#"{"email": NaN}"#,
            "{\"email\": \"a\tb\"}",
            "",
            "   ",
        ] {
            assert!(
                matches!(json(body), Err(BodyError::InvalidJson(_))),
                "{body}: {:?}",
                json(body)
            );
        }
    }

    #[test]
    fn deep_json_is_refused_anywhere_in_the_document() {
        let nested = |depth: usize| {
            format!(
                r#"{{"email": "a", "x": {}1{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        // The top-level object is one level.
        assert_eq!(json(&nested(MAX_DEPTH - 1)), Ok(Some("a".into())));
        assert_eq!(json(&nested(MAX_DEPTH)), Err(BodyError::TooDeep));
        assert_eq!(json(&nested(500)), Err(BodyError::TooDeep));
        let top = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(json(&top), Err(BodyError::TooDeep));
        let top = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(json(&top), Ok(None));
    }

    #[test]
    fn a_json_field_sent_twice_or_not_as_a_string_is_refused() {
        for body in [
            r#"{"email": "decoy", "email": "victim"}"#,
            r#"{"email": "a", "EMAIL": "b"}"#,
            r#"{"Email": "a", "email": "b"}"#,
            r#"{"email": "a", "ｅｍａｉｌ": "b"}"#,
            r#"{"email": "a", "e\u200bmail": "b"}"#,
            r#"{"email": "a", " email ": "b"}"#,
            r#"{"email": "a", "x": 1, "\u0065mail": "b"}"#,
        ] {
            assert_eq!(json(body), Err(ambiguous(TWICE_JSON)), "{body}");
        }
        // A single key differently spelt is the field.
        assert_eq!(json(r#"{"EMAIL": "a"}"#), Ok(Some("a".into())));
        for body in [
            r#"{"email": null}"#,
            r#"{"email": 5}"#,
            r#"{"email": true}"#,
            r#"{"email": ["a"]}"#,
            r#"{"email": {"v": "a"}}"#,
        ] {
            assert_eq!(
                json(body),
                Err(BodyError::FieldNotString("email".into())),
                "{body}"
            );
        }
        // Duplicates elsewhere do not matter.
        assert_eq!(
            json(r#"{"email": "a", "x": 1, "x": 2, "o": {"email": 1, "email": 2}}"#),
            Ok(Some("a".into()))
        );
    }

    #[test]
    fn a_form_field_is_read() {
        let cases = [
            ("email=ana%40x.io&password=x", Some("ana@x.io")),
            ("password=x&email=ana@x.io", Some("ana@x.io")),
            ("email=Ana+B%20C", Some("Ana B C")),
            ("email=caf%C3%A9", Some("café")),
            ("%65mail=a", Some("a")),
            ("EMAIL=a", Some("a")),
            ("email=", Some("")),
            ("email", Some("")),
            ("email=a%3Bb", Some("a;b")),
            ("&&email=a&&", Some("a")),
            ("password=a;b&email=c", Some("c")),
            ("emails=a&e-mail=b", None),
            ("", None),
            ("x=%zz&email=a", Some("a")),
        ];
        for (body, want) in cases {
            assert_eq!(form(body), Ok(want.map(String::from)), "{body}");
        }
        let php = body_field(
            &headers(&[("content-type", "application/x-www-form-urlencoded")]),
            b"e.mail=a",
            "e_mail",
            None,
        );
        assert_eq!(php, Ok(Some("a".into())));
    }

    #[test]
    fn a_form_field_read_two_ways_is_refused() {
        let twice = ambiguous("it appears more than once");
        let cases = [
            ("email=decoy&email=victim", twice.clone()),
            ("email=a&EMAIL=b", twice.clone()),
            ("email=a&%65mail=b", twice.clone()),
            ("email=a&e%E2%80%8Bmail=b", twice.clone()),
            ("email&email=b", twice.clone()),
            ("email[]=a", ambiguous("a bracketed name is read as a list")),
            (
                "email[x]=a&email=b",
                ambiguous("a bracketed name is read as a list"),
            ),
            (
                "email=victim;x=1",
                ambiguous("`;` is read as a separator by some frameworks; send it as %3B"),
            ),
            ("x=1;email=victim&email=decoy", twice.clone()),
            (
                "x=1;email=victim",
                ambiguous("`;` is read as a separator by some frameworks; send it as %3B"),
            ),
        ];
        for (body, want) in cases {
            assert_eq!(form(body), Err(want), "{body}");
        }
        for body in ["email=a%", "email=a%zz", "email=%FF", "email=%C0%AE"] {
            assert!(
                matches!(form(body), Err(BodyError::InvalidForm(_))),
                "{body}"
            );
        }
        let not_utf8 = body_field(
            &headers(&[("content-type", "application/x-www-form-urlencoded")]),
            b"email=\xFF",
            "email",
            None,
        );
        assert_eq!(
            not_utf8,
            Err(BodyError::InvalidForm("the body is not UTF-8"))
        );
        let php = body_field(
            &headers(&[("content-type", "application/x-www-form-urlencoded")]),
            b"e.mail=a&e_mail=b",
            "e_mail",
            None,
        );
        assert!(matches!(php, Err(BodyError::AmbiguousField { .. })));
    }

    #[test]
    fn ascii_names_compare_as_normalised_ones() {
        for key in [
            "email",
            "EMAIL",
            " Email\t",
            "e\u{1}mail",
            "\u{0}email\u{7f}",
            "email ",
            "emai",
            "emails",
            "e mail",
            "",
            " ",
            "\u{1c}email",
            "email\u{b}",
        ] {
            let want = normalize_identity(key).is_ok_and(|k| k == "email");
            assert_eq!(ascii_key_is(key, "email"), want, "{key:?}");
        }
    }

    #[test]
    fn many_non_ascii_names_are_refused_not_skipped() {
        let keys = |n: usize| {
            (0..n)
                .map(|i| format!("\"k\u{e9}{i}\": 1"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let body = format!("{{{}, \"email\": \"a\"}}", keys(MAX_UNICODE_NAMES));
        assert_eq!(json(&body), Ok(Some("a".into())));
        let body = format!("{{{}, \"email\": \"a\"}}", keys(MAX_UNICODE_NAMES + 1));
        assert_eq!(json(&body), Err(BodyError::TooManyUnicodeNames));
        // Any number of ASCII keys is fine.
        let ascii = (0..5000)
            .map(|i| format!("\"k{i}\": 1"))
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(
            json(&format!("{{{ascii}, \"email\": \"a\"}}")),
            Ok(Some("a".into()))
        );
        let form_body = (0..=MAX_UNICODE_NAMES)
            .map(|i| format!("k%C3%A9{i}=1"))
            .collect::<Vec<_>>()
            .join("&");
        assert_eq!(form(&form_body), Err(BodyError::TooManyUnicodeNames));
        // The budget is per list of names: the query's, then each reading of a form.
        let form_body = (0..MAX_UNICODE_NAMES)
            .map(|i| format!("k%C3%A9{i}=1"))
            .chain(["email=a".to_owned()])
            .collect::<Vec<_>>()
            .join("&");
        let query = (0..MAX_UNICODE_NAMES)
            .map(|i| format!("q%C3%A9{i}=1"))
            .collect::<Vec<_>>()
            .join("&");
        let h = headers(&[("content-type", "application/x-www-form-urlencoded")]);
        assert_eq!(
            body_field(&h, form_body.as_bytes(), "email", Some(&query)),
            Ok(Some("a".into()))
        );
    }

    #[test]
    fn the_field_in_the_query_string_is_refused() {
        let h = headers(&[("content-type", "application/json")]);
        let body = br#"{"email": "a"}"#;
        let in_query = Err(BodyError::FieldInQuery("email".into()));
        for query in [
            "email=b",
            "x=1&email=b",
            "x=1;email=b",
            "EMAIL=b",
            "%65mail=b",
            "email",
            "email[]=b",
        ] {
            assert_eq!(
                body_field(&h, body, "email", Some(query)),
                in_query,
                "{query}"
            );
        }
        // Even without a body.
        assert_eq!(
            body_field(&HeaderMap::new(), b"", "email", Some("email=a")),
            in_query
        );
        for query in ["", "emails=b", "x=email", "next=/login?email=a%26"] {
            assert_eq!(
                body_field(&h, body, "email", Some(query)),
                Ok(Some("a".into())),
                "{query}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        #[test]
        fn any_body_is_read_or_refused_without_panicking(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            json_like in r#"[{}\[\]",:a-zE\\u0-9 .;&=%+-]{0,80}"#,
            query in "[a-zE=&;%0-9]{0,20}",
        ) {
            for content_type in ["application/json", "application/x-www-form-urlencoded"] {
                let h = headers(&[("content-type", content_type)]);
                let _ = body_field(&h, &body, "email", Some(&query));
                if let Ok(Some(value)) = body_field(&h, json_like.as_bytes(), "email", None) {
                    // What is read is what the body holds: never more than it.
                    proptest::prop_assert!(value.len() <= json_like.len());
                }
            }
        }
    }
}
