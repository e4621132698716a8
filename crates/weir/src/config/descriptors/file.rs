//! One envoyproxy/ratelimit file read into the descriptor tree, with that service's
//! refusals (`config_impl.go`): an empty or duplicate domain (with `merge_domains`, a
//! second file of a domain adds to it), an empty or duplicate key, a bad unit, a unit
//! beside `unlimited`, `replaces` naming nothing or itself, `share_threshold` without
//! a wildcard; unknown fields and bad YAML as serde and the YAML reader find them.
//! Each names the file, the line and the field. weir's `x-weir` is read here too.

use std::path::Path;

use serde_saphyr::{Location, Spanned};

use super::raw::{RawDescriptor, RawFile, RawRateLimit};
use crate::config::error::ConfigError;
use crate::config::yaml::read_yaml;

use crate::engine::{DescriptorLimit, Descriptors, NodeId, Unit};

/// Reads `text` (the file at `path`) into `descriptors`: one more domain.
pub(super) fn read(
    on_redis: bool,
    address: &str,
    text: &str,
    path: &Path,
    descriptors: &mut Descriptors,
) -> Result<(), ConfigError> {
    let fail = |location: Option<Location>, field: &str, message: String| {
        let error = ConfigError::new(path, message).field(field);
        match location {
            Some(location) => error.at(location),
            None => error,
        }
    };
    let empty = text
        .lines()
        .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'));
    if empty {
        return Err(at_start(fail(None, "domain", EMPTY_DOMAIN.to_owned())));
    }
    let raw: RawFile = read_yaml(text, path).map_err(in_words)?;
    let Some(domain) = raw.domain.as_ref().filter(|d| !d.value.is_empty()) else {
        let error = match raw.domain.as_ref() {
            Some(domain) => fail(Some(domain.referenced), "domain", EMPTY_DOMAIN.to_owned()),
            // No `domain:` at all: the file's start is where it is missing.
            None => at_start(fail(None, "domain", EMPTY_DOMAIN.to_owned())),
        };
        return Err(error);
    };
    let root = descriptors
        .add_domain(&domain.value)
        .map_err(|e| fail(Some(domain.referenced), "domain", e.to_string()))?;
    let mut reader = Reader {
        path,
        descriptors,
        on_redis,
        address,
    };
    let prefix = format!("{}.", domain.value);
    reader.level(
        root,
        &prefix,
        &[],
        "descriptors",
        raw.descriptors.as_deref().unwrap_or(&[]),
    )
}

const EMPTY_DOMAIN: &str = "config file cannot have empty domain";

/// `error` placed at the file's first line: every error names a line.
fn at_start(mut error: ConfigError) -> ConfigError {
    error.position = Some((1, 1));
    error
}

/// A reading error in this file's words: the field as written (without the
/// `value` of the `Spanned` wrappers), and a key that is not a string named so.
fn in_words(mut error: ConfigError) -> ConfigError {
    if let Some(field) = &error.field {
        let field = field
            .replace("].value.", "].")
            .replace("rate_limit.value.", "rate_limit.")
            .replace("x-weir.value.", "x-weir.")
            .replace("lease.value.", "lease.")
            .replace("on_limited.value.", "on_limited.");
        error.field = Some(field);
    }
    let unknown = error
        .message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    if let Some(name) = unknown {
        let not_a_string =
            name.parse::<f64>().is_ok() || matches!(name, "true" | "false" | "null" | "~");
        if not_a_string {
            error.message = format!("config error, key is not of type string: {name}");
        }
    }
    error
}

/// Reads one file's descriptors into the tree.
pub(super) struct Reader<'a> {
    path: &'a Path,
    descriptors: &'a mut Descriptors,
    /// Whether the store is Redis (whose scripts bound some policies).
    pub(super) on_redis: bool,
    /// The entry key that carries the client's address (`envoy.caller.address`).
    pub(super) address: &'a str,
}

impl Reader<'_> {
    pub(super) fn fail(
        &self,
        location: Location,
        field: String,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::new(self.path, message)
            .at(location)
            .field(field)
    }

    /// The descriptors of one level, under `parent` (`path`: its composite key, as
    /// envoyproxy/ratelimit names it in errors; `keys`: the keys of the entries that
    /// lead to it; `field`: where they are in the file).
    fn level(
        &mut self,
        parent: NodeId,
        path: &str,
        keys: &[&str],
        field: &str,
        list: &[Spanned<RawDescriptor>],
    ) -> Result<(), ConfigError> {
        for (i, item) in list.iter().enumerate() {
            let field = format!("{field}[{i}]");
            let at = item.referenced;
            let raw = &item.value;
            let key = raw.key.as_deref().unwrap_or_default();
            if key.is_empty() {
                return Err(self.fail(at, format!("{field}.key"), "descriptor has empty key"));
            }
            let value = raw.value.as_deref().filter(|v| !v.is_empty());
            let composite = match value {
                Some(value) => format!("{key}_{value}"),
                None => key.to_owned(),
            };
            if raw.share_threshold == Some(true) && !composite.contains('*') {
                return Err(self.fail(
                    at,
                    format!("{field}.share_threshold"),
                    format!(
                        "share_threshold can only be used with wildcard values (containing '*'), but found key '{composite}'"
                    ),
                ));
            }
            let limit = match &raw.rate_limit {
                Some(limit) => Some(self.limit(limit, &format!("{field}.rate_limit"))?),
                None => None,
            };
            let mut keys = keys.to_vec();
            keys.push(key);
            let limit = match (&raw.x_weir, limit) {
                (Some(weir), Some(limit)) => {
                    let descriptor = format!("{path}{composite}");
                    Some(self.weir(weir, limit, &field, &descriptor, &keys)?)
                }
                (Some(weir), None) => {
                    return Err(self.fail(
                        weir.referenced,
                        format!("{field}.x-weir"),
                        "x-weir needs a rate_limit beside it (its requests_per_unit is the limit)",
                    ));
                }
                (None, limit) => limit,
            };
            let limit = limit.map(|limit| DescriptorLimit {
                shadow_mode: raw.shadow_mode.unwrap_or(false),
                quota_mode: raw.quota_mode.unwrap_or(false),
                ..limit
            });
            if let Some(limit) = &limit
                && let (Some(name), Some(on)) = (&limit.name, &limit.on_limited)
            {
                self.descriptors.add_ban(name, on.clone()).map_err(|e| {
                    self.fail(at, format!("{field}.rate_limit.name"), e.to_string())
                })?;
            }
            let node = self
                .descriptors
                .add(parent, path, key, value, limit)
                .map_err(|e| self.fail(at, format!("{field}.key"), e.to_string()))?;
            if raw.share_threshold == Some(true) {
                self.descriptors.share(node, value.unwrap_or_default());
            }
            let children = raw.descriptors.as_deref().unwrap_or(&[]);
            self.level(
                node,
                &format!("{path}{composite}."),
                &keys,
                &format!("{field}.descriptors"),
                children,
            )?;
        }
        Ok(())
    }

    fn limit(
        &self,
        raw: &Spanned<RawRateLimit>,
        field: &str,
    ) -> Result<DescriptorLimit, ConfigError> {
        let limit = &raw.value;
        let unit = limit.unit.as_ref().map(|u| (Unit::from_name(&u.value), u));
        let mut built = if limit.unlimited.unwrap_or(false) {
            if let Some((Some(_), written)) = unit {
                return Err(self.fail(
                    written.referenced,
                    format!("{field}.unit"),
                    "should not specify rate limit unit when unlimited",
                ));
            }
            DescriptorLimit::unlimited()
        } else {
            match unit {
                Some((Some(unit), _)) => {
                    DescriptorLimit::counted(limit.requests_per_unit.unwrap_or(0), unit)
                }
                Some((None, written)) => {
                    return Err(self.fail(
                        written.referenced,
                        format!("{field}.unit"),
                        format!(
                            "invalid rate limit unit '{}': use second, minute, hour, day, week, month or year",
                            written.value
                        ),
                    ));
                }
                None => {
                    return Err(self.fail(
                        raw.referenced,
                        format!("{field}.unit"),
                        "invalid rate limit unit '': use second, minute, hour, day, week, month or year",
                    ));
                }
            }
        };
        built.name = limit.name.clone().filter(|n| !n.is_empty());
        for (i, replaces) in limit.replaces.iter().flatten().enumerate() {
            let name = replaces.value.name.clone().unwrap_or_default();
            let field = format!("{field}.replaces[{i}].name");
            if name.is_empty() {
                return Err(self.fail(
                    replaces.referenced,
                    field,
                    "should not have an empty replaces entry",
                ));
            }
            if Some(&name) == limit.name.as_ref() {
                return Err(self.fail(
                    replaces.referenced,
                    field,
                    "replaces should not contain name of same descriptor",
                ));
            }
            built.replaces.push(name);
        }
        Ok(built)
    }
}
