//! The original request, rebuilt from the headers the proxy sends by its convention:
//! its method, target and host, and the client's headers. Each header the convention
//! needs must be there exactly once: a missing or repeated one is a 400 naming it,
//! never a guess (a second line may be a client's, copied by the proxy).
//!
//! - `forwarded` (Traefik, Caddy): `X-Forwarded-Method`, `-Proto`, `-Host`, `-Uri`.
//! - `original` (nginx, ingress-nginx): `X-Original-Method`, and either
//!   `X-Original-URI` (the target; the host from `Host`) or `X-Original-URL` (an
//!   absolute URL: its host and target), not both.
//! - `envoy` (ext_authz): the request's own method and headers, its target after the
//!   door's `path_prefix`.
//!
//! Every convention needs `X-Forwarded-For`: the client's address is read from it
//! (right to left past the trusted proxies, as the gateway reads it). Without it the
//! client would be the proxy itself, and every client one budget.
//!
//! The convention's own headers are taken out of the rebuilt request; the rest (keys,
//! tokens, what a rule reads) are the client's, as the proxy copied them.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, header};

use crate::config::{AUTH_PATH, AuthConfig, Convention};
use crate::edge::Problem;

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
static X_ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
static X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
static X_ORIGINAL_URL: HeaderName = HeaderName::from_static("x-original-url");

/// The request the proxy asks about, from the door's `request`.
pub(super) fn rebuild(
    config: &AuthConfig,
    request: Request<Body>,
) -> Result<Request<Body>, Problem> {
    let (parts, _) = request.into_parts();
    let mut headers = parts.headers;
    let (method, target) = match config.convention {
        Convention::Forwarded => {
            at_door(&parts.uri)?;
            forwarded(&mut headers)?
        }
        Convention::Original => {
            at_door(&parts.uri)?;
            original(&mut headers)?
        }
        Convention::Envoy => (parts.method, after_prefix(&parts.uri, &config.path_prefix)?),
    };
    one(&headers, &X_FORWARDED_FOR)?;
    let uri = Uri::try_from(target.as_str())
        .ok()
        .filter(|uri| uri.scheme().is_none() && (uri.path().starts_with('/') || uri == "*"))
        .ok_or_else(|| {
            Problem::invalid_request("the original target is not a path (origin form) or `*`")
        })?;
    let mut original = Request::new(Body::empty());
    *original.method_mut() = method;
    *original.uri_mut() = uri;
    *original.headers_mut() = headers;
    Ok(original)
}

/// The door's own path, for the conventions that call it there.
fn at_door(uri: &Uri) -> Result<(), Problem> {
    if uri.path() == AUTH_PATH {
        Ok(())
    } else {
        Err(Problem::not_found(uri.path()))
    }
}

/// `X-Forwarded-Method`, `-Proto`, `-Host` and `-Uri`, taken out of `headers`; the
/// host put in `Host`.
fn forwarded(headers: &mut HeaderMap) -> Result<(Method, String), Problem> {
    let method = method(one(headers, &X_FORWARDED_METHOD)?, &X_FORWARDED_METHOD)?;
    let proto = one(headers, &X_FORWARDED_PROTO)?;
    if !(proto.eq_ignore_ascii_case("http") || proto.eq_ignore_ascii_case("https")) {
        return Err(Problem::invalid_request(
            "`x-forwarded-proto` must be `http` or `https`",
        ));
    }
    let host = header_value(one(headers, &X_FORWARDED_HOST)?, &X_FORWARDED_HOST)?;
    let target = one(headers, &X_FORWARDED_URI)?.to_owned();
    for name in [
        &X_FORWARDED_METHOD,
        &X_FORWARDED_PROTO,
        &X_FORWARDED_HOST,
        &X_FORWARDED_URI,
    ] {
        headers.remove(name);
    }
    headers.insert(header::HOST, host);
    Ok((method, target))
}

/// `X-Original-Method` and `X-Original-URI` (host from `Host`) or `X-Original-URL`
/// (its host put in `Host`), taken out of `headers`.
fn original(headers: &mut HeaderMap) -> Result<(Method, String), Problem> {
    let method = method(one(headers, &X_ORIGINAL_METHOD)?, &X_ORIGINAL_METHOD)?;
    let uri = headers.contains_key(&X_ORIGINAL_URI);
    let url = headers.contains_key(&X_ORIGINAL_URL);
    let target = match (uri, url) {
        (true, true) => {
            return Err(Problem::invalid_request(
                "both `x-original-uri` and `x-original-url` were sent: one of them is not the proxy's",
            ));
        }
        (false, false) => {
            return Err(Problem::invalid_request(
                "`x-original-uri` or `x-original-url` is missing: the proxy must send the original target",
            ));
        }
        (true, false) => one(headers, &X_ORIGINAL_URI)?.to_owned(),
        (false, true) => {
            let url = one(headers, &X_ORIGINAL_URL)?;
            let (host, target) = absolute(url)?;
            headers.insert(header::HOST, host);
            target
        }
    };
    for name in [&X_ORIGINAL_METHOD, &X_ORIGINAL_URI, &X_ORIGINAL_URL] {
        headers.remove(name);
    }
    Ok((method, target))
}

/// The host (with its port) and the target of an absolute `http` or `https` URL.
fn absolute(url: &str) -> Result<(HeaderValue, String), Problem> {
    let bad = || {
        Problem::invalid_request(
            "`x-original-url` must be an absolute http or https URL, with a host and no user name",
        )
    };
    let uri = Uri::try_from(url).map_err(|_| bad())?;
    let http = uri
        .scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"));
    let authority = uri
        .authority()
        .filter(|a| http && !a.as_str().contains('@'));
    let authority = authority.ok_or_else(bad)?;
    let host = HeaderValue::try_from(authority.as_str()).map_err(|_| bad())?;
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let target = if target.is_empty() { "/" } else { target };
    Ok((host, target.to_owned()))
}

/// The target after `prefix` in the door's `uri` (Envoy's `path_prefix` followed by
/// the original path and query).
fn after_prefix(uri: &Uri, prefix: &str) -> Result<String, Problem> {
    let Some(rest) = uri.path().strip_prefix(prefix) else {
        return Err(Problem::not_found(uri.path()));
    };
    if rest.is_empty() {
        return Err(Problem::invalid_request(format!(
            "no original path follows `{prefix}`: ext_authz sends the path prefix then the request's path"
        )));
    }
    if !rest.starts_with('/') {
        return Err(Problem::not_found(uri.path()));
    }
    Ok(match uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    })
}

/// The one line of `name`: missing, repeated or unreadable is a 400 naming it.
fn one<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Result<&'h str, Problem> {
    let mut lines = headers.get_all(name).iter();
    let (Some(value), None) = (lines.next(), lines.next()) else {
        let problem = if headers.contains_key(name) {
            format!("`{name}` was sent more than once: which one the proxy wrote cannot be told")
        } else {
            format!(
                "`{name}` is missing: the proxy must send it (see the README for its configuration)"
            )
        };
        return Err(Problem::invalid_request(problem));
    };
    value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Problem::invalid_request(format!("`{name}` is empty or not readable")))
}

fn method(value: &str, name: &HeaderName) -> Result<Method, Problem> {
    Method::from_bytes(value.as_bytes())
        .map_err(|_| Problem::invalid_request(format!("`{name}` is not an HTTP method")))
}

fn header_value(value: &str, name: &HeaderName) -> Result<HeaderValue, Problem> {
    HeaderValue::try_from(value)
        .map_err(|_| Problem::invalid_request(format!("`{name}` is not a header value")))
}

/// Envoy's ext_authz HTTP service sends a header the client sent on several lines as
/// one line, the values joined with `,`: a key sent twice (`X-Api-Key: mine` and
/// `X-Api-Key: r1`) would arrive as the one key `mine,r1`, a new key each time, where
/// the gateway refuses a key sent twice. A header of `names` (those callers are
/// identified by) holding a `,` is refused the same way; no API key, JWT or plan name
/// weir reads holds one.
pub(super) fn joined(headers: &HeaderMap, names: &[HeaderName]) -> Option<Problem> {
    let name = names.iter().find(|name| {
        headers
            .get_all(*name)
            .iter()
            .any(|value| value.as_bytes().contains(&b','))
    })?;
    Some(Problem::invalid_request(format!(
        "`{name}` holds a `,`: Envoy joins a header sent more than once into one, so it \
         cannot be read as one value"
    )))
}

#[cfg(test)]
mod tests;
