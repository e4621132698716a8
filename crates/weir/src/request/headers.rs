//! The method and the headers that change how an app routes a request: read one way,
//! or refused.
//!
//! - A method in lower or mixed case (`post`) is the upper-case method: WSGI servers
//!   (Werkzeug, Django) upper-case it before routing, so weir matches and forwards it
//!   upper-cased.
//! - `X-HTTP-Method-Override`, `X-HTTP-Method` and `X-Method-Override` make some
//!   frameworks route a request under another method; one that names a method other
//!   than the request's is refused.
//! - `X-Original-URL` and `X-Rewrite-URL` make some frameworks (IIS, Symfony) route a
//!   request under another path: refused.
//! - Each of these is read with `_` as `-` too (`X_HTTP_Method_Override`): CGI and WSGI
//!   servers give apps both spellings under one name.
//! - `Connection` may name hop-by-hop headers for a proxy to remove; naming a header
//!   that carries the request's meaning (`Host`, `Content-Type`, an API key...) would
//!   make weir forward something other than what it decided on: refused.
//! - A value that begins or ends with a space or a tab is refused. HTTP/1.1's parser
//!   strips that whitespace, but an HTTP/2 field (or a `/v1/decide` header) keeps it, and
//!   RFC 9113 calls such a request malformed: read as sent, ` k` would be a key apart
//!   from `k`, while the app, behind an HTTP/1.1 hop that strips it, reads `k`.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};

/// Headers that make some frameworks route under another method.
const METHOD_OVERRIDES: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Headers that make some frameworks route under another path.
const PATH_OVERRIDES: [&str; 2] = ["x-original-url", "x-rewrite-url"];

/// Headers a `Connection` header may name: the hop-by-hop ones.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The method as apps route it: upper-case (`post` is `POST`).
pub(crate) fn canonical_method(method: &Method) -> Method {
    let name = method.as_str();
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        return method.clone();
    }
    // Upper-casing keeps a valid token valid.
    Method::from_bytes(name.to_ascii_uppercase().as_bytes()).unwrap_or_else(|_| method.clone())
}

/// Refuses headers that would make the app route the request differently from how
/// weir read it (see the [module docs](self)).
pub(crate) fn check_routing_headers(headers: &HeaderMap, method: &Method) -> Result<(), String> {
    // One pass over the names: this runs for every request.
    for (name, value) in headers {
        if let (Some(first), Some(last)) = (value.as_bytes().first(), value.as_bytes().last())
            && [first, last].iter().any(|b| matches!(b, b' ' | b'\t'))
        {
            return Err(format!(
                "`{name}` begins or ends with whitespace, which could be read two ways; send it without"
            ));
        }
        // `X_HTTP_Method_Override` reaches CGI and WSGI apps as the dashed name does.
        let dashed;
        let named = if name.as_str().contains('_') {
            dashed = name.as_str().replace('_', "-");
            dashed.as_str()
        } else {
            name.as_str()
        };
        if METHOD_OVERRIDES.contains(&named) {
            let same = value
                .to_str()
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case(method.as_str()));
            if !same {
                return Err(format!(
                    "`{named}` names another method than the request's; send the request with that method"
                ));
            }
        } else if PATH_OVERRIDES.contains(&named) {
            return Err(format!(
                "`{named}` is not accepted: send the request to that path"
            ));
        } else if name == header::CONNECTION {
            let tokens = value.to_str().unwrap_or_default().split(',');
            for token in tokens.map(str::trim).filter(|t| !t.is_empty()) {
                let token = token.to_ascii_lowercase();
                if token != "close"
                    && !HOP_BY_HOP.contains(&token.as_str())
                    && headers.contains_key(token.as_str())
                {
                    return Err(format!(
                        "`Connection` names `{token}`, which this request needs end to end"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The one value of the header `name` (`None`: not sent). A header sent on more than
/// one line, or also under its underscored spelling (`X_Api_Key` reaches CGI and WSGI
/// apps as `X-Api-Key` does), could be read as either value: refused, with why.
pub(crate) fn one_header<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'h HeaderValue>, String> {
    let spelled = |n: &HeaderName| n != name && n.as_str().replace('_', "-") == name.as_str();
    if headers.keys().any(spelled) {
        return Err(format!(
            "`{name}` is also sent with underscores; send it once"
        ));
    }
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(format!("`{name}` is sent more than once; send it once"));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_value_with_whitespace_at_an_edge_is_refused() {
        for padded in [" k", "k ", "\tk", "k\t", " "] {
            let sent = headers(&[("x-api-key", padded)]);
            let refused = check_routing_headers(&sent, &Method::GET).unwrap_err();
            assert!(
                refused.contains("`x-api-key` begins or ends with whitespace"),
                "{refused}"
            );
        }
        // Inside a value, whitespace is the value's own.
        assert!(check_routing_headers(&headers(&[("user-agent", "a b\tc")]), &Method::GET).is_ok());
        assert!(check_routing_headers(&headers(&[("x-empty", "")]), &Method::GET).is_ok());
    }

    #[test]
    fn methods_are_read_upper_case() {
        let post = Method::from_bytes(b"post").unwrap();
        assert_eq!(canonical_method(&post), Method::POST);
        assert_eq!(
            canonical_method(&Method::from_bytes(b"PoSt").unwrap()),
            Method::POST
        );
        assert_eq!(canonical_method(&Method::GET), Method::GET);
        let custom = Method::from_bytes(b"purge").unwrap();
        assert_eq!(canonical_method(&custom).as_str(), "PURGE");
    }

    #[test]
    fn headers_that_reroute_a_request_are_refused() {
        let post = Method::POST;
        assert!(
            check_routing_headers(&headers(&[("x-http-method-override", "GET")]), &post).is_err()
        );
        assert!(check_routing_headers(&headers(&[("x-method-override", "post")]), &post).is_ok());
        assert!(check_routing_headers(&headers(&[("x-original-url", "/login")]), &post).is_err());
        assert!(check_routing_headers(&headers(&[("x-rewrite-url", "/login")]), &post).is_err());
        // Underscore spellings are the same headers to CGI and WSGI apps.
        let underscored = headers(&[("x_http_method_override", "GET")]);
        assert!(check_routing_headers(&underscored, &post).is_err());
        assert!(check_routing_headers(&headers(&[("x_original_url", "/login")]), &post).is_err());
        assert!(check_routing_headers(&headers(&[("x_method_override", "POST")]), &post).is_ok());
        let named = headers(&[("connection", "keep-alive, Host"), ("host", "a")]);
        assert!(check_routing_headers(&named, &post).is_err());
        let content = headers(&[
            ("connection", "content-type"),
            ("content-type", "application/json"),
        ]);
        assert!(check_routing_headers(&content, &post).is_err());
        let fine = headers(&[
            ("connection", "close, TE"),
            ("te", "trailers"),
            ("x-absent", "1"),
        ]);
        assert!(check_routing_headers(&fine, &post).is_ok());
        let absent = headers(&[("connection", "x-debug")]);
        assert!(
            check_routing_headers(&absent, &post).is_ok(),
            "names nothing present"
        );
    }
}
