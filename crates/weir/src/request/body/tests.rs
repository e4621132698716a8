use super::fields::ascii_key_is;
use super::*;
use crate::request::identity_text::normalize_identity;
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
