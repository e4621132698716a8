//! The sections about requests: the gateway's `upstream` and `client_ip`; the engine's
//! `identities`, `plans`, `response_headers`, and each rule's `match`, `key`, `plans`,
//! `cost`, `shadow`, `count_statuses`, `reset_statuses`, `lockout`, `failure`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::{HeaderName, Method, Uri};
use ipnet::IpNet;
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};
use weir_core::Policy;

use super::ConfigError;
use super::Fallback;
use super::file::{
    EscapedSlashesName, FailureName, ForwardedHeaderName, NormalizeName, OneOrMany, RawConfig,
    RawIdentity, RawJwt, RawMatch, RawPlans, RawRule, UnknownHostsName,
};
use crate::engine::identity::{IdentitySource, Normalize, Source};
use crate::engine::plan::{KeyPlan, PlanSource, Plans};
use crate::engine::route::{PathMatch, RouteMatch, rule_host};
use crate::engine::{CLIENT_IP, Failure, Lockout, Routing, Rule};
use crate::gateway::client_ip::{ClientIpConfig, ForwardedHeader, IPV6_PREFIX, canonical_net};
use crate::gateway::jwt::{JwtKey, JwtVerifier};
use crate::gateway::{GatewayConfig, Upstream};
use crate::request::{EscapedSlashes, PathOptions};

/// Defaults of the `upstream` section.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_BODY_BYTES: usize = 64 * 1024;
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// Builds errors that point into one file.
pub(super) struct Errors<'a> {
    pub(super) file: &'a Path,
}

impl Errors<'_> {
    pub(super) fn at(
        &self,
        location: Location,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::new(self.file, message)
            .at(location)
            .field(field)
    }

    /// A file named in the configuration, relative to the configuration's directory.
    fn read(&self, location: Location, field: &str, name: &str) -> Result<Vec<u8>, ConfigError> {
        let path = self.resolve(name);
        std::fs::read(&path).map_err(|e| {
            self.at(
                location,
                field,
                format!("cannot read `{}`: {e}", path.display()),
            )
        })
    }

    fn resolve(&self, name: &str) -> PathBuf {
        let path = Path::new(name);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.file.parent().unwrap_or(Path::new(".")).join(path)
        }
    }
}

/// The gateway, when the configuration has an `upstream`.
pub(super) fn gateway(
    raw: &RawConfig,
    errors: &Errors<'_>,
) -> Result<Option<GatewayConfig>, ConfigError> {
    let Some(upstream) = &raw.upstream else {
        return Ok(None);
    };
    let upstream = self::upstream(upstream, errors)?;
    let client_ip = client_ip(raw.client_ip.as_ref(), errors)?;
    Ok(Some(GatewayConfig {
        upstream,
        client_ip,
    }))
}

/// What the engine needs to decide requests: identities, plans and the rules with a
/// `match`. `policies` are the rules' validated policies, in file order.
pub(super) fn routing(
    raw: &RawConfig,
    policies: &[Policy],
    errors: &Errors<'_>,
    check_policy: &dyn Fn(&Policy) -> Result<(), String>,
    fallback: Fallback,
) -> Result<Routing, ConfigError> {
    let mut identities = HashMap::new();
    for (name, raw_identity) in &raw.identities {
        identities.insert(name.clone(), identity(name, raw_identity, errors)?);
    }
    let mut plans = raw
        .plans
        .as_ref()
        .map(|p| plans(p, &identities, errors))
        .transpose()?;
    let mut rules = Vec::new();
    for (i, (rule, policy)) in raw.rules.iter().zip(policies).enumerate() {
        if let Some(rule) = routed_rule(i, rule, *policy, &identities, errors, fallback)? {
            rules.push(rule);
        }
    }
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
                Policy::new(p.algorithm(), limit, p.period(), p.burst())
                    .map_err(|e| e.to_string())
                    .and_then(|custom| check_policy(&custom))
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
    Ok(Routing {
        identities,
        plans,
        rules,
        legacy_headers: raw.response_headers.legacy,
        ipv6_prefix: client_ip(raw.client_ip.as_ref(), errors)?.ipv6_prefix,
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

/// The `client_ip` section.
fn client_ip(
    raw: Option<&super::file::RawClientIp>,
    errors: &Errors<'_>,
) -> Result<ClientIpConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ClientIpConfig::default());
    };
    let trusted_proxies = raw
        .trusted_proxies
        .iter()
        .enumerate()
        .map(|(i, net)| {
            net.value
                .parse::<IpNet>()
                .or_else(|_| net.value.parse::<std::net::IpAddr>().map(IpNet::from))
                .map(canonical_net)
                .map_err(|_| {
                    errors.at(
                        net.referenced,
                        format!("client_ip.trusted_proxies[{i}]"),
                        format!("`{}` is not an IP address or CIDR block", net.value),
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let header = match raw.header {
        None | Some(ForwardedHeaderName::XForwardedFor) => ForwardedHeader::XForwardedFor,
        Some(ForwardedHeaderName::Forwarded) => ForwardedHeader::Forwarded,
        Some(ForwardedHeaderName::XRealIp) => ForwardedHeader::XRealIp,
    };
    let ipv6_prefix = match &raw.ipv6_prefix {
        None => IPV6_PREFIX,
        Some(p) => u8::try_from(p.value)
            .ok()
            .filter(|p| (1..=128).contains(p))
            .ok_or_else(|| {
                errors.at(
                    p.referenced,
                    "client_ip.ipv6_prefix",
                    "ipv6_prefix must be between 1 and 128",
                )
            })?,
    };
    Ok(ClientIpConfig {
        trusted_proxies,
        header,
        ipv6_prefix,
    })
}

fn upstream(raw: &super::file::RawUpstream, errors: &Errors<'_>) -> Result<Upstream, ConfigError> {
    let url = &raw.url;
    let base: Uri = url
        .value
        .parse()
        .ok()
        .filter(|u: &Uri| u.scheme_str() == Some("http") && u.authority().is_some() && matches!(u.path(), "" | "/"))
        .ok_or_else(|| errors.at(url.referenced, "upstream.url", format!("`{}` is not an upstream URL: use http://host:port (https upstreams are not supported yet)", url.value)))?;
    let timeout =
        |value: &Option<Spanned<super::Period>>, field: &str, default: Duration| match value {
            Some(t) if t.value.0.is_zero() || t.value.0 > Duration::from_secs(3600) => Err(errors
                .at(
                    t.referenced,
                    format!("upstream.{field}"),
                    format!("{field} must be between 1ms and 1h"),
                )),
            Some(t) => Ok(t.value.0),
            None => Ok(default),
        };
    let max_body_bytes = match &raw.max_body_bytes {
        Some(n) if n.value == 0 || n.value > 16 * 1024 * 1024 => {
            return Err(errors.at(
                n.referenced,
                "upstream.max_body_bytes",
                "max_body_bytes must be between 1 and 16777216",
            ));
        }
        Some(n) => n.value,
        None => MAX_BODY_BYTES,
    };
    let max_buffered_bytes = match &raw.max_buffered_bytes {
        Some(n) if n.value < max_body_bytes || n.value > 4 << 30 => {
            return Err(errors.at(
                n.referenced,
                "upstream.max_buffered_bytes",
                format!("max_buffered_bytes must be between max_body_bytes ({max_body_bytes}) and 4294967296"),
            ));
        }
        Some(n) => n.value,
        None => MAX_BUFFERED_BYTES.max(max_body_bytes),
    };
    Ok(Upstream {
        base,
        connect_timeout: timeout(&raw.connect_timeout, "connect_timeout", CONNECT_TIMEOUT)?,
        timeout: timeout(&raw.timeout, "timeout", UPSTREAM_TIMEOUT)?,
        body_timeout: timeout(&raw.body_timeout, "body_timeout", BODY_TIMEOUT)?,
        max_body_bytes,
        max_buffered_bytes,
    })
}

fn identity(
    name: &str,
    raw: &Spanned<RawIdentity>,
    errors: &Errors<'_>,
) -> Result<IdentitySource, ConfigError> {
    let field = format!("identities.{name}");
    let at = raw.referenced;
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) || name == CLIENT_IP {
        return Err(errors.at(
            at,
            field,
            format!(
                "invalid identity name `{name}`: use a-z, 0-9 and `_` (`{CLIENT_IP}` is built in)"
            ),
        ));
    }
    let raw = &raw.value;
    let sources = usize::from(raw.header.is_some())
        + usize::from(raw.jwt.is_some())
        + usize::from(raw.body_field.is_some())
        + usize::from(raw.client_ip);
    if sources != 1 {
        return Err(errors.at(
            at,
            field,
            "give exactly one of `header`, `jwt`, `body_field`, `client_ip`",
        ));
    }
    let source = if let Some(header) = &raw.header {
        Source::Header(
            header_name(header).map_err(|m| errors.at(at, format!("{field}.header"), m))?,
        )
    } else if let Some(jwt) = &raw.jwt {
        Source::Jwt(verifier(jwt, at, &format!("{field}.jwt"), errors)?)
    } else if let Some(body_field) = &raw.body_field {
        Source::BodyField(body_field.clone())
    } else {
        Source::ClientIp
    };
    let normalize = match raw.normalize {
        None | Some(NormalizeName::None) => Normalize::None,
        Some(NormalizeName::Email) => Normalize::Email,
    };
    Ok(IdentitySource {
        name: name.to_owned(),
        source,
        normalize,
    })
}

fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::try_from(name.to_ascii_lowercase())
        .map_err(|_| format!("`{name}` is not a header name"))
}

fn verifier(
    raw: &RawJwt,
    at: Location,
    field: &str,
    errors: &Errors<'_>,
) -> Result<JwtVerifier, ConfigError> {
    let keys = usize::from(raw.hs256_secret.is_some())
        + usize::from(raw.rs256_public_key_file.is_some())
        + usize::from(raw.es256_public_key_file.is_some())
        + usize::from(raw.jwks_file.is_some());
    if keys != 1 {
        return Err(errors.at(at, field, "give exactly one of `hs256_secret`, `rs256_public_key_file`, `es256_public_key_file`, `jwks_file`"));
    }
    let key = if let Some(secret) = &raw.hs256_secret {
        JwtKey::Hs256Secret(secret.clone())
    } else if let Some(file) = &raw.rs256_public_key_file {
        JwtKey::Rs256Pem(errors.read(at, field, file)?)
    } else if let Some(file) = &raw.es256_public_key_file {
        JwtKey::Es256Pem(errors.read(at, field, file)?)
    } else if let Some(file) = &raw.jwks_file {
        let bytes = errors.read(at, field, file)?;
        JwtKey::Jwks(
            String::from_utf8(bytes)
                .map_err(|_| errors.at(at, field, "the JWKS file is not UTF-8"))?,
        )
    } else {
        unreachable!("one key source was counted above")
    };
    let header =
        header_name(&raw.header).map_err(|m| errors.at(at, format!("{field}.header"), m))?;
    let values = |list: &Option<OneOrMany>, name: &str| {
        let values = list.as_ref().map_or_else(Vec::new, OneOrMany::to_vec);
        if list.is_some() && (values.is_empty() || values.iter().any(String::is_empty)) {
            return Err(errors.at(
                at,
                format!("{field}.{name}"),
                format!("`{name}` lists one or more non-empty values"),
            ));
        }
        Ok(values)
    };
    let audience = values(&raw.audience, "audience")?;
    let issuer = values(&raw.issuer, "issuer")?;
    Ok(JwtVerifier::new(header, raw.claim.clone(), key)
        .map_err(|m| errors.at(at, field, m))?
        .with_audience(audience)
        .with_issuer(issuer))
}

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

fn plans(
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

fn routed_rule(
    i: usize,
    raw: &RawRule,
    policy: Policy,
    identities: &HashMap<String, IdentitySource>,
    errors: &Errors<'_>,
    fallback: Fallback,
) -> Result<Option<Rule>, ConfigError> {
    let field = |name: &str| format!("rules[{i}].{name}");
    let Some(route) = &raw.route else {
        needs_match(i, raw, errors)?;
        return Ok(None);
    };
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
            return Err(errors.at(cost.referenced, field("cost"), "cost must be at least 1"));
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
            if c.value.cost == 0 {
                return Err(errors.at(
                    c.referenced,
                    field(&format!("costs[{j}].cost")),
                    "cost must be at least 1",
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
    // Each instance's share of the limit, for when the shared store is down.
    let share = |n: u64| n.div_ceil(fallback.instances).max(1);
    let fallback_policy = Policy::new(
        policy.algorithm(),
        share(policy.limit()),
        policy.period(),
        policy.burst().map(share),
    )
    .unwrap_or(policy);
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
        lockout,
        store_timeout,
        failure: match raw.failure {
            FailureName::Open => Failure::Open,
            FailureName::Closed => Failure::Closed,
        },
        fallback_policy,
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
    }))
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(yaml: &str) -> Result<ClientIpConfig, String> {
        let raw: super::super::file::RawClientIp =
            serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let errors = Errors {
            file: Path::new("weir.yaml"),
        };
        client_ip(Some(&raw), &errors).map_err(|e| e.to_string())
    }

    #[test]
    fn the_client_ip_section_has_defaults_and_bounds() {
        assert_eq!(
            client_ip(
                None,
                &Errors {
                    file: Path::new("weir.yaml")
                }
            )
            .unwrap(),
            ClientIpConfig::default()
        );
        let c = section(
            "trusted_proxies: [\"::ffff:10.0.0.0/104\", 127.0.0.1, \"::ffff:192.0.2.1\"]\n",
        )
        .unwrap();
        let nets: Vec<String> = c.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(nets, ["10.0.0.0/8", "127.0.0.1/32", "192.0.2.1/32"]);
        assert_eq!(c.header, ForwardedHeader::XForwardedFor);
        assert_eq!(c.ipv6_prefix, 64);
        for (name, header) in [
            ("x-forwarded-for", ForwardedHeader::XForwardedFor),
            ("forwarded", ForwardedHeader::Forwarded),
            ("x-real-ip", ForwardedHeader::XRealIp),
        ] {
            assert_eq!(
                section(&format!("header: {name}\n")).unwrap().header,
                header
            );
        }
        assert!(section("header: true-client-ip\n").is_err());
        assert_eq!(section("ipv6_prefix: 48\n").unwrap().ipv6_prefix, 48);
        assert_eq!(section("ipv6_prefix: 128\n").unwrap().ipv6_prefix, 128);
        for bad in ["0", "129", "100000"] {
            assert_eq!(
                section(&format!("ipv6_prefix: {bad}\n")),
                Err(
                    "weir.yaml:1:14: client_ip.ipv6_prefix: ipv6_prefix must be between 1 and 128"
                        .into()
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn jwt_audience_and_issuer_are_one_value_or_a_list() {
        let errors = Errors {
            file: Path::new("weir.yaml"),
        };
        let jwt = |yaml: &str| -> Result<String, String> {
            let raw: RawJwt = serde_saphyr::from_str(&format!(
                "claim: sub\nhs256_secret: a-long-random-secret\n{yaml}"
            ))
            .map_err(|e| e.to_string())?;
            verifier(&raw, Location::UNKNOWN, "identities.user.jwt", &errors)
                .map(|v| format!("{v:?}"))
                .map_err(|e| e.to_string())
        };
        let v = jwt("audience: api\nissuer: [https://a.example, https://b.example]\n").unwrap();
        assert!(
            v.contains(r#"audience: ["api"], issuer: ["https://a.example", "https://b.example"]"#),
            "{v}"
        );
        assert!(jwt("").unwrap().contains("audience: [], issuer: []"));
        for bad in ["audience: []\n", "audience: \"\"\n", "issuer: [a, \"\"]\n"] {
            let e = jwt(bad).unwrap_err();
            assert!(
                e.contains("lists one or more non-empty values"),
                "{bad}: {e}"
            );
        }
    }
}
