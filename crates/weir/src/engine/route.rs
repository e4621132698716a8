//! Which requests a rule applies to: methods, host, and a path that is exact, a
//! prefix, or a pattern with `{name}` segments (`/books/{id}`).

use axum::http::Method;

/// A path to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
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
pub enum Segment {
    /// This text.
    Literal(String),
    /// Any one non-empty segment.
    Param,
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// Methods matched (empty: any).
    pub methods: Vec<Method>,
    /// Host matched, without port, lowercase (`None`: any).
    pub host: Option<String>,
    /// Path matched.
    pub path: PathMatch,
}

impl PathMatch {
    /// Reads `path` (exact, or a pattern when it has `{...}` segments).
    pub fn parse(path: &str) -> Result<Self, String> {
        if !path.starts_with('/') {
            return Err(format!("path `{path}` must start with `/`"));
        }
        if !path.contains('{') && !path.contains('}') {
            return Ok(PathMatch::Exact(path.to_owned()));
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
                    Ok(Segment::Literal(segment.to_owned()))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(PathMatch::Pattern(segments))
    }

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

impl RouteMatch {
    /// Whether a request with this method, `Host` and path is matched.
    pub fn matches(&self, method: &Method, host: Option<&str>, path: &str) -> bool {
        (self.methods.is_empty()
            || self.methods.contains(method)
            // Servers answer HEAD with their GET handler: it is limited as a GET.
            || (method == Method::HEAD && self.methods.contains(&Method::GET)))
            && self.host.as_deref().is_none_or(|want| {
                host.map(|h| h.rsplit_once(':').map_or(h, |(name, _)| name))
                    .is_some_and(|h| h.eq_ignore_ascii_case(want))
            })
            && self.path.matches(path)
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
        }
    }

    #[test]
    fn paths_match_exactly_by_prefix_or_by_pattern() {
        let exact = route(PathMatch::parse("/login").unwrap());
        assert!(exact.matches(&Method::POST, None, "/login"));
        assert!(!exact.matches(&Method::POST, None, "/login/x"));
        let prefix = route(PathMatch::Prefix("/api/".into()));
        assert!(prefix.matches(&Method::GET, None, "/api/books"));
        assert!(!prefix.matches(&Method::GET, None, "/apix"));
        let pattern = route(PathMatch::parse("/books/{id}/export").unwrap());
        assert!(pattern.matches(&Method::GET, None, "/books/42/export"));
        assert!(!pattern.matches(&Method::GET, None, "/books//export"));
        assert!(!pattern.matches(&Method::GET, None, "/books/42"));
        assert!(!pattern.matches(&Method::GET, None, "/books/42/export/more"));
    }

    #[test]
    fn methods_and_hosts_narrow_a_match() {
        let r = RouteMatch {
            methods: vec![Method::POST],
            host: Some("api.example.com".into()),
            path: PathMatch::Any,
        };
        assert!(r.matches(&Method::POST, Some("API.example.com:8080"), "/"));
        assert!(!r.matches(&Method::GET, Some("api.example.com"), "/"));
        let get = RouteMatch {
            methods: vec![Method::GET],
            ..r.clone()
        };
        assert!(get.matches(&Method::HEAD, Some("api.example.com"), "/"));
        assert!(!get.matches(&Method::POST, Some("api.example.com"), "/"));
        assert!(!r.matches(&Method::POST, Some("other.example.com"), "/"));
        assert!(!r.matches(&Method::POST, None, "/"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(PathMatch::parse("books").is_err());
        assert!(PathMatch::parse("/books/x{id}").is_err());
        assert!(PathMatch::parse("/books/{}").is_err());
    }
}
