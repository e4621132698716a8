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
pub enum EscapedSlashes {
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
pub struct PathOptions {
    /// What escaped slashes become.
    pub escaped_slashes: EscapedSlashes,
}

/// Per-rule loosenings of path matching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathMatchOptions {
    /// ASCII letters compared case-insensitively (`/Login` is `/login`), for apps that
    /// route so (ASP.NET, IIS). Escaped non-ASCII letters are not folded.
    pub case_insensitive: bool,
    /// A trailing slash does not make another path (`/login/` is `/login`), for apps
    /// that route both alike (Spring before 6, Django's `APPEND_SLASH`...).
    pub trailing_slash: bool,
}

/// Why a path cannot be read one way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
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
pub fn canonical_path(raw: &str, options: PathOptions) -> Result<String, PathError> {
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
pub fn canonical_path_and_query(
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
pub fn match_form(canonical: &str, options: PathMatchOptions) -> Cow<'_, str> {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [EscapedSlashes; 3] = [
        EscapedSlashes::Reject,
        EscapedSlashes::Keep,
        EscapedSlashes::UnescapeAndMerge,
    ];

    fn with(slashes: EscapedSlashes) -> PathOptions {
        PathOptions {
            escaped_slashes: slashes,
        }
    }

    fn canon(raw: &str) -> Result<String, PathError> {
        canonical_path(raw, PathOptions::default())
    }

    #[test]
    fn spellings_of_login_are_one_path() {
        for raw in [
            "/login",
            "/%6Cogin",
            "/%6cogin",
            "/%6C%6F%67%69%6E",
            "//login",
            "///login",
            "/./login",
            "/././login",
            "/x/../login",
            "/x/y/../../login",
            "/../login",
            "/../../login",
            "/x/%2E%2E/login",
            "/x/%2e%2e/login",
            "/%2E/login",
            "/x//..//login",
        ] {
            assert_eq!(canon(raw), Ok("/login".into()), "{raw}");
        }
    }

    #[test]
    fn escapes_are_upper_cased_and_raw_specials_encoded() {
        let cases = [
            ("/a%3ab", "/a%3Ab"),
            ("/a%3Ab", "/a%3Ab"),
            ("/a:b", "/a:b"),
            ("/caf%c3%a9", "/caf%C3%A9"),
            ("/café", "/caf%C3%A9"),
            ("/a b", "/a%20b"),
            ("/a%20b", "/a%20b"),
            ("/{x}|^`[y]\"<>", "/%7Bx%7D%7C%5E%60%5By%5D%22%3C%3E"),
            ("/%7Bx%7D", "/%7Bx%7D"),
            ("/%25", "/%25"),
            ("/~user/a-b_c.d", "/~user/a-b_c.d"),
            ("/%7Euser", "/~user"),
            ("/a;b=c,d", "/a;b=c,d"),
            ("/a%3Bb", "/a%3Bb"),
            ("/!$&'()*+,;=:@", "/!$&'()*+,;=:@"),
        ];
        for (raw, want) in cases {
            assert_eq!(canon(raw), Ok(want.into()), "{raw}");
        }
    }

    #[test]
    fn trailing_slashes_dots_and_the_root() {
        let cases = [
            ("", "/"),
            ("/", "/"),
            ("//", "/"),
            ("/.", "/"),
            ("/..", "/"),
            ("/a/..", "/"),
            ("/a/b/..", "/a/"),
            ("/a/.", "/a/"),
            ("/a/", "/a/"),
            ("/a//", "/a/"),
            ("/a/./", "/a/"),
            ("/a/b/../c", "/a/c"),
            ("/a/.b", "/a/.b"),
            ("/a/..b", "/a/..b"),
            ("/a/...", "/a/..."),
            ("*", "*"),
        ];
        for (raw, want) in cases {
            assert_eq!(canon(raw), Ok(want.into()), "{raw:?}");
        }
    }

    #[test]
    fn unreadable_paths_are_refused() {
        let cases = [
            ("login", PathError::NotAbsolute),
            ("http://x/login", PathError::NotAbsolute),
            ("**", PathError::NotAbsolute),
            ("/a%", PathError::InvalidEscape),
            ("/a%4", PathError::InvalidEscape),
            ("/a%zz", PathError::InvalidEscape),
            ("/a%4g", PathError::InvalidEscape),
            ("/a%%41", PathError::InvalidEscape),
            ("/a%00", PathError::ControlCharacter),
            ("/a%0a", PathError::ControlCharacter),
            ("/a%0D%0A", PathError::ControlCharacter),
            ("/a%7F", PathError::ControlCharacter),
            ("/a\u{0}", PathError::ControlCharacter),
            ("/a\tb", PathError::ControlCharacter),
            ("/a\u{7f}", PathError::ControlCharacter),
            ("/a?b", PathError::InvalidCharacter('?')),
            ("/a#b", PathError::InvalidCharacter('#')),
            ("/a%FF", PathError::InvalidUtf8),
            ("/%C0%AE%C0%AE/admin", PathError::InvalidUtf8),
            ("/a%C3", PathError::InvalidUtf8),
            ("/a%C3/%A9", PathError::InvalidUtf8),
            ("/a%2Fb", PathError::EscapedSlash),
            ("/a%2fb", PathError::EscapedSlash),
            ("/a%5Cb", PathError::EscapedSlash),
            ("/a\\b", PathError::EscapedSlash),
            ("/..;/admin", PathError::DotSegmentWithParams),
            ("/x/..;x=1/admin", PathError::DotSegmentWithParams),
            ("/.;/admin", PathError::DotSegmentWithParams),
            ("/%2E%2E;/admin", PathError::DotSegmentWithParams),
        ];
        for (raw, want) in cases {
            assert_eq!(canon(raw), Err(want), "{raw:?}");
        }
    }

    #[test]
    fn escaped_slashes_kept_or_merged_on_request() {
        let keep = with(EscapedSlashes::Keep);
        let merge = with(EscapedSlashes::UnescapeAndMerge);
        let cases = [
            ("/a%2fb", "/a%2Fb", "/a/b"),
            ("/a%5Cb", "/a%5Cb", "/a/b"),
            ("/a\\b", "/a%5Cb", "/a/b"),
            ("/a%2F%2Fb", "/a%2F%2Fb", "/a/b"),
            ("/x%2F..%2Flogin", "/x%2F..%2Flogin", "/login"),
            ("/x\\..\\login", "/x%5C..%5Clogin", "/login"),
            ("/%2F", "/%2F", "/"),
            ("/a%2F", "/a%2F", "/a/"),
        ];
        for (raw, kept, merged) in cases {
            assert_eq!(canonical_path(raw, keep), Ok(kept.into()), "{raw}");
            assert_eq!(canonical_path(raw, merge), Ok(merged.into()), "{raw}");
        }
    }

    #[test]
    fn the_query_is_kept_as_sent() {
        let o = PathOptions::default();
        assert_eq!(
            canonical_path_and_query("//%6Cogin?next=/a/../b&x=%2f", o),
            Ok("/login?next=/a/../b&x=%2f".into())
        );
        assert_eq!(canonical_path_and_query("/a?", o), Ok("/a?".into()));
        assert_eq!(canonical_path_and_query("/a", o), Ok("/a".into()));
        assert_eq!(
            canonical_path_and_query("/a%2F?x", o),
            Err(PathError::EscapedSlash)
        );
    }

    #[test]
    fn match_form_strips_params_and_decodes_reserved_escapes() {
        let none = PathMatchOptions::default();
        let cases = [
            ("/login", "/login"),
            ("/login;jsessionid=1", "/login"),
            ("/login;", "/login"),
            ("/a;x/b;y=2", "/a/b"),
            ("/;x/login", "/login"),
            ("/a/;x", "/a/"),
            ("/;x", "/"),
            ("/a%3Bb", "/a%3Bb"),
            ("/users/%40me", "/users/@me"),
            ("/v1/things%3AbatchGet", "/v1/things:batchGet"),
            ("/a%21%24%26%27%28%29%2A%2B%2C%3D", "/a!$&'()*+,="),
            ("/a%20b", "/a%20b"),
            ("/a%25", "/a%25"),
            ("/a%2F", "/a%2F"),
            ("/Login/", "/Login/"),
            ("*", "*"),
        ];
        for (path, want) in cases {
            assert_eq!(match_form(path, none), want, "{path}");
        }
        let ci = PathMatchOptions {
            case_insensitive: true,
            trailing_slash: false,
        };
        assert_eq!(match_form("/LoGin/", ci), "/login/");
        assert_eq!(match_form("/caf%C3%A9", ci), "/caf%c3%a9");
        let ts = PathMatchOptions {
            case_insensitive: false,
            trailing_slash: true,
        };
        assert_eq!(match_form("/Login/", ts), "/Login");
        assert_eq!(match_form("/login;x/", ts), "/login");
        assert_eq!(match_form("/", ts), "/");
        let both = PathMatchOptions {
            case_insensitive: true,
            trailing_slash: true,
        };
        assert_eq!(match_form("/LOGIN/", both), "/login");
        assert_eq!(match_form("/LOGIN;X=1", both), "/login");
    }

    /// A path in a small alphabet that exercises every branch.
    fn raw_path() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("/".to_owned()),
                Just(".".to_owned()),
                Just("..".to_owned()),
                Just(";".to_owned()),
                Just("\\".to_owned()),
                Just("%".to_owned()),
                "%[0-9a-fA-F]{2}",
                "[a-zA-Z0-9~:@ é]",
                "%(2[eEfF]|5[cC]|3[bB]|6[cC]|[cC]3%[aA]9)",
            ],
            0..16,
        )
        .prop_map(|parts| format!("/{}", parts.concat()))
    }

    /// A canonical-looking path: segments of unreserved characters, never dots alone.
    fn plain_path() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec("[a-zA-Z0-9_~-][a-zA-Z0-9._~-]{0,6}", 0..5)
    }

    /// The same path spelled another way: escapes, `.` and `x/..` segments, slashes.
    fn respell(segments: &[String], choices: &[u8]) -> String {
        let mut out = String::new();
        let mut k = 0;
        let mut next = || {
            k += 1;
            choices.get(k - 1).copied().unwrap_or(0)
        };
        for segment in segments {
            out.push('/');
            match next() % 4 {
                0 => out.push_str("./"),
                1 => out.push_str("zz/../"),
                2 => out.push('/'),
                _ => {}
            }
            for b in segment.bytes() {
                match next() % 3 {
                    0 => out.push_str(&format!("%{b:02X}")),
                    1 => out.push_str(&format!("%{b:02x}")),
                    _ => out.push(char::from(b)),
                }
            }
        }
        if out.is_empty() {
            out.push('/');
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn normalising_twice_is_normalising_once(raw in raw_path()) {
            for slashes in ALL {
                if let Ok(once) = canonical_path(&raw, with(slashes)) {
                    prop_assert_eq!(canonical_path(&once, with(slashes)), Ok(once.clone()));
                    for ci in [false, true] {
                        for ts in [false, true] {
                            let o = PathMatchOptions { case_insensitive: ci, trailing_slash: ts };
                            let m = match_form(&once, o).into_owned();
                            prop_assert_eq!(match_form(&m, o), m.clone());
                        }
                    }
                }
            }
        }

        /// The shortcut for paths already canonical agrees with the full reading.
        #[test]
        fn paths_taken_as_canonical_are(raw in raw_path()) {
            if is_canonical(&raw) {
                for slashes in ALL {
                    prop_assert_eq!(canonical_path(&raw, with(slashes)), Ok(raw.clone()));
                }
            }
        }

        #[test]
        fn canonical_paths_have_one_spelling(raw in raw_path()) {
            for slashes in ALL {
                if let Ok(path) = canonical_path(&raw, with(slashes)) {
                    prop_assert!(path.starts_with('/'));
                    prop_assert!(path.parse::<axum::http::uri::PathAndQuery>().is_ok(), "{}", path);
                    prop_assert!(!path.contains("//") || path == "//", "{}", path);
                    for dots in ["/./", "/../"] {
                        prop_assert!(!path.contains(dots), "{}", path);
                    }
                    prop_assert!(!path.ends_with("/.") && !path.ends_with("/.."), "{}", path);
                    let bytes = path.as_bytes();
                    for (i, b) in bytes.iter().enumerate() {
                        prop_assert!(b.is_ascii_graphic(), "{}", path);
                        if *b == b'%' {
                            let h = &path[i + 1..i + 3];
                            prop_assert_eq!(h.to_ascii_uppercase(), h);
                            let v = u8::from_str_radix(h, 16).unwrap();
                            prop_assert!(!unreserved(v), "{}", path);
                        }
                    }
                }
            }
        }

        #[test]
        fn every_spelling_of_a_path_reads_as_it(
            segments in plain_path(),
            choices in proptest::collection::vec(any::<u8>(), 64),
        ) {
            let plain = format!("/{}", segments.join("/"));
            let want = canon(&plain).unwrap();
            let spelled = respell(&segments, &choices);
            prop_assert_eq!(canon(&spelled), Ok(want.clone()), "{}", spelled);
            // One rule: a different canonical path never has the same match form
            // unless it differs only by what the form strips.
            let rule = match_form(&want, PathMatchOptions::default()).into_owned();
            let read = canon(&spelled).unwrap();
            prop_assert_eq!(match_form(&read, PathMatchOptions::default()), rule);
        }
    }
}
