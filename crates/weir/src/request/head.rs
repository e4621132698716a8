//! The one reading of a request's head (method, target, host) that every door
//! receiving HTTP shares: the gateway reads it from the request it proxies,
//! `/v1/decide` from the facts a service reports, the tower layer from the request its
//! service receives. Each check is made in the same order at every door, so one request
//! gets the same answer whichever door it meets.

use std::borrow::Cow;
use std::net::IpAddr;

use axum::http::{HeaderMap, Method, Uri};

use super::{
    Facts, PathOptions, Refused, canonical_host, canonical_method, canonical_path_and_query,
    check_routing_headers,
};

/// A request's method, host and target, each read one way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head<'a> {
    /// The method, upper case.
    pub method: Method,
    /// The host it was sent to, without port, lower case (`None`: it names none).
    pub host: Option<String>,
    /// The canonical path and query (borrowed when the target was canonical already).
    target: Cow<'a, str>,
}

impl<'a> Head<'a> {
    /// The canonical path, without the query (`/` for a target without one, such as
    /// an authority-form `CONNECT`).
    pub(crate) fn path(&self) -> &str {
        let path = self
            .target
            .split_once('?')
            .map_or(&*self.target, |(path, _)| path);
        if path.is_empty() { "/" } else { path }
    }

    /// The query as sent (`None`: the target has no `?`).
    pub(crate) fn query(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, query)| query)
    }

    /// The canonical target, when it is spelled otherwise than what was sent: what a
    /// proxy forwards instead, so that the app reads what weir decided on.
    pub(crate) fn respelled(&self) -> Option<&str> {
        match &self.target {
            Cow::Owned(target) => Some(target),
            Cow::Borrowed(_) => None,
        }
    }

    /// The facts the engine decides on: this head with the request's headers, where it
    /// came from, and its body when a rule that applies keys on a body field.
    pub(crate) fn facts<'f>(
        &'f self,
        headers: &'f HeaderMap,
        client_ip: IpAddr,
        trusted_peer: bool,
        body: Option<&'f [u8]>,
    ) -> Facts<'f> {
        Facts {
            method: &self.method,
            path: self.path(),
            query: self.query(),
            host: self.host.as_deref(),
            headers,
            client_ip,
            trusted_peer,
            body,
        }
    }
}

/// Reads a request's head: its host (from an absolute-form `uri`, else the one `Host`
/// line of `headers`), its method, the headers that would change how the app routes it,
/// and its `target` (path and query) in canonical form. The first that cannot be read
/// one way refuses the request (400).
pub(crate) fn read_head<'a>(
    method: &Method,
    uri: &Uri,
    target: &'a str,
    headers: &HeaderMap,
    paths: PathOptions,
) -> Result<Head<'a>, Refused> {
    let host = canonical_host(headers, uri).map_err(|e| Refused::bad_request(e.to_string()))?;
    let method = canonical_method(method);
    // The asterisk form names the server, not a resource: only `OPTIONS *` means
    // something (RFC 9112); another method on it would go on under no rule.
    if target == "*" && method != Method::OPTIONS {
        return Err(Refused::bad_request(
            "the target `*` is for OPTIONS only; send the request to a path",
        ));
    }
    check_routing_headers(headers, &method).map_err(Refused::bad_request)?;
    let target =
        canonical_path_and_query(target, paths).map_err(|e| Refused::bad_request(e.to_string()))?;
    Ok(Head {
        method,
        host,
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: &str, target: &str) -> Result<String, Refused> {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("host", "api.example".parse().unwrap());
        read_head(
            &method,
            &Uri::default(),
            target,
            &headers,
            PathOptions::default(),
        )
        .map(|head| format!("{} {}", head.method, head.path()))
    }

    #[test]
    fn the_asterisk_form_is_for_options_only() {
        assert_eq!(head("OPTIONS", "*").unwrap(), "OPTIONS *");
        for method in ["GET", "post", "DELETE"] {
            let refused = head(method, "*").unwrap_err();
            assert_eq!(refused.status(), 400, "{method}");
        }
        assert_eq!(head("get", "/a/../books").unwrap(), "GET /books");
    }
}
