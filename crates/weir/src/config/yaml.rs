//! Reading the YAML text into the file's shape, and saying where it is wrong in words
//! about weir's configuration rather than the parser's.
//!
//! The parser reads lazily, so a broken line can first surface as a consequence above it
//! (a mis-indented `limit:` ends its rule early: "missing field `limit`" on the line
//! before). So when the typed reading fails, the text is parsed again for its syntax
//! alone, and a syntax error is reported where it is, unless the typed reading had
//! already refused a value before it. The parser's own words are replaced where a
//! configuration has a better name for the problem: tabs in indentation, a `[` or `{`
//! never closed, a field written twice, a number that is not a whole number.

use std::path::Path;

use serde_saphyr::{Error, Location, Options};
use weir_core::MAX_LIMIT;

use super::error::ConfigError;

/// Deserializes the YAML (weir's configuration, or an envoyproxy/ratelimit file),
/// keeping the path of the field that failed.
pub(super) fn read_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &Path,
) -> Result<T, ConfigError> {
    let mut failed_path = None;
    let typed =
        serde_saphyr::with_deserializer_from_str_with_options(text, options(), |deserializer| {
            serde_path_to_error::deserialize(deserializer).map_err(|e| {
                failed_path = Some(e.path().to_string());
                e.into_inner()
            })
        });
    let error = match typed {
        Ok(raw) => return Ok(raw),
        Err(error) => error,
    };
    let error = error.without_snippet();
    let path = field_path(failed_path.unwrap_or_default());
    let located = |location: Option<Location>, field: String, message: String| {
        let mut error = ConfigError::new(file, message).field(field);
        if let Some(location) = location {
            error = error.at(location);
        }
        error
    };
    if let Error::DuplicateMappingKey {
        key: Some(key),
        location,
    } = error
    {
        let field = match path.strip_suffix('?') {
            Some(parent) => format!("{parent}{key}"),
            None => path,
        };
        return Err(located(
            Some(*location),
            field,
            duplicate(text, key, *location),
        ));
    }
    if let Some((at, message)) = syntax_error(text) {
        let refused_before =
            refused_value(error) && error.location().is_some_and(|l| end_line(text, l) < at.0);
        if !refused_before {
            let mut error = ConfigError::new(file, message).field(path);
            error.position = Some(at);
            return Err(error);
        }
    }
    let message = value_message(error, text, &path).unwrap_or_else(|| message_of(error));
    Err(located(error.location(), path, message))
}

fn options() -> Options {
    let mut options = Options::default();
    options.with_snippet = false;
    options
}

/// Whether a typed error refused a value for itself (a value of the wrong kind, an
/// unknown field or name, weir's own checks), which a syntax error further down cannot
/// have caused.
fn refused_value(error: &Error) -> bool {
    matches!(
        error,
        Error::Message { .. }
            | Error::InvalidScalar { .. }
            | Error::SerdeInvalidType { .. }
            | Error::SerdeInvalidValue { .. }
            | Error::SerdeUnknownVariant { .. }
            | Error::SerdeUnknownField { .. }
    )
}

/// The line a value ends on: a plain value goes on over the lines indented under it,
/// which a mis-indented field below it joins (`gcra` and `limit: 10` read as
/// `gcra limit`).
fn end_line(text: &str, location: Location) -> u64 {
    let span = location.span();
    let end = usize::try_from(span.offset() + span.len()).unwrap_or(usize::MAX);
    let newlines = text.chars().take(end).filter(|&c| c == '\n').count() as u64;
    location.line().max(newlines + 1)
}

/// The text's first syntax error, if it has one: its line and column, and what is wrong.
fn syntax_error(text: &str) -> Option<((u64, u64), String)> {
    let error =
        serde_saphyr::from_str_with_options::<serde::de::IgnoredAny>(text, options()).err()?;
    let error = error.without_snippet();
    if let Some(at) = tab_indent(text) {
        return Some((
            at,
            "a tab indents this line: YAML indents with spaces only".to_owned(),
        ));
    }
    let location = error.location()?;
    let at = (location.line(), location.column());
    if let Some((open, line, column)) = unclosed(text, at) {
        let close = if open == '[' { ']' } else { '}' };
        return Some((
            (line, column),
            format!(
                "this `{open}` is never closed: a list or mapping opened with `{open}` ends with `{close}` (on this line or a later one)"
            ),
        ));
    }
    let parser = message_of(error);
    let message = if parser.contains("quote") {
        "this quote is never closed: a quoted value ends with the same quote it starts with"
            .to_owned()
    } else {
        match misindented(text, location.line()) {
            Some((own, above)) => {
                // Deeper than the line above, it is read as more of that line's value
                // (the field named is the one above): say so.
                let read_as = if own > above {
                    ", so YAML reads it as more of the value above it"
                } else {
                    ""
                };
                return Some((
                    (location.line(), own as u64 + 1),
                    format!(
                        "this line is indented by {own} spaces, the line above by {above}{read_as}: the fields of one rule or section line up under each other"
                    ),
                ));
            }
            None => format!("this is not valid YAML here ({parser})"),
        }
    };
    Some((at, message))
}

/// The first tab in a line's indentation, which YAML forbids.
fn tab_indent(text: &str) -> Option<(u64, u64)> {
    text.lines().enumerate().find_map(|(i, line)| {
        let indent = &line[..line.len() - line.trim_start().len()];
        let column = indent.find('\t')?;
        Some((i as u64 + 1, column as u64 + 1))
    })
}

/// The innermost `[` or `{` still open at `at` (line, column), outside quotes and
/// comments: its character, line and column.
fn unclosed(text: &str, at: (u64, u64)) -> Option<(char, u64, u64)> {
    let mut open = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i as u64 + 1;
        let mut quote = None;
        let mut previous = ' ';
        for (j, c) in line.chars().enumerate() {
            let column = j as u64 + 1;
            if (number, column) > at {
                return open.pop();
            }
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' if !open.is_empty() || previous == ' ' => quote = Some(c),
                    '#' if previous == ' ' || j == 0 => break,
                    '[' | '{' => open.push((c, number, column)),
                    ']' | '}' => {
                        open.pop();
                    }
                    _ => {}
                },
            }
            previous = c;
        }
    }
    open.pop()
}

/// When line `number` is indented differently from the nearest line above it with
/// content: the two indentations, in spaces.
fn misindented(text: &str, number: u64) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(usize::try_from(number).ok()?.checked_sub(1)?)?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let above = lines[..number as usize - 1]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))?;
    // A list item's fields line up with the field after its `- `.
    let above_indent = indent(above)
        + if above.trim_start().starts_with("- ") {
            2 + above.trim_start()[2..].len() - above.trim_start()[2..].trim_start().len()
        } else {
            0
        };
    (indent(line) != above_indent && !line.trim_start().starts_with('-'))
        .then_some((indent(line), above_indent))
}

/// A field given twice in one mapping, and where it was first.
fn duplicate(text: &str, key: &str, location: Location) -> String {
    let column = location.column() as usize;
    let above: Vec<&str> = text
        .lines()
        .take(location.line().saturating_sub(1) as usize)
        .collect();
    let first = above
        .iter()
        .enumerate()
        .rev()
        .take_while(|(_, line)| {
            line.trim().is_empty() || line.len() - line.trim_start().len() + 1 >= column
        })
        .find(|(_, line)| key_at(line).is_some_and(|(c, k)| c == column && k == key));
    match first {
        Some((i, _)) => format!(
            "`{key}` is given twice (first on line {}): give each field once",
            i + 1
        ),
        None => format!("`{key}` is given twice: give each field once"),
    }
}

/// The key a line starts (after a `- `, if any) and its 1-based column.
fn key_at(line: &str) -> Option<(usize, &str)> {
    let mut rest = line.trim_start();
    let mut column = line.len() - rest.len() + 1;
    if let Some(item) = rest.strip_prefix("- ") {
        column += 2 + item.len() - item.trim_start().len();
        rest = item.trim_start();
    }
    let (key, _) = rest.split_once(':')?;
    Some((column, key.trim_end()))
}

/// A value of the wrong kind for its field, in words about the field.
fn value_message(error: &Error, text: &str, path: &str) -> Option<String> {
    if let Error::Unexpected { expected, .. } = error {
        let wanted = match *expected {
            "sequence start" => "a list here (lines starting `- `, or `[a, b]`)",
            "mapping start" => "fields here (`name: value` lines, or `{name: value}`)",
            "string scalar" => "a single value here, not a list or fields",
            _ => return None,
        };
        return Some(format!("expected {wanted}"));
    }
    if let Error::Eof { .. } = error {
        return Some("the file ends before any configuration: it needs at least `rules:`".into());
    }
    let Error::InvalidScalar { ty, location } = error else {
        return None;
    };
    let field = path
        .rsplit('.')
        .next()
        .map(|leaf| leaf.split('[').next().unwrap_or(leaf))
        .filter(|leaf| !leaf.is_empty())
        .unwrap_or("the value");
    let kind = match *ty {
        "u8" | "u16" | "u32" | "u64" | "usize" => match field {
            "limit" => {
                format!("a whole number from 1 to {MAX_LIMIT} (to 10000 for sliding_log)")
            }
            "burst" => format!("a whole number from 1 to {MAX_LIMIT}"),
            "cost" | "max_keys" => "a whole number, at least 1".to_owned(),
            "ipv6_prefix" => "a whole number from 1 to 128".to_owned(),
            "max_body_bytes" => "a whole number from 1 to 16777216".to_owned(),
            "fallback_instances" => "a whole number from 1 to 10000".to_owned(),
            _ => "a whole number".to_owned(),
        },
        "bool" => "true or false".to_owned(),
        _ => return None,
    };
    let written = scalar_at(text, location.line(), location.column());
    Some(format!("{field} must be {kind}, got `{written}`"))
}

/// The scalar written at a line and column, as written (without a comment after it).
fn scalar_at(text: &str, line: u64, column: u64) -> String {
    let Some(line) = text.lines().nth(line.saturating_sub(1) as usize) else {
        return String::new();
    };
    let rest: String = line
        .chars()
        .skip(column.saturating_sub(1) as usize)
        .collect();
    let end = rest.find(" #").unwrap_or(rest.len());
    let value = rest[..end].trim();
    let quoted = value.starts_with('"') || value.starts_with('\'');
    if quoted {
        value.to_owned()
    } else {
        value
            .trim_end_matches([',', ']', '}'])
            .trim_end()
            .to_owned()
    }
}

/// The parser's message without the position it prefixes (kept apart in the error).
fn message_of(error: &Error) -> String {
    let text = error.to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let text = match text.split_once(": ") {
        Some((position, rest)) if position.starts_with("line ") => rest,
        _ => text,
    };
    let text = text.rfind(" at line ").map_or(text, |end| &text[..end]);
    text.to_owned()
}

/// The path of a field as written in the file (without the `value` of a `Spanned`,
/// at the end or before a field of a section read as one: a field of the file named
/// `value` holds a single value, never fields).
fn field_path(path: String) -> String {
    let path = path.replace(".value.", ".");
    path.strip_suffix(".value")
        .map(str::to_owned)
        .unwrap_or(path)
}
