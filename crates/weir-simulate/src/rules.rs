//! The rules to simulate: read from a rules file by the caller's loader (`weir
//! simulate --config` hands in weir's own configuration reader, so the policies are
//! exactly those `weir serve` enforces) or written inline as
//! `ALGORITHM:LIMIT/PERIOD[:BURST]`.

use std::path::Path;

use weir_core::{Algorithm, Policy, parse_period};

use super::error::SimulateError;

/// A named policy to replay traffic against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The name in the table and the plot: a configured rule's name, or the spec text.
    pub name: String,
    /// Its policy.
    pub policy: Policy,
}

/// Reads the rules of a rules file: given by the program that embeds the command, which
/// knows the file's format. Its error is shown as it is, so it names the file.
pub type LoadRules<'a> =
    dyn Fn(&Path) -> Result<Vec<Rule>, Box<dyn std::error::Error + Send + Sync>> + 'a;

/// The rules of `all` (read from `path`) named in `names`, in that order, or every rule
/// when `names` is empty.
pub(super) fn pick(
    all: Vec<Rule>,
    names: &[String],
    path: &Path,
) -> Result<Vec<Rule>, SimulateError> {
    if names.is_empty() {
        return Ok(all);
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|rule| &rule.name == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
                    SimulateError::Usage(format!(
                        "{}: no rule is named `{name}` (the rules: {})",
                        path.display(),
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

/// A rule written `ALGORITHM:LIMIT/PERIOD[:BURST]` (`sliding_window:100/1m`,
/// `token_bucket:100/1m:20`), named by that text.
pub fn from_spec(spec: &str) -> Result<Rule, SimulateError> {
    let fail = |message: String| {
        SimulateError::Usage(format!(
            "invalid rule spec `{spec}`: {message} (expected ALGORITHM:LIMIT/PERIOD[:BURST], e.g. sliding_window:100/1m)"
        ))
    };
    let mut parts = spec.split(':');
    let (Some(algorithm), Some(rate)) = (parts.next(), parts.next()) else {
        return Err(fail("no `:`".to_owned()));
    };
    let burst = parts.next();
    if parts.next().is_some() {
        return Err(fail("too many `:`".to_owned()));
    }
    let algorithm = Algorithm::ALL
        .into_iter()
        .find(|a| a.name() == algorithm)
        .ok_or_else(|| {
            let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
            fail(format!(
                "unknown algorithm `{algorithm}`, one of {}",
                names.join(", ")
            ))
        })?;
    let (limit, period) = rate
        .split_once('/')
        .ok_or_else(|| fail(format!("`{rate}` has no `/`")))?;
    let limit = limit
        .parse::<u64>()
        .map_err(|_| fail(format!("limit `{limit}` is not a whole number")))?;
    let period = parse_period(period).map_err(|e| fail(e.to_string()))?;
    let burst = burst
        .map(|b| {
            b.parse::<u64>()
                .map_err(|_| fail(format!("burst `{b}` is not a whole number")))
        })
        .transpose()?;
    let policy = Policy::new(algorithm, limit, period, burst).map_err(|e| fail(e.to_string()))?;
    Ok(Rule {
        name: spec.to_owned(),
        policy,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn reads_specs() {
        let rule = from_spec("token_bucket:100/1m:20").unwrap();
        assert_eq!(rule.name, "token_bucket:100/1m:20");
        assert_eq!(
            rule.policy,
            Policy::new(
                Algorithm::TokenBucket,
                100,
                Duration::from_secs(60),
                Some(20)
            )
            .unwrap()
        );
        assert_eq!(from_spec("fixed_window:10/1s").unwrap().policy.limit(), 10);
    }

    #[test]
    fn refuses_bad_specs_saying_why() {
        for (spec, why) in [
            ("fixed_window", "no `:`"),
            ("fixed:10/1m", "unknown algorithm `fixed`"),
            ("fixed_window:10", "has no `/`"),
            ("fixed_window:ten/1m", "limit `ten`"),
            ("fixed_window:10/1min", "invalid period"),
            (
                "fixed_window:0/1m",
                "limit must be a whole number from 1 to",
            ),
            ("fixed_window:10/1m:5", "burst applies to"),
            ("gcra:10/1m:5:6", "too many"),
        ] {
            let error = from_spec(spec).unwrap_err().to_string();
            assert!(error.contains(why), "{spec}: {error}");
        }
    }
}
