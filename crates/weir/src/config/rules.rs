//! What the engine decides requests by: each rule's `match`, `key`, `plans`, `cost`,
//! `shadow`, `count_statuses`, `reset_statuses`, `lockout`, `failure`, and the
//! `response_headers` and `requests` sections.

use std::collections::HashMap;
use std::time::Duration;

use axum::http::{HeaderName, Method};
use serde_saphyr::Location;
use weir_core::Policy;

use super::error::{Errors, Found};
use super::file::{
    EscapedSlashesName, FailureName, RawCompare, RawCondition, RawConfig, RawCostFrom, RawMatch,
    RawRule, UnknownHostsName,
};
use super::identities::{field_name, header_name, identity};
use super::plans::plans;
use super::region::ScopeName;
use super::{ConfigError, Fallback};
use crate::engine::{
    CLIENT_IP, Condition, CostFrom, Failure, IdentitySource, Lockout, MAX_DEBT_BUCKETS, PathMatch,
    PlanSource, Plans, RouteMatch, Routing, Rule, ValueMatch, ValueSource, rule_host,
};
use crate::request::{EscapedSlashes, PathOptions};

/// What the engine needs to decide requests: identities, plans and the rules with a
/// `match`. `policies` are the rules' validated policies, in file order; IPv6 clients
/// are keyed by `ipv6_prefix` bits.
pub(super) fn routing(
    raw: &RawConfig,
    policies: &[Policy],
    errors: &Errors<'_>,
    check_policy: &dyn Fn(&str, &Policy) -> Result<(), String>,
    fallback: Fallback,
    regions: u64,
    ipv6_prefix: u8,
) -> Result<Routing, ConfigError> {
    // Every identity's and every rule's errors at once.
    let mut found = Found::default();
    let mut identities = HashMap::new();
    for (name, raw_identity) in &raw.identities {
        if let Some(identity) = found.keep(identity(name, raw_identity, errors)) {
            identities.insert(name.clone(), identity);
        }
    }
    found.finish()?;
    let mut plans = raw
        .plans
        .as_ref()
        .map(|p| plans(p, &identities, errors))
        .transpose()?;
    let mut rules = Vec::new();
    let mut found = Found::default();
    for (i, (rule, policy)) in raw.rules.iter().zip(policies).enumerate() {
        let global = rule
            .scope
            .as_ref()
            .is_some_and(|s| s.value == super::region::ScopeName::Global);
        // While the store is down, each instance enforces its part of the limit: of
        // its region's even split, for a global rule.
        let parts = fallback
            .instances
            .saturating_mul(if global { regions } else { 1 });
        let shedding = raw.shedding.is_some();
        let routed = routed_rule(i, rule, *policy, &identities, errors, parts, shedding);
        if let Some(Some(rule)) = found.keep(routed) {
            rules.push(rule);
        }
    }
    found.finish()?;
    if let Some(plans) = &mut plans {
        plans.known = rules.iter().flat_map(|r| r.plans.iter().cloned()).collect();
    }
    // Custom limits of the plans file must make valid policies for their plan's rules.
    if let Some(Plans {
        source: PlanSource::File { keys, .. },
        ..
    }) = &plans
    {
        let at = raw
            .plans
            .as_ref()
            .map_or(Location::UNKNOWN, |p| p.referenced);
        for (key, entry) in keys {
            let Some(limit) = entry.limit else { continue };
            for rule in rules.iter().filter(|r| r.plans.contains(&entry.plan)) {
                let p = rule.policy;
                p.relimit(limit, p.burst())
                    .map_err(|e| e.to_string())
                    .and_then(|custom| check_policy(&rule.name, &custom))
                    .map_err(|e| {
                        errors.at(
                            at,
                            "plans.file",
                            format!(
                                "custom limit {limit} of key `{key}` for rule `{}`: {e}",
                                rule.name
                            ),
                        )
                    })?;
            }
        }
    }
    let lists = raw
        .lists
        .as_ref()
        .map(|l| super::lists::lists(l, "lists", &identities, errors))
        .transpose()?;
    Ok(Routing {
        lists,
        identities,
        plans,
        rules,
        legacy_headers: raw.response_headers.legacy,
        ipv6_prefix,
        paths: PathOptions {
            escaped_slashes: match raw.requests.escaped_slashes {
                EscapedSlashesName::Reject => EscapedSlashes::Reject,
                EscapedSlashesName::Keep => EscapedSlashes::Keep,
                EscapedSlashesName::UnescapeAndMerge => EscapedSlashes::UnescapeAndMerge,
            },
        },
        forward_unknown_hosts: matches!(raw.requests.unknown_hosts, UnknownHostsName::Forward),
    })
}

fn routed_rule(
    i: usize,
    raw: &RawRule,
    policy: Policy,
    identities: &HashMap<String, IdentitySource>,
    errors: &Errors<'_>,
    parts: u64,
    shedding: bool,
) -> Result<Option<Rule>, ConfigError> {
    let field = |name: &str| format!("rules[{i}].{name}");
    let Some(route) = &raw.route else {
        needs_match(i, raw, errors)?;
        return Ok(None);
    };
    let priority = route.value.priority.map(weir_core::Priority::from);
    if priority.is_some() && !shedding {
        return Err(errors.at(
            route.referenced,
            field("match.priority"),
            "`priority` is the shedding priority of the rule's requests: it needs a `shedding` section",
        ));
    }
    if priority.is_some() && !raw.plans.is_empty() {
        return Err(errors.at(
            route.referenced,
            field("match.priority"),
            "`priority` cannot be given on a rule for some plans: the gateway sheds before it knows a caller's plan, so every plan's requests would get it",
        ));
    }
    let route =
        route_match(&route.value).map_err(|m| errors.at(route.referenced, field("match"), m))?;
    let key = match &raw.key {
        Some(key) => {
            if key.value.is_empty() {
                return Err(errors.at(
                    key.referenced,
                    field("key"),
                    "`key` lists at least one identity",
                ));
            }
            for name in &key.value {
                if name != CLIENT_IP && !identities.contains_key(name) {
                    return Err(errors.at(key.referenced, field("key"), format!("no identity is named `{name}` (see `identities:`; `{CLIENT_IP}` is built in)")));
                }
            }
            key.value.clone()
        }
        None => vec![CLIENT_IP.to_owned()],
    };
    let cost = match &raw.cost {
        Some(cost) if cost.value == 0 => {
            return Err(errors.at(
                cost.referenced,
                field("cost"),
                "cost must be a whole number, at least 1",
            ));
        }
        Some(cost) => cost.value,
        None => 1,
    };
    let costs = raw
        .costs
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let route = route_match(&c.value.route)
                .map_err(|m| errors.at(c.referenced, field(&format!("costs[{j}].match")), m))?;
            if c.value.route.priority.is_some() {
                return Err(errors.at(
                    c.referenced,
                    field(&format!("costs[{j}].match.priority")),
                    "`priority` belongs on the rule's own `match`, not a cost's",
                ));
            }
            if !route.values.is_empty() {
                return Err(errors.at(
                    c.referenced,
                    field(&format!("costs[{j}].match")),
                    "`headers`, `query` and `cookies` belong on the rule's own `match`, not a cost's (make another rule)",
                ));
            }
            if c.value.cost == 0 {
                return Err(errors.at(
                    c.referenced,
                    field(&format!("costs[{j}].cost")),
                    "cost must be a whole number, at least 1",
                ));
            }
            Ok((route, c.value.cost))
        })
        .collect::<Result<_, _>>()?;
    for (list, name) in [
        (&raw.count_statuses, "count_statuses"),
        (&raw.reset_statuses, "reset_statuses"),
    ] {
        if let Some(bad) = list.iter().find(|s| !(100..=599).contains(*s)) {
            return Err(errors.at(
                raw.name.referenced,
                field(name),
                format!("{bad} is not an HTTP status"),
            ));
        }
    }
    let lockout = match &raw.lockout {
        None => None,
        Some(l) => {
            let at = l.referenced;
            if raw.count_statuses.is_empty() {
                return Err(errors.at(
                    at,
                    field("lockout"),
                    "`lockout` needs `count_statuses`: it grows the wait after counted outcomes",
                ));
            }
            if !(2..=10).contains(&l.value.growth) {
                return Err(errors.at(
                    at,
                    field("lockout.growth"),
                    "growth must be between 2 and 10",
                ));
            }
            let max = l.value.max.0;
            if max < policy.period() || max > weir_core::MAX_PERIOD {
                return Err(errors.at(
                    at,
                    field("lockout.max"),
                    "max must be at least the rule's period, and at most 366d",
                ));
            }
            let lockout = Lockout::new(&raw.name.value, l.value.growth, max)
                .map_err(|e| errors.at(at, field("lockout"), e.to_string()))?;
            Some(lockout)
        }
    };
    let on_limited = raw
        .on_limited
        .as_ref()
        .map(|o| super::bans::on_limited(i, &raw.name.value, &key, o, errors))
        .transpose()?;
    let lists = raw
        .lists
        .as_ref()
        .map(|l| super::lists::lists(l, &field("lists"), identities, errors))
        .transpose()?;
    let cost_from = match &raw.cost_from {
        None => None,
        Some(c) => Some(
            cost_from(raw, &c.value, &policy)
                .map_err(|m| errors.at(c.referenced, field("cost_from"), m))?,
        ),
    };
    let cost_max = raw.cost_from.as_ref().and_then(|c| c.value.max);
    let store_timeout = match &raw.store_timeout {
        Some(t) if t.value.0.is_zero() || t.value.0 > Duration::from_secs(60) => {
            return Err(errors.at(
                t.referenced,
                field("store_timeout"),
                "store_timeout must be between 1ms and 60s",
            ));
        }
        Some(t) => Some(t.value.0),
        None => None,
    };
    Ok(Some(Rule {
        priority,
        lockout,
        on_limited,
        lists,
        store_timeout,
        failure: match raw.failure {
            FailureName::Open => Failure::Open,
            FailureName::Closed => Failure::Closed,
        },
        fallback_parts: parts,
        name: raw.name.value.clone(),
        policy,
        route,
        key,
        plans: raw.plans.clone(),
        cost,
        costs,
        shadow: raw.shadow,
        count_statuses: raw.count_statuses.clone(),
        reset_statuses: raw.reset_statuses.clone(),
        cost_from,
        cost_max,
        in_flight: raw.algorithm.rate().is_none(),
    }))
}

/// Where a rule reads a request's actual cost, checked: one place, a valid header
/// name or JSON pointer, and a limit that can carry the debt of a cost beyond the
/// estimate.
fn cost_from(raw: &RawRule, from: &RawCostFrom, policy: &Policy) -> Result<CostFrom, String> {
    let header = |name: &str| {
        HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|_| format!("`{name}` is not a header name"))
    };
    let from = match (&from.response_header, &from.trailer, &from.json) {
        (Some(name), None, None) => CostFrom::ResponseHeader(header(name)?),
        (None, Some(name), None) => CostFrom::Trailer(header(name)?),
        (None, None, Some(pointer)) => {
            if !pointer.starts_with('/') {
                return Err(format!(
                    "`{pointer}` is not a JSON pointer: write it as `/usage/total_tokens`"
                ));
            }
            CostFrom::Json(pointer.clone())
        }
        _ => return Err("give one of `response_header`, `trailer` or `json`".into()),
    };
    if !policy.algorithm().carries_debt() {
        return Err(format!(
            "`cost_from` needs a limit that can carry a debt (a cost beyond the estimate, waited out): token_bucket, gcra or leaky_bucket, not {}",
            policy.algorithm()
        ));
    }
    if raw
        .scope
        .as_ref()
        .is_some_and(|s| s.value == ScopeName::Global)
    {
        return Err(
            "`cost_from` cannot be used on a global rule: a region's share carries no debt".into(),
        );
    }
    if raw.lease.is_some() {
        return Err("`cost_from` cannot be used with `lease`: a leased batch is spent locally, before the answer states the cost".into());
    }
    let most = policy.capacity().saturating_mul(MAX_DEBT_BUCKETS);
    if let Some(max) = raw.cost_from.as_ref().and_then(|c| c.value.max)
        && !(1..=most).contains(&max)
    {
        return Err(format!(
            "`max` must be between 1 and {MAX_DEBT_BUCKETS} buckets of the rule ({most}), got {max}"
        ));
    }
    Ok(from)
}

/// Refuses the gateway-only fields of a rule without `match`.
fn needs_match(i: usize, raw: &RawRule, errors: &Errors<'_>) -> Result<(), ConfigError> {
    let fields = [
        (raw.key.is_some(), "key"),
        (!raw.plans.is_empty(), "plans"),
        (raw.cost.is_some(), "cost"),
        (!raw.costs.is_empty(), "costs"),
        (raw.shadow, "shadow"),
        (!raw.count_statuses.is_empty(), "count_statuses"),
        (!raw.reset_statuses.is_empty(), "reset_statuses"),
        (raw.lockout.is_some(), "lockout"),
        (raw.on_limited.is_some(), "on_limited"),
        (raw.lists.is_some(), "lists"),
        (raw.cost_from.is_some(), "cost_from"),
        (raw.failure != FailureName::Open, "failure"),
        (raw.store_timeout.is_some(), "store_timeout"),
    ];
    match fields.iter().find(|(present, _)| *present) {
        Some((_, name)) => Err(errors.at(
            raw.name.referenced,
            format!("rules[{i}].{name}"),
            format!("`{name}` needs a `match`: it applies to gateway rules"),
        )),
        None => Ok(()),
    }
}

fn route_match(raw: &RawMatch) -> Result<RouteMatch, String> {
    use crate::request::PathMatchOptions;
    let methods = raw
        .methods
        .iter()
        .map(|m| {
            Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                .map_err(|_| format!("`{m}` is not an HTTP method"))
        })
        .collect::<Result<_, _>>()?;
    let options = PathMatchOptions {
        case_insensitive: raw.case_insensitive,
        trailing_slash: raw.trailing_slash,
    };
    let path = match (&raw.path, &raw.path_prefix) {
        (Some(_), Some(_)) => return Err("give `path` or `path_prefix`, not both".into()),
        (Some(path), None) => PathMatch::exact(path, options)?,
        (None, Some(prefix)) => PathMatch::prefix(prefix, options)?,
        (None, None) => PathMatch::Any,
    };
    Ok(RouteMatch {
        methods,
        host: raw.host.as_deref().map(rule_host).transpose()?,
        path,
        options,
        values: value_matches(raw)?,
    })
}

/// A match's conditions on headers, query parameters and cookies.
fn value_matches(raw: &RawMatch) -> Result<Vec<ValueMatch>, String> {
    let mut values = Vec::new();
    let mut headers = std::collections::HashSet::new();
    for (name, condition) in &raw.headers {
        let header = header_name(name).map_err(|m| format!("headers: {m}"))?;
        if !headers.insert(header.clone()) {
            return Err(format!(
                "headers: `{name}` is given twice (header names have no case)"
            ));
        }
        values.push(ValueMatch {
            source: ValueSource::Header(header),
            condition: condition_of(condition).map_err(|m| format!("headers.{name}: {m}"))?,
        });
    }
    for (list, field, source) in [
        (
            &raw.query,
            "query",
            ValueSource::Query as fn(String) -> ValueSource,
        ),
        (&raw.cookies, "cookies", ValueSource::Cookie),
    ] {
        for (name, condition) in list {
            field_name(name).map_err(|m| format!("{field}: {m}"))?;
            values.push(ValueMatch {
                source: source(name.clone()),
                condition: condition_of(condition).map_err(|m| format!("{field}.{name}: {m}"))?,
            });
        }
    }
    Ok(values)
}

fn condition_of(raw: &RawCondition) -> Result<Condition, String> {
    let compare = match raw {
        RawCondition::Exact(text) => return Ok(Condition::Exact(text.clone())),
        RawCondition::Compare(compare) => compare,
    };
    let given = usize::from(compare.exact.is_some())
        + usize::from(compare.prefix.is_some())
        + usize::from(compare.regex.is_some())
        + usize::from(compare.present.is_some());
    if given != 1 {
        return Err("give exactly one of `exact`, `prefix`, `regex`, `present`".into());
    }
    Ok(match compare {
        RawCompare {
            exact: Some(text), ..
        } => Condition::Exact(text.clone()),
        RawCompare {
            prefix: Some(text), ..
        } => Condition::Prefix(text.clone()),
        RawCompare {
            regex: Some(pattern),
            ..
        } => Condition::regex(pattern)?,
        RawCompare {
            present: Some(present),
            ..
        } => Condition::Present(*present),
        _ => unreachable!("one way was counted above"),
    })
}
