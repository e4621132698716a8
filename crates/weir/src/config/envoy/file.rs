//! One envoyproxy/ratelimit file read into the descriptor tree, with that service's
//! refusals (`config_impl.go`): an empty or duplicate domain, an empty or duplicate
//! key, a bad unit, a unit beside `unlimited`, `replaces` naming nothing or itself,
//! `share_threshold` without a wildcard; unknown fields and bad YAML as serde and
//! the YAML reader find them. Each names the file, the line and the field.

use std::path::Path;

use serde_saphyr::{Location, Spanned};

use super::raw::{RawDescriptor, RawFile, RawRateLimit, RawWeir};
use crate::config::error::ConfigError;
use crate::config::yaml::read_yaml;
use weir_core::{Algorithm, Policy, PolicyError};

use crate::engine::{DescriptorLimit, Descriptors, NodeId, Quota, Unit};

/// Reads `text` (the file at `path`) into `descriptors`: one more domain.
pub(super) fn read(
    on_redis: bool,
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
        return Err(fail(None, "domain", EMPTY_DOMAIN.to_owned()));
    }
    let raw: RawFile = read_yaml(text, path).map_err(in_words)?;
    let Some(domain) = raw.domain.as_ref().filter(|d| !d.value.is_empty()) else {
        let at = raw.domain.as_ref().map(|d| d.referenced);
        return Err(fail(at, "domain", EMPTY_DOMAIN.to_owned()));
    };
    let root = descriptors
        .add_domain(&domain.value)
        .map_err(|e| fail(Some(domain.referenced), "domain", e.to_string()))?;
    let mut reader = Reader {
        path,
        descriptors,
        on_redis,
    };
    let prefix = format!("{}.", domain.value);
    reader.level(
        root,
        &prefix,
        "descriptors",
        raw.descriptors.as_deref().unwrap_or(&[]),
    )
}

const EMPTY_DOMAIN: &str = "config file cannot have empty domain";

/// A reading error in this file's words: the field as written (without the
/// `value` of the `Spanned` wrappers), and a key that is not a string named so.
fn in_words(mut error: ConfigError) -> ConfigError {
    if let Some(field) = &error.field {
        let field = field
            .replace("].value.", "].")
            .replace("rate_limit.value.", "rate_limit.")
            .replace("x-weir.value.", "x-weir.");
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

struct Reader<'a> {
    path: &'a Path,
    descriptors: &'a mut Descriptors,
    /// Whether the store is Redis (whose scripts bound some policies).
    on_redis: bool,
}

impl Reader<'_> {
    fn fail(&self, location: Location, field: String, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.path, message)
            .at(location)
            .field(field)
    }

    /// The descriptors of one level, under `parent` (`path`: its composite key, as
    /// envoyproxy/ratelimit names it in errors; `field`: where they are in the file).
    fn level(
        &mut self,
        parent: NodeId,
        path: &str,
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
            if raw.share_threshold == Some(true) {
                return Err(self.fail(
                    at,
                    format!("{field}.share_threshold"),
                    "share_threshold is not implemented by weir: each value matching the wildcard would get a counter of its own, a weaker limit than one counter shared by them all; remove it, or set it to false",
                ));
            }
            if let Some(quota) = raw.quota_mode.as_ref().filter(|q| q.value) {
                return Err(self.fail(
                    quota.referenced,
                    format!("{field}.quota_mode"),
                    "quota_mode is not implemented by weir: remove it, or set it to false",
                ));
            }
            let limit = match &raw.rate_limit {
                Some(limit) => Some(self.limit(limit, &format!("{field}.rate_limit"))?),
                None => None,
            };
            let limit = match (&raw.x_weir, limit) {
                (Some(weir), Some(limit)) => Some(self.weir(weir, limit, &field)?),
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
                ..limit
            });
            let node = self
                .descriptors
                .add(parent, path, key, value, limit)
                .map_err(|e| self.fail(at, format!("{field}.key"), e.to_string()))?;
            let children = raw.descriptors.as_deref().unwrap_or(&[]);
            self.level(
                node,
                &format!("{path}{composite}."),
                &format!("{field}.descriptors"),
                children,
            )?;
        }
        Ok(())
    }

    /// The `rate_limit` decided as its `x-weir` says: the algorithm (`fixed_window` by
    /// default), the period (the unit's by default) and the burst.
    fn weir(
        &self,
        raw: &Spanned<RawWeir>,
        limit: DescriptorLimit,
        field: &str,
    ) -> Result<DescriptorLimit, ConfigError> {
        let weir = &raw.value;
        let field = format!("{field}.x-weir");
        let Quota::Counted(fixed) = limit.quota else {
            return Err(self.fail(
                raw.referenced,
                field,
                "x-weir applies to a counted limit: not to `unlimited` or 0 requests_per_unit",
            ));
        };
        let algorithm = weir
            .algorithm
            .map_or(Algorithm::FixedWindow, Algorithm::from);
        let period = weir.period.as_ref().map_or(fixed.period(), |p| p.value.0);
        let burst = weir.burst.as_ref().map(|b| b.value);
        let policy = Policy::new(algorithm, fixed.limit(), period, burst).map_err(|error| {
            let at = match error {
                PolicyError::PeriodOutOfRange(_) => weir.period.as_ref().map(|p| p.referenced),
                PolicyError::BurstOutOfRange(_) | PolicyError::BurstNotApplicable(_) => {
                    weir.burst.as_ref().map(|b| b.referenced)
                }
                _ => None,
            };
            self.fail(
                at.unwrap_or(raw.referenced),
                field.clone(),
                error.to_string(),
            )
        })?;
        if self.on_redis {
            weir_store::check_redis_policy(&policy)
                .map_err(|e| self.fail(raw.referenced, field.clone(), e.to_string()))?;
        }
        Ok(DescriptorLimit {
            quota: Quota::Counted(policy),
            fail_open: weir
                .failure
                .map(|failure| matches!(failure, super::raw::RawFailure::Open)),
            ..limit
        })
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
