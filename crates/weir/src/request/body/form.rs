//! Forms (`application/x-www-form-urlencoded`) and the query string: a field read once,
//! whichever separator or decoding an app uses.

use percent_encoding::percent_decode;

use super::BodyError;
use super::fields::FieldName;

pub(super) fn query_has(query: &str, field: &FieldName<'_>) -> Result<bool, BodyError> {
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

pub(super) fn form_field(body: &[u8], field: &FieldName<'_>) -> Result<Option<String>, BodyError> {
    let text =
        std::str::from_utf8(body).map_err(|_| BodyError::InvalidForm("the body is not UTF-8"))?;
    // Apps that decode JSON whatever the Content-Type (Go's json.Decoder, Flask's
    // get_json(force=True)) would read such a body as JSON, and find another field.
    if text.trim_start().starts_with(['{', '[']) {
        return Err(BodyError::InvalidForm(
            "a form body must not start like JSON (`{` or `[`): apps that decode JSON whatever the type would read it differently",
        ));
    }
    Ok(pairs_field(text, field, BodyError::InvalidForm)?.map(|found| found.value))
}

/// The field in a query string, read as a form's is.
pub(super) fn query_field(query: &str, field: &FieldName<'_>) -> Result<Option<Found>, BodyError> {
    pairs_field(query, field, BodyError::InvalidQuery)
}

/// The field in `name=value` pairs separated by `&` (and by `;` for some frameworks):
/// once, not bracketed, the same whichever separators are read, its value decoded once.
/// `invalid` words the error of a value that does not decode.
fn pairs_field(
    text: &str,
    field: &FieldName<'_>,
    invalid: fn(&'static str) -> BodyError,
) -> Result<Option<Found>, BodyError> {
    let ambiguous = |why| BodyError::AmbiguousField {
        field: field.text.to_owned(),
        why,
    };
    // The field as read with `&` alone between pairs, and with `;` too.
    let read = |separators: &[char]| -> Result<Option<(&str, &str)>, BodyError> {
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
                Some(false) => found = Some((name, value)),
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
        .map(|(name, value)| found(field, name, value, invalid))
        .transpose()
}

/// The field in `Cookie` header text (`a=1; b=2`, lines joined with `; `): once, under
/// one spelling of its name, its value unquoted and decoded once.
pub(super) fn cookie_field(text: &str, field: &FieldName<'_>) -> Result<Option<Found>, BodyError> {
    let ambiguous = |why| BodyError::AmbiguousField {
        field: field.text.to_owned(),
        why,
    };
    field.unicode_names.set(0);
    let mut found_pair = None;
    for pair in text.split(';').map(|p| p.trim_matches([' ', '\t'])) {
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        let name = name.trim_matches([' ', '\t']);
        // `a=1 sid=x` and `a=1, sid=x`: Python's SimpleCookie (Django, aiohttp) reads
        // a second cookie there, where others read one value.
        for hidden in value.split([' ', '\t', ',']).skip(1) {
            if let Some((inner, _)) = hidden.split_once('=')
                && !inner.is_empty()
                && field.in_form(&decode_lossy(inner))?.is_some()
            {
                return Err(ambiguous(
                    "another cookie's value holds it after a space or comma, which some apps read as a cookie of its own",
                ));
            }
        }
        match field.in_form(&decode_lossy(name))? {
            None => {}
            Some(true) => return Err(ambiguous("a bracketed name is read as a list")),
            Some(false) if found_pair.is_some() => {
                return Err(ambiguous("it appears more than once"));
            }
            Some(false) => found_pair = Some((name, value.trim_matches([' ', '\t']))),
        }
    }
    found_pair
        .map(|(name, value)| {
            let unquoted = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            // Python's cookie parsers and Werkzeug decode `\` escapes in a quoted
            // value (`"ab\143"` is `abc`); others keep them: two readings.
            if unquoted.len() != value.len() && unquoted.contains('\\') {
                return Err(ambiguous(
                    "a quoted value with `\\` escapes is read differently by different apps",
                ));
            }
            found(field, name, unquoted, BodyError::InvalidCookie)
        })
        .transpose()
}

/// A field's value found under `name` (as sent), decoded once.
fn found(
    field: &FieldName<'_>,
    name: &str,
    value: &str,
    invalid: fn(&'static str) -> BodyError,
) -> Result<Found, BodyError> {
    let decoded = decode_strict(value).ok_or(invalid(
        "the field's value has a broken percent-escape or is not UTF-8",
    ))?;
    Ok(Found {
        exact: name == field.text && decoded == value,
        value: decoded,
    })
}

/// A field's value, and whether the request wrote it exactly so: its name as the
/// rule names it, its value without escapes. An app comparing exactly may read a
/// respelled one as another field (see [`crate::engine`]'s `Identity::exact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// The value, decoded.
    pub(crate) value: String,
    /// Whether name and value were written exactly so.
    pub(crate) exact: bool,
}
