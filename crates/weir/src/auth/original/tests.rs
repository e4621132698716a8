#![allow(clippy::unwrap_used, reason = "test code")]

use axum::response::IntoResponse;

use super::*;

fn ask(path: &str, headers: &[(&'static str, &'static str)]) -> Request<Body> {
    let mut request = Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::empty()).unwrap()
}

fn config(convention: Convention) -> AuthConfig {
    AuthConfig {
        convention,
        ..AuthConfig::default()
    }
}

/// The rebuilt request as `METHOD target host`, or the problem's detail.
fn rebuilt(convention: Convention, path: &str, headers: &[(&'static str, &'static str)]) -> String {
    match rebuild(&config(convention), ask(path, headers)) {
        Ok(request) => {
            let host = request
                .headers()
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned());
            for gone in [
                "x-forwarded-uri",
                "x-forwarded-method",
                "x-original-url",
                "x-original-uri",
            ] {
                assert!(!request.headers().contains_key(gone), "{gone} is left");
            }
            format!(
                "{} {} {}",
                request.method(),
                request.uri(),
                host.unwrap_or_default()
            )
        }
        Err(problem) => {
            let response = problem.into_response();
            format!("{}", response.status().as_u16())
        }
    }
}

const FORWARDED: [(&str, &str); 5] = [
    ("x-forwarded-method", "POST"),
    ("x-forwarded-proto", "https"),
    ("x-forwarded-host", "api.example:8443"),
    ("x-forwarded-uri", "/books/1?x=2"),
    ("x-forwarded-for", "192.0.2.1"),
];

#[test]
fn the_forwarded_convention_reads_the_five_headers_and_nothing_else() {
    assert_eq!(
        rebuilt(Convention::Forwarded, "/v1/auth", &FORWARDED),
        "POST /books/1?x=2 api.example:8443"
    );
    assert_eq!(
        rebuilt(Convention::Forwarded, "/v1/other", &FORWARDED),
        "404"
    );
    // Each one missing, then each one twice: refused, never guessed.
    for (leave, (name, value)) in FORWARDED.iter().enumerate() {
        let fewer: Vec<_> = FORWARDED
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leave)
            .map(|(_, h)| *h)
            .collect();
        assert_eq!(
            rebuilt(Convention::Forwarded, "/v1/auth", &fewer),
            "400",
            "without {name}"
        );
        let mut twice = FORWARDED.to_vec();
        twice.push((name, value));
        assert_eq!(
            rebuilt(Convention::Forwarded, "/v1/auth", &twice),
            "400",
            "twice {name}"
        );
    }
    let mut gopher = FORWARDED.to_vec();
    gopher[1] = ("x-forwarded-proto", "gopher");
    assert_eq!(rebuilt(Convention::Forwarded, "/v1/auth", &gopher), "400");
    let mut absolute = FORWARDED.to_vec();
    absolute[3] = ("x-forwarded-uri", "http://victim.example/books");
    assert_eq!(rebuilt(Convention::Forwarded, "/v1/auth", &absolute), "400");
}

#[test]
fn the_original_convention_takes_a_uri_or_an_absolute_url_never_both() {
    let uri = [
        ("x-original-method", "GET"),
        ("x-original-uri", "/books?page=2"),
        ("host", "api.example"),
        ("x-forwarded-for", "192.0.2.1"),
    ];
    assert_eq!(
        rebuilt(Convention::Original, "/v1/auth", &uri),
        "GET /books?page=2 api.example"
    );
    let url = [
        ("x-original-method", "DELETE"),
        ("x-original-url", "https://API.example:8443/books/7"),
        ("host", "weir-auth.internal"),
        ("x-forwarded-for", "192.0.2.1"),
    ];
    assert_eq!(
        rebuilt(Convention::Original, "/v1/auth", &url),
        "DELETE /books/7 API.example:8443"
    );
    let mut both = uri.to_vec();
    both.push(("x-original-url", "http://api.example/admin"));
    assert_eq!(rebuilt(Convention::Original, "/v1/auth", &both), "400");
    assert_eq!(
        rebuilt(Convention::Original, "/v1/auth", &uri[1..]),
        "400",
        "no method"
    );
    assert_eq!(
        rebuilt(Convention::Original, "/v1/auth", &[uri[0], uri[2], uri[3]]),
        "400",
        "no target"
    );
    for bad in [
        "/relative",
        "ftp://api.example/x",
        "http://user@api.example/x",
    ] {
        let mut with = url.to_vec();
        with[1] = ("x-original-url", bad);
        assert_eq!(
            rebuilt(Convention::Original, "/v1/auth", &with),
            "400",
            "{bad}"
        );
    }
}

#[test]
fn the_envoy_convention_takes_the_path_after_the_prefix() {
    let headers = [("host", "api.example"), ("x-forwarded-for", "192.0.2.1")];
    assert_eq!(
        rebuilt(Convention::Envoy, "/v1/auth/books/1?x=2", &headers),
        "GET /books/1?x=2 api.example"
    );
    assert_eq!(
        rebuilt(Convention::Envoy, "/v1/auth//books/./", &headers),
        "GET //books/./ api.example"
    );
    assert_eq!(rebuilt(Convention::Envoy, "/v1/auth", &headers), "400");
    assert_eq!(rebuilt(Convention::Envoy, "/v1/authors", &headers), "404");
    assert_eq!(rebuilt(Convention::Envoy, "/books", &headers), "404");
    assert_eq!(
        rebuilt(Convention::Envoy, "/v1/auth/books", &headers[..1]),
        "400",
        "no X-Forwarded-For"
    );
}

/// Envoy joins a header sent on several lines: a key header holding a `,` is refused,
/// never read as one new key; other headers, and keys without one, pass.
#[test]
fn a_key_envoy_joined_from_several_lines_is_refused() {
    let names = [HeaderName::from_static("x-api-key")];
    let request = ask("/", &[("x-api-key", "mine,r1"), ("accept", "a, b")]);
    let refused = joined(request.headers(), &names).unwrap();
    let body = format!("{:?}", refused.into_response());
    assert!(body.contains("400"), "{body}");
    let request = ask("/", &[("x-api-key", "mine"), ("accept", "a, b")]);
    assert!(joined(request.headers(), &names).is_none());
}
