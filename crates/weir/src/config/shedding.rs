//! The `shedding` section: which routes the gateway sheds first when its upstream is
//! overloaded (`weir_core::Shedder` decides), and the bounds of its adaptive limit.
//!
//! ```yaml
//! shedding:
//!   routes:                      # first match wins; other requests are `default`
//!     - { path_prefix: /checkout, priority: critical }
//!     - { path_prefix: /analytics, priority: sheddable }
//!   min_limit: 4                 # requests in flight to the upstream, at least
//!   max_limit: 1000              # ... at most
//!   initial_limit: 20            # where the limit starts
//! ```

use axum::http::Method;
use weir_core::{Priority, ShedConfig};

use super::error::{ConfigError, Errors};
use super::file::RawShedding;
use crate::engine::{PathMatch, RouteMatch};
use crate::request::PathMatchOptions;

/// The most requests in flight a limit may name.
const MAX_LIMIT: u32 = 1_000_000;

/// Load shedding by route priority.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SheddingConfig {
    /// Path prefixes (as written) and their priorities, first match wins.
    pub routes: Vec<(String, Priority)>,
    /// Each route's prefix as rules match paths (`;params` stripped, case ignored): a
    /// path spelt another way is the same route, as it is the same rule.
    matchers: Vec<RouteMatch>,
    /// The adaptive limit's bounds.
    pub limits: ShedConfig,
}

impl SheddingConfig {
    #[cfg(test)]
    /// The priority of a request for `path` (the canonical path, as forwarded).
    pub(crate) fn priority(&self, path: &str) -> Priority {
        self.route(path)
            .map_or(Priority::Default, |(_, priority)| priority)
    }

    /// The route (its path prefix) and priority of a request for `path`; `None` for a
    /// request no route names (`default`).
    pub(crate) fn route(&self, path: &str) -> Option<(&str, Priority)> {
        self.routes
            .iter()
            .zip(&self.matchers)
            .find(|(_, matcher)| matcher.matches(&Method::GET, None, path))
            .map(|((prefix, priority), _)| (prefix.as_str(), *priority))
    }
}

/// The section, checked.
pub(super) fn shedding(
    raw: &serde_saphyr::Spanned<RawShedding>,
    errors: &Errors<'_>,
) -> Result<SheddingConfig, ConfigError> {
    let section = &raw.value;
    let routes = section
        .routes
        .iter()
        .enumerate()
        .map(|(i, route)| {
            let prefix = &route.path_prefix;
            if !prefix.value.starts_with('/') {
                return Err(errors.at(
                    prefix.referenced,
                    format!("shedding.routes[{i}].path_prefix"),
                    "a path prefix starts with /",
                ));
            }
            // Read as a rule's `path_prefix` with the rules' defaults.
            let options = PathMatchOptions {
                case_insensitive: true,
                trailing_slash: true,
            };
            let path = PathMatch::prefix(&prefix.value, options).map_err(|message| {
                errors.at(
                    prefix.referenced,
                    format!("shedding.routes[{i}].path_prefix"),
                    message,
                )
            })?;
            let matcher = RouteMatch {
                methods: Vec::new(),
                host: None,
                path,
                options,
                values: Vec::new(),
            };
            Ok((
                (prefix.value.clone(), Priority::from(route.priority)),
                matcher,
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (routes, matchers) = routes.into_iter().unzip();
    let defaults = ShedConfig::default();
    let limit = |field: &Option<serde_saphyr::Spanned<u32>>, name: &str, default: u32| match field {
        None => Ok(default),
        Some(value) if (1..=MAX_LIMIT).contains(&value.value) => Ok(value.value),
        Some(value) => Err(errors.at(
            value.referenced,
            format!("shedding.{name}"),
            format!("{name} must be a whole number from 1 to {MAX_LIMIT}"),
        )),
    };
    let min_limit = limit(&section.min_limit, "min_limit", defaults.min_limit)?;
    let max_limit = limit(
        &section.max_limit,
        "max_limit",
        defaults.max_limit.max(min_limit),
    )?;
    let initial_limit = limit(
        &section.initial_limit,
        "initial_limit",
        defaults
            .initial_limit
            .clamp(min_limit, max_limit.max(min_limit)),
    )?;
    if !(min_limit <= initial_limit && initial_limit <= max_limit) {
        return Err(errors.at(
            raw.referenced,
            "shedding",
            "the limits must be in order: min_limit <= initial_limit <= max_limit",
        ));
    }
    Ok(SheddingConfig {
        routes,
        matchers,
        limits: ShedConfig {
            min_limit,
            max_limit,
            initial_limit,
            ..defaults
        },
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use weir_core::Priority;

    use crate::config::Config;

    fn parse(shedding: &str) -> Result<Config, String> {
        let yaml = format!(
            "upstream:\n  url: http://127.0.0.1:9000\n{shedding}rules:\n  - name: a\n    algorithm: gcra\n    limit: 1\n    period: 1s\n"
        );
        Config::parse(&yaml, Path::new("weir.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn routes_take_their_priority_first_match_first_and_others_are_default() {
        let config = parse(
            "shedding:\n  routes:\n    - { path_prefix: /api/checkout, priority: critical }\n    - { path_prefix: /api, priority: sheddable }\n  min_limit: 2\n",
        )
        .unwrap();
        let shedding = config.gateway.unwrap().shedding.unwrap();
        assert_eq!(shedding.priority("/api/checkout/1"), Priority::Critical);
        assert_eq!(shedding.priority("/api/stats"), Priority::Sheddable);
        assert_eq!(shedding.priority("/health"), Priority::Default);
        assert_eq!(shedding.limits.min_limit, 2);
        assert_eq!(shedding.limits.initial_limit, 20);
    }

    #[test]
    fn bad_sections_are_refused_with_their_place() {
        for (section, says) in [
            (
                "shedding:\n  routes:\n    - { path_prefix: api, priority: critical }\n",
                "starts with /",
            ),
            (
                "shedding:\n  routes:\n    - { path_prefix: /a, priority: urgent }\n",
                "urgent",
            ),
            ("shedding:\n  min_limit: 0\n", "from 1 to"),
            ("shedding:\n  min_limit: 50\n  max_limit: 10\n", "in order"),
            ("shedding:\n  limit: 5\n", "limit"),
        ] {
            let error = parse(section).unwrap_err();
            assert!(error.contains(says), "{section}: {error}");
        }
        let error = Config::parse(
            "shedding: {}\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 1\n    period: 1s\n",
            Path::new("weir.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("has none"), "{error}");
    }
}
