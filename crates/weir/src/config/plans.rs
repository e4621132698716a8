//! The `plans` section: the caller's plan, from a verified claim, a trusted header or a
//! file of keys.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ConfigError;
use super::error::Errors;
use super::file::RawPlans;
use super::identities::header_name;
use crate::engine::{IdentitySource, KeyPlan, PlanSource, Plans, Source};

/// The plans file: `keys:` mapping a key to a plan, or to `{plan, limit}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlansFile {
    keys: BTreeMap<String, PlanEntry>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PlanEntry {
    Plan(String),
    Custom { plan: String, limit: u64 },
}

pub(super) fn plans(
    raw: &Spanned<RawPlans>,
    identities: &HashMap<String, IdentitySource>,
    errors: &Errors<'_>,
) -> Result<Plans, ConfigError> {
    let at = raw.referenced;
    let p = &raw.value;
    let sources = usize::from(p.jwt_claim.is_some())
        + usize::from(p.header.is_some())
        + usize::from(p.file.is_some());
    if sources != 1 {
        return Err(errors.at(
            at,
            "plans",
            "give exactly one of `jwt_claim` (with `identity`), `header`, `file` (with `identity`)",
        ));
    }
    let identity = |what: &str| -> Result<&IdentitySource, ConfigError> {
        let name = p.identity.as_deref().ok_or_else(|| {
            errors.at(
                at,
                "plans.identity",
                format!("`{what}` needs `identity`: the identity it belongs to"),
            )
        })?;
        identities.get(name).ok_or_else(|| {
            errors.at(
                at,
                "plans.identity",
                format!("no identity is named `{name}`"),
            )
        })
    };
    let source = if let Some(claim) = &p.jwt_claim {
        let Source::Jwt(verifier) = &identity("jwt_claim")?.source else {
            return Err(errors.at(at, "plans.identity", "`jwt_claim` needs a JWT identity"));
        };
        PlanSource::JwtClaim {
            verifier: verifier.clone(),
            claim: claim.clone(),
        }
    } else if let Some(header) = &p.header {
        PlanSource::Header(header_name(header).map_err(|m| errors.at(at, "plans.header", m))?)
    } else {
        let file = p.file.as_deref().unwrap_or_default();
        let name = identity("file")?.name.clone();
        let bytes = errors.read(at, "plans.file", file)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| errors.at(at, "plans.file", "the plans file is not UTF-8"))?;
        let parsed: PlansFile = serde_saphyr::from_str(&text).map_err(|e| {
            errors.at(
                at,
                "plans.file",
                format!(
                    "{}: {}",
                    errors.resolve(file).display(),
                    e.without_snippet()
                ),
            )
        })?;
        let keys = parsed
            .keys
            .into_iter()
            .map(|(key, entry)| {
                let entry = match entry {
                    PlanEntry::Plan(plan) => KeyPlan { plan, limit: None },
                    PlanEntry::Custom { plan, limit } => KeyPlan {
                        plan,
                        limit: Some(limit),
                    },
                };
                (key, entry)
            })
            .collect();
        PlanSource::File {
            identity: name,
            keys,
        }
    };
    Ok(Plans {
        source,
        default: p.default.clone(),
        // Filled once the rules are read.
        known: HashSet::new(),
    })
}
