//! The canonical path of a request: one spelling per resource, decided before any rule
//! is matched and forwarded as decided.
//!
//! # The canonical form
//!
//! As RFC 3986 section 6.2.2 and Envoy's `normalize_path` + `merge_slashes`:
//!
//! - percent-encoded unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded
//!   (`/%6Cogin` is `/login`), every other escape is written with upper-case hex
//!   (`%3a` is `%3A`), and characters that cannot appear raw in a path (space, `"`,
//!   `<`, `>`, `[`, `]`, `^`, `` ` ``, `{`, `|`, `}`, non-ASCII) are percent-encoded
//!   (UTF-8): raw and escaped spellings of one character are one path;
//! - dot segments are removed (`/./login`, `/x/../login` are `/login`; `..` never goes
//!   above the root) and runs of slashes are merged (`//login` is `/login`); a trailing
//!   slash is kept (`/login/` is not `/login`, unless a rule opts in, see
//!   [`PathMatchOptions`]);
//! - `%2F`, `%5C` and a raw `\` are refused by default ([`EscapedSlashes`]): an app may
//!   read them as separators (IIS, some Java containers) or not, so there is no one
//!   reading;
//! - refused too: a broken escape (`%4`, `%zz`), NUL and other control characters raw or
//!   escaped (`%00`, `%0A`), escapes that do not decode to UTF-8 (`%C0%AE`, an overlong
//!   `.`), a path that does not start with `/` (other than `*`, the target of
//!   `OPTIONS *`, which the caller allows for OPTIONS only), and `..;x` / `.;x`
//!   segments (below).
//!
//! The empty path of an absolute-form target (`GET http://host HTTP/1.1`) is `/`. The
//! query string is not part of the path: [`canonical_path_and_query`] keeps it as sent.
//!
//! # `;` parameters (matrix parameters)
//!
//! Tomcat, Jetty and Spring strip `;params` from each segment before routing
//! (`/login;jsessionid=1` is routed as `/login`); most other frameworks keep `;` as a
//! character. weir keeps `;params` in the canonical path (it forwards what it was sent,
//! so either kind of app reads it as it always did), and **strips them for matching**
//! ([`match_form`]): a rule for `/login` applies to `/login;x=1`, so a Java app cannot be
//! reached around it, and for other apps a rule applies to one path more, which is the
//! safe direction. A segment that is a dot segment once its parameters are stripped
//! (`/..;/admin`, the classic Tomcat traversal) is refused, since a proxy and Tomcat
//! read it as two different paths. `%3B` is a character, not a separator, everywhere.
//!
//! # Extensions
//!
//! `/login.json` is not `/login`: suffix matching (Rails formats, Spring's
//! `useSuffixPatternMatch`) is not folded. An app that routes `/login.json` to the
//! login handler needs a `path_prefix` or a pattern covering it.
//!
//! # Reserved characters in rules
//!
//! RFC 3986 keeps `%3A` and `:` apart (an app may give them different meanings, as
//! Google-style `:verb` paths do), so the canonical path does too. Most apps route on the
//! decoded path though, so [`match_form`] reads the escapes of `: @ ! $ & ' ( ) * + , =`
//! as the characters: a rule for `/users/@me` applies to `/users/%40me`.

use std::borrow::Cow;
use std::fmt::Write;

/// What `%2F`, `%5C` (escaped `/` and `\`) and a raw `\` in a path become.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum EscapedSlashes {
    /// The request is refused (400): the safe default, since apps disagree on whether
    /// they separate segments.
    #[default]
    Reject,
    /// Kept as characters of a segment (`%2F`, `%5C`; a raw `\` is written `%5C`).
    Keep,
    /// Read as `/` (a raw `\` too), then slashes merged and dot segments removed again,
    /// as Envoy's `UNESCAPE_AND_MERGE`: for apps that decode them before routing.
    UnescapeAndMerge,
}

/// How paths are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PathOptions {
    /// What escaped slashes become.
    pub escaped_slashes: EscapedSlashes,
}

/// Per-rule loosenings of path matching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PathMatchOptions {
    /// ASCII letters compared case-insensitively (`/Login` is `/login`), for apps that
    /// route so (ASP.NET, IIS). Escaped non-ASCII letters are not folded, but for the
    /// four that Java's `equalsIgnoreCase` folds into ASCII (the Kelvin sign, the long
    /// s, dotless and dotted I).
    pub case_insensitive: bool,
    /// A trailing slash does not make another path (`/login/` is `/login`), for apps
    /// that route both alike (Spring before 6, Django's `APPEND_SLASH`...).
    pub trailing_slash: bool,
}

/// Why a path cannot be read one way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum PathError {
    /// The path does not start with `/`.
    #[error("the request path must start with `/`")]
    NotAbsolute,
    /// A `%` not followed by two hexadecimal digits.
    #[error(
        "the request path has an invalid percent-encoding (`%` must be followed by two hex digits)"
    )]
    InvalidEscape,
    /// NUL or another control character, raw or escaped.
    #[error("the request path contains a control character or NUL")]
    ControlCharacter,
    /// A character that has no place in a path (`?` or `#` in the path itself).
    #[error("the request path contains `{0}`, which must be percent-encoded")]
    InvalidCharacter(char),
    /// Escapes that do not decode to UTF-8 text.
    #[error("the request path's percent-encoded bytes are not valid UTF-8")]
    InvalidUtf8,
    /// `%2F`, `%5C` or `\`, refused by configuration.
    #[error(
        "the request path contains an escaped slash (`%2F`, `%5C`) or a backslash, which apps read differently"
    )]
    EscapedSlash,
    /// A dot segment with `;` parameters (`/..;/`), read as traversal by some servers
    /// only.
    #[error(
        "the request path has a `.` or `..` segment with `;` parameters, which servers read differently"
    )]
    DotSegmentWithParams,
}

/// The canonical form of a request path (see the [module docs](self)).
pub(crate) fn canonical_path(raw: &str, options: PathOptions) -> Result<String, PathError> {
    if raw == "*" {
        return Ok("*".to_owned());
    }
    if raw.is_empty() {
        return Ok("/".to_owned());
    }
    let rest = raw.strip_prefix('/').ok_or(PathError::NotAbsolute)?;
    let segments = split_and_decode(rest.as_bytes(), options.escaped_slashes)?;
    let last = segments.len() - 1;
    let mut out: Vec<String> = Vec::with_capacity(segments.len());
    let mut trailing_slash = false;
    for (i, segment) in segments.into_iter().enumerate() {
        let is_last = i == last;
        match segment.as_str() {
            "." | "" => trailing_slash = is_last,
            ".." => {
                out.pop();
                trailing_slash = is_last;
            }
            s => {
                if s.contains(';') && matches!(s.split(';').next(), Some("." | "..")) {
                    return Err(PathError::DotSegmentWithParams);
                }
                out.push(segment);
                trailing_slash = false;
            }
        }
    }
    let mut path = String::with_capacity(raw.len() + 1);
    for segment in &out {
        path.push('/');
        path.push_str(segment);
    }
    if trailing_slash || out.is_empty() {
        path.push('/');
    }
    Ok(path)
}

/// The canonical path of a `path?query` request target, followed by its query as sent:
/// the target itself (borrowed) when its path is canonical already, as most are.
pub(crate) fn canonical_path_and_query(
    target: &str,
    options: PathOptions,
) -> Result<Cow<'_, str>, PathError> {
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    if is_canonical(path) {
        return Ok(Cow::Borrowed(target));
    }
    let mut canonical = canonical_path(path, options)?;
    if let Some(query) = query {
        canonical.push('?');
        canonical.push_str(query);
    }
    Ok(Cow::Owned(canonical))
}

/// Whether [`canonical_path`] would return `path` as it is, whatever the options: it
/// starts with `/`, holds only characters a path may hold raw (no `%`, no `\`), no
/// empty segment but a trailing one, and no `.` or `..` segment (with `;params` or not).
fn is_canonical(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    let raw = |b: &u8| *b == b'/' || unreserved(*b) || sub_delim_or_colon_at(*b);
    if !rest.as_bytes().iter().all(raw) {
        return false;
    }
    let mut segments = rest.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        let bare = segment.split(';').next().unwrap_or_default();
        if (segment.is_empty() && !last) || bare == "." || bare == ".." {
            return false;
        }
    }
    true
}

/// Splits the path after its leading `/` into segments in canonical spelling.
fn split_and_decode(bytes: &[u8], slashes: EscapedSlashes) -> Result<Vec<String>, PathError> {
    let mut segments = Vec::new();
    let mut segment = String::new();
    // The bytes the segment stands for, to check they are UTF-8.
    let mut decoded: Vec<u8> = Vec::new();
    let mut end_segment = |segment: &mut String, decoded: &mut Vec<u8>| {
        if std::str::from_utf8(decoded).is_err() {
            return Err(PathError::InvalidUtf8);
        }
        decoded.clear();
        segments.push(std::mem::take(segment));
        Ok(())
    };
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            b'/' => end_segment(&mut segment, &mut decoded)?,
            b'%' => {
                let (Some(&hi), Some(&lo)) = (bytes.get(i), bytes.get(i + 1)) else {
                    return Err(PathError::InvalidEscape);
                };
                let (Some(hi), Some(lo)) = (hex(hi), hex(lo)) else {
                    return Err(PathError::InvalidEscape);
                };
                i += 2;
                let v = hi << 4 | lo;
                match v {
                    b'/' | b'\\' => match slashes {
                        EscapedSlashes::Reject => return Err(PathError::EscapedSlash),
                        EscapedSlashes::Keep => {
                            escape(&mut segment, v);
                            decoded.push(v);
                        }
                        EscapedSlashes::UnescapeAndMerge => {
                            end_segment(&mut segment, &mut decoded)?;
                        }
                    },
                    v if v.is_ascii_control() => return Err(PathError::ControlCharacter),
                    v if unreserved(v) => {
                        segment.push(char::from(v));
                        decoded.push(v);
                    }
                    v => {
                        escape(&mut segment, v);
                        decoded.push(v);
                    }
                }
            }
            b'\\' => match slashes {
                EscapedSlashes::Reject => return Err(PathError::EscapedSlash),
                EscapedSlashes::Keep => {
                    escape(&mut segment, b);
                    decoded.push(b);
                }
                EscapedSlashes::UnescapeAndMerge => end_segment(&mut segment, &mut decoded)?,
            },
            b'?' | b'#' => return Err(PathError::InvalidCharacter(char::from(b))),
            b if b.is_ascii_control() => return Err(PathError::ControlCharacter),
            b if unreserved(b) || sub_delim_or_colon_at(b) => {
                segment.push(char::from(b));
                decoded.push(b);
            }
            // Space, `"<>[]^`{|}` and the bytes of non-ASCII characters.
            b => {
                escape(&mut segment, b);
                decoded.push(b);
            }
        }
    }
    end_segment(&mut segment, &mut decoded)?;
    Ok(segments)
}

fn hex(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

fn escape(out: &mut String, b: u8) {
    // Writing to a String cannot fail.
    let _ = write!(out, "%{b:02X}");
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// The other characters a path segment may hold raw (RFC 3986 `pchar`).
fn sub_delim_or_colon_at(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':' | b'@'
    )
}

/// The letters outside ASCII that case-insensitive comparisons fold into ASCII ones
/// (Java's `equalsIgnoreCase`, and so Spring's case-insensitive paths: the Kelvin sign
/// is `k`, the long s is `s`, dotless and dotted I are `i`), as canonical paths escape
/// them: else `/boo%E2%84%AAs` would reach an app's `/books` under no rule.
const ASCII_FOLDED: [(&str, char); 4] = [
    ("%E2%84%AA", 'k'),
    ("%C5%BF", 's'),
    ("%C4%B1", 'i'),
    ("%C4%B0", 'i'),
];

/// The reserved characters whose escapes [`match_form`] reads as the characters.
fn decoded_for_matching(b: u8) -> bool {
    sub_delim_or_colon_at(b) && b != b';'
}

/// The form in which a rule's path and a request's canonical path are compared: `;`
/// parameters stripped from each segment (and segments left empty dropped), escapes of
/// `: @ ! $ & ' ( ) * + , =` decoded, then the rule's opt-ins applied.
///
/// Apply it to both sides, each already canonical ([`canonical_path`]; a rule's path at
/// load). For a prefix, apply it without `trailing_slash` (`/api/` must not become
/// `/api`, which would match `/apix`). A path in this form is never forwarded: it only
/// decides which rules apply, so it may read more spellings as one, never fewer.
pub(crate) fn match_form(canonical: &str, options: PathMatchOptions) -> Cow<'_, str> {
    let changes = canonical.contains([';', '%'])
        || (options.case_insensitive && canonical.bytes().any(|b| b.is_ascii_uppercase()))
        || (options.trailing_slash && canonical.len() > 1 && canonical.ends_with('/'));
    if !changes || canonical == "*" {
        return Cow::Borrowed(canonical);
    }
    let Some(rest) = canonical.strip_prefix('/') else {
        return Cow::Borrowed(canonical);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    let mut out = String::with_capacity(canonical.len());
    for (i, segment) in segments.into_iter().enumerate() {
        let segment = segment.split(';').next().unwrap_or_default();
        if segment.is_empty() && i != last {
            continue;
        }
        out.push('/');
        let bytes = segment.as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            let b = bytes[j];
            if b == b'%'
                && options.case_insensitive
                && let Some((escaped, letter)) = ASCII_FOLDED
                    .iter()
                    .find(|(escaped, _)| segment[j..].starts_with(escaped))
            {
                out.push(*letter);
                j += escaped.len();
                continue;
            }
            if b == b'%'
                && let (Some(hi), Some(lo)) = (
                    bytes.get(j + 1).copied().and_then(hex),
                    bytes.get(j + 2).copied().and_then(hex),
                )
                && decoded_for_matching(hi << 4 | lo)
            {
                out.push(char::from(hi << 4 | lo));
                j += 3;
                continue;
            }
            out.push(char::from(b));
            j += 1;
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    if options.case_insensitive {
        out.make_ascii_lowercase();
    }
    if options.trailing_slash && out.len() > 1 && out.ends_with('/') {
        out.pop();
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
