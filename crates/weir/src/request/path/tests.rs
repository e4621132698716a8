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
    // The non-ASCII letters Java's case-insensitive comparison folds into ASCII.
    assert_eq!(match_form("/boo%E2%84%AAs", ci), "/books");
    assert_eq!(match_form("/book%C5%BF/1", ci), "/books/1");
    assert_eq!(match_form("/adm%C4%B1n", ci), "/admin");
    assert_eq!(match_form("/%C4%B0ndex", ci), "/index");
    let none_ci = PathMatchOptions {
        case_insensitive: false,
        trailing_slash: false,
    };
    assert_eq!(
        match_form("/boo%E2%84%AAs", none_ci),
        "/boo%E2%84%AAs",
        "exact rules keep it"
    );
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
