//! The caller's plan (tier): from a verified JWT claim, a header set by a trusted auth
//! layer, or a file mapping keys to plans (with custom limits per key).

use std::collections::{HashMap, HashSet};

use axum::http::HeaderName;
use weir_core::Clock;

use crate::request::{Facts, JwtVerifier};

/// The plan of a caller whose identity could not be found.
pub(super) const ANONYMOUS: &str = "anonymous";

/// A key's entry in a plans file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyPlan {
    /// The plan.
    pub plan: String,
    /// A custom limit for this key, replacing the limit of its plan's rules.
    pub limit: Option<u64>,
}

/// Where plans come from.
#[derive(Debug, Clone)]
pub(crate) enum PlanSource {
    /// A claim of the token verified by an identity's JWT settings.
    JwtClaim {
        /// The verifier (of the identity named in the configuration).
        verifier: JwtVerifier,
        /// The claim holding the plan.
        claim: String,
    },
    /// A header set by a trusted authentication layer in front of weir.
    Header(HeaderName),
    /// A file mapping the values of one identity (e.g. API keys) to plans.
    File {
        /// The identity whose value is looked up.
        identity: String,
        /// Its entries.
        keys: HashMap<String, KeyPlan>,
    },
}

/// How callers get their plan.
#[derive(Debug, Clone)]
pub(crate) struct Plans {
    /// Where the plan comes from.
    pub source: PlanSource,
    /// The plan of an identified caller the source says nothing about, or names a plan
    /// no rule knows.
    pub default: String,
    /// The plans the rules name: any other plan a source gives is the default.
    pub known: HashSet<String>,
}

/// A caller's plan, and a custom limit if the plans file gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallerPlan {
    /// The plan's name.
    pub name: String,
    /// A custom limit for this caller.
    pub limit: Option<u64>,
}

impl Plans {
    /// The plan of the caller of a request; `identity_of` finds a named identity.
    pub(crate) fn plan_of(
        &self,
        facts: Facts<'_>,
        clock: &dyn Clock,
        identity_of: impl Fn(&str) -> Option<String>,
    ) -> CallerPlan {
        let named = |name: String| CallerPlan { name, limit: None };
        // A plan no rule names would escape every plan's limits: it is the default.
        let known = |name: String| {
            if self.known.contains(&name) {
                named(name)
            } else {
                named(self.default.clone())
            }
        };
        match &self.source {
            // One verification for both claims.
            PlanSource::JwtClaim { verifier, claim } => {
                match verifier.verified(facts.headers, clock.wall_secs()) {
                    Some(claims) if claims.get(verifier.identity_claim()).is_some() => {
                        known(claims.get(claim).unwrap_or_else(|| self.default.clone()))
                    }
                    _ => named(ANONYMOUS.into()),
                }
            }
            // Believed only from a trusted proxy (the authentication layer that sets
            // it), and only once: a client's own header is ignored.
            PlanSource::Header(header) => {
                let mut values = facts.headers.get_all(header).iter();
                match (facts.trusted_peer, values.next(), values.next()) {
                    (true, Some(plan), None) => match plan.to_str() {
                        Ok(plan) if !plan.trim().is_empty() => known(plan.trim().to_owned()),
                        _ => named(self.default.clone()),
                    },
                    _ => named(self.default.clone()),
                }
            }
            PlanSource::File { identity, keys } => match identity_of(identity) {
                None => named(ANONYMOUS.into()),
                Some(value) => match keys.get(&value) {
                    Some(entry) => CallerPlan {
                        name: entry.plan.clone(),
                        limit: entry.limit,
                    },
                    None => named(self.default.clone()),
                },
            },
        }
    }
}
