//! Which requests a rule applies to: methods, host, and a path that is exact, a
//! prefix, or a pattern with `{name}` segments (`/books/{id}`).
//!
//! Both sides are compared in one form: the request's path is canonical (see
//! [`crate::request::path`]) and a rule's path is made canonical when the configuration
//! is loaded; then both are put in [`match_form`] (`;params` stripped, the rule's
//! opt-ins for case and a trailing slash applied). Hosts are compared lowercase, without
//! port or trailing dot.

use axum::http::{HeaderMap, Method};

use super::ValueMatch;
use crate::request::{PathMatchOptions, PathOptions, Refused, canonical_path, match_form};

/// A path to match, in match form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathMatch {
    /// Any path.
    Any,
    /// This path exactly.
    Exact(String),
    /// Paths that start with this.
    Prefix(String),
    /// Paths with as many segments, each equal or matched by a `{name}` segment.
    Pattern(Vec<Segment>),
}

/// One segment of a path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// This text.
    Literal(String),
    /// Any one non-empty segment.
    Param,
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteMatch {
    /// Methods matched (empty: any). `HEAD` is matched by `GET`.
    pub methods: Vec<Method>,
    /// Host matched, lowercase, without port or trailing dot (`None`: any).
    pub host: Option<String>,
    /// Path matched.
    pub path: PathMatch,
    /// The rule's opt-ins: case-insensitive paths, a trailing slash meaning the same.
    pub options: PathMatchOptions,
    /// Conditions on headers, query parameters and cookies, all of which must hold.
    pub values: Vec<ValueMatch>,
}

impl PathMatch {
    /// Reads an exact path, or a pattern when it has `{...}` segments, as rules compare
    /// it with `options`.
    pub(crate) fn exact(path: &str, options: PathMatchOptions) -> Result<Self, String> {
        if !path.starts_with('/') {
            return Err(format!("path `{path}` must start with `/`"));
        }
        if !path.contains('{') && !path.contains('}') {
            return Ok(PathMatch::Exact(rule_form(path, options)?));
        }
        let segments = path[1..]
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') && segment.ends_with('}') && segment.len() > 2 {
                    let name = &segment[1..segment.len() - 1];
                    if name.contains(['{', '}']) {
                        return Err(format!("invalid pattern segment `{segment}` in `{path}`"));
                    }
                    Ok(Segment::Param)
                } else if segment.contains(['{', '}']) {
                    Err(format!("invalid pattern segment `{segment}` in `{path}`: a parameter takes a whole segment, e.g. /books/{{id}}"))
                } else {
                    let literal = rule_form(&format!("/{segment}"), options)?;
                    Ok(Segment::Literal(literal[1..].to_owned()))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(PathMatch::Pattern(segments))
    }

    /// Reads a path prefix (a trailing slash in it is kept: `/api/` never matches
    /// `/apix`).
    pub(crate) fn prefix(prefix: &str, options: PathMatchOptions) -> Result<Self, String> {
        if !prefix.starts_with('/') {
            return Err(format!("path_prefix `{prefix}` must start with `/`"));
        }
        let options = PathMatchOptions {
            trailing_slash: false,
            ..options
        };
        Ok(PathMatch::Prefix(rule_form(prefix, options)?))
    }

    /// Whether `path`, in match form, is matched.
    fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Any => true,
            PathMatch::Exact(exact) => path == exact,
            PathMatch::Prefix(prefix) => path.starts_with(prefix.as_str()),
            PathMatch::Pattern(segments) => {
                let Some(rest) = path.strip_prefix('/') else {
                    return false;
                };
                let mut parts = rest.split('/');
                let all = segments
                    .iter()
                    .all(|segment| match (segment, parts.next()) {
                        (Segment::Literal(literal), Some(part)) => literal == part,
                        (Segment::Param, Some(part)) => !part.is_empty(),
                        (_, None) => false,
                    });
                all && parts.next().is_none()
            }
        }
    }
}

/// A rule's path as it is compared: canonical, then in match form.
fn rule_form(path: &str, options: PathMatchOptions) -> Result<String, String> {
    let canonical =
        canonical_path(path, PathOptions::default()).map_err(|e| format!("path `{path}`: {e}"))?;
    Ok(match_form(&canonical, options).into_owned())
}

/// A rule's host as requests' hosts are compared with it: lowercase, without trailing
/// dot, an IP literal in its canonical form; a port is refused (hosts are compared
/// without their port).
pub(crate) fn rule_host(host: &str) -> Result<String, String> {
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(crate::request::canonical_ip(ip).to_string());
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.split('.').all(label) {
        Ok(name)
    } else {
        Err(format!(
            "host `{}` is not a host name (give it without port or scheme, e.g. api.example.com)",
            host.escape_debug()
        ))
    }
}

impl RouteMatch {
    /// Whether a request with this method, host (canonical) and path (canonical) is
    /// matched.
    pub(crate) fn matches(&self, method: &Method, host: Option<&str>, path: &str) -> bool {
        if !(self.methods.is_empty()
            || self.methods.contains(method)
            // Servers answer HEAD with their GET handler: it is limited as a GET.
            || (method == Method::HEAD && self.methods.contains(&Method::GET)))
        {
            return false;
        }
        if let Some(want) = &self.host
            && host != Some(want.as_str())
        {
            return false;
        }
        match &self.path {
            PathMatch::Any => true,
            PathMatch::Prefix(prefix) => {
                let options = PathMatchOptions {
                    trailing_slash: false,
                    ..self.options
                };
                let form = match_form(path, options);
                // To an app that routes `/api/ai` as `/api/ai/`, a prefix ending in `/`
                // covers the path without it too: else dropping the slash escapes.
                self.path.matches(&form)
                    || (self.options.trailing_slash
                        && prefix.len() > 1
                        && prefix.strip_suffix('/') == Some(form.as_ref()))
            }
            _ => self.path.matches(&match_form(path, self.options)),
        }
    }
}

impl RouteMatch {
    /// Whether a request with these headers and raw query holds every condition on
    /// its values (see [`ValueMatch`]); a refusal when one cannot be read one way.
    /// Asked only of a request whose method, host and path [`RouteMatch::matches`].
    pub(crate) fn values_match(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<bool, Refused> {
        for value in &self.values {
            if !value.matches(headers, query)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: PathMatch) -> RouteMatch {
        RouteMatch {
            methods: vec![],
            host: None,
            path,
            options: PathMatchOptions::default(),
            values: Vec::new(),
        }
    }

    const PLAIN: PathMatchOptions = PathMatchOptions {
        case_insensitive: false,
        trailing_slash: false,
    };

    #[test]
    fn paths_match_exactly_by_prefix_or_by_pattern() {
        let exact = route(PathMatch::exact("/login", PLAIN).unwrap());
        assert!(exact.matches(&Method::POST, None, "/login"));
        assert!(exact.matches(&Method::POST, None, "/login;jsessionid=1"));
        assert!(!exact.matches(&Method::POST, None, "/login/x"));
        assert!(!exact.matches(&Method::POST, None, "/login/"));
        assert!(!exact.matches(&Method::POST, None, "/LOGIN"));
        let prefix = route(PathMatch::prefix("/api/", PLAIN).unwrap());
        assert!(prefix.matches(&Method::GET, None, "/api/books"));
        assert!(!prefix.matches(&Method::GET, None, "/apix"));
        let pattern = route(PathMatch::exact("/books/{id}/export", PLAIN).unwrap());
        assert!(pattern.matches(&Method::GET, None, "/books/42/export"));
        assert!(!pattern.matches(&Method::GET, None, "/books//export"));
        assert!(!pattern.matches(&Method::GET, None, "/books/42"));
        assert!(!pattern.matches(&Method::GET, None, "/books/42/export/more"));
    }

    #[test]
    fn rules_opt_into_case_and_trailing_slashes() {
        let loose = PathMatchOptions {
            case_insensitive: true,
            trailing_slash: true,
        };
        let exact = RouteMatch {
            options: loose,
            ..route(PathMatch::exact("/Login", loose).unwrap())
        };
        for path in ["/login", "/LOGIN", "/login/", "/LoGiN/"] {
            assert!(exact.matches(&Method::POST, None, path), "{path}");
        }
        let pattern = RouteMatch {
            options: loose,
            ..route(PathMatch::exact("/Books/{id}", loose).unwrap())
        };
        assert!(pattern.matches(&Method::GET, None, "/books/7/"));
        let prefix = RouteMatch {
            options: loose,
            ..route(PathMatch::prefix("/API/", loose).unwrap())
        };
        assert!(prefix.matches(&Method::GET, None, "/api/x"));
        assert!(!prefix.matches(&Method::GET, None, "/apix"));
        // The directory itself, without its slash: the same resource to such an app.
        assert!(prefix.matches(&Method::GET, None, "/api"));
        assert!(prefix.matches(&Method::GET, None, "/API"));
        // Rules that keep trailing slashes apart keep the prefix as written.
        let plain = route(PathMatch::prefix("/api/", PLAIN).unwrap());
        assert!(!plain.matches(&Method::GET, None, "/api"));
    }

    #[test]
    fn rule_paths_are_read_canonically() {
        let exact = route(PathMatch::exact("/a/./b/../%6Cogin", PLAIN).unwrap());
        assert_eq!(exact.path, PathMatch::Exact("/a/login".into()));
    }

    #[test]
    fn methods_and_hosts_narrow_a_match() {
        let r = RouteMatch {
            methods: vec![Method::POST],
            host: Some("api.example.com".into()),
            ..route(PathMatch::Any)
        };
        assert!(r.matches(&Method::POST, Some("api.example.com"), "/"));
        assert!(!r.matches(&Method::GET, Some("api.example.com"), "/"));
        assert!(!r.matches(&Method::POST, Some("other.example.com"), "/"));
        assert!(!r.matches(&Method::POST, None, "/"));
        let get = RouteMatch {
            methods: vec![Method::GET],
            ..r.clone()
        };
        assert!(get.matches(&Method::HEAD, Some("api.example.com"), "/"));
        assert!(!get.matches(&Method::POST, Some("api.example.com"), "/"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(PathMatch::exact("books", PLAIN).is_err());
        assert!(PathMatch::exact("/books/x{id}", PLAIN).is_err());
        assert!(PathMatch::exact("/books/{}", PLAIN).is_err());
        assert!(PathMatch::exact("/a%zz", PLAIN).is_err());
    }
}
