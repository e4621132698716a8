//! An override's key, as the engine keys the rule: what an operator writes is read
//! back into the identities it names and written again the way a request's key is,
//! so that one caller has one override however the key was spelt, and a key no
//! request can have is refused rather than stored to match nothing.

use std::net::IpAddr;

use ipnet::Ipv6Net;

use super::super::identity::{IdentitySource, MAX_IDENTITY_BYTES, Normalize, Source};
use super::super::key::{push_tagged, stored, stored_form};
use super::super::{CLIENT_IP, PlanSource, Routing, Rule};
use crate::request::{ip_key, normalize_email};

/// The longest key read (a long one is then kept as its hash, as requests' are).
pub(crate) const MAX_KEY_BYTES: usize = 4096;

/// The canonical key of rule `rule`'s caller written `key`: for a rule with a
/// `match` (`routed` is its key's identities), `name=value` pairs joined by `&`, the
/// identities of the rule's `key` in order, or `client_ip=ADDRESS` alone (a caller
/// lacking one); for a rule of the decision API alone, the key as `/v1/check` is sent
/// it. The error says what is wrong.
pub(crate) fn canonical_key(
    routing: &Routing,
    routed: Option<&[String]>,
    key: &str,
) -> Result<String, String> {
    if key.is_empty() {
        return Err("the key is empty".into());
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(format!("the key is longer than {MAX_KEY_BYTES} bytes"));
    }
    let Some(names) = routed else {
        return Ok(stored_form(key).into_owned());
    };
    let pairs: Vec<(&str, String)> = key
        .split('&')
        .map(|pair| {
            let (name, value) = pair.split_once('=').ok_or_else(|| {
                format!(
                    "`{}` is not `identity=value` (keys are written as `weir explain` shows them, e.g. `client_ip=203.0.113.7`)",
                    pair.escape_debug()
                )
            })?;
            Ok((name, unescape(value)?))
        })
        .collect::<Result<_, String>>()?;
    let anonymous = matches!(pairs.as_slice(), [(CLIENT_IP, _)]);
    let expected: Vec<&str> = names.iter().map(String::as_str).collect();
    let given: Vec<&str> = pairs.iter().map(|(n, _)| *n).collect();
    if given != expected && !anonymous {
        return Err(format!(
            "the rule is keyed by `{}`: give {} (or `client_ip=...` alone for callers without them), not `{}`",
            expected.join("&"),
            expected
                .iter()
                .map(|n| format!("{n}=..."))
                .collect::<Vec<_>>()
                .join("&"),
            given.join("&")
        ));
    }
    let mut canonical = String::new();
    for (name, value) in &pairs {
        let value = identity_value(routing, name, value)?;
        push_tagged(&mut canonical, name, &value);
    }
    Ok(stored(canonical))
}

/// The plans file's custom limit for the caller of `key` (canonical) under the routed
/// `rule`: when the key names the file's identity and the file gives that value a
/// custom limit on a plan the rule is for, as a request is decided. `None`: the key's
/// limit without an override is the rule's (a key that does not name the identity
/// cannot tell its caller's plan).
pub(super) fn custom_limit(routing: &Routing, rule: &Rule, key: &str) -> Option<u64> {
    let PlanSource::File { identity, keys } = &routing.plans.as_ref()?.source else {
        return None;
    };
    let value = key
        .split('&')
        .find_map(|pair| pair.strip_prefix(identity.as_str())?.strip_prefix('='))?;
    let entry = keys.get(&unescape(value).ok()?)?;
    entry.limit.filter(|_| rule.plans.contains(&entry.plan))
}

/// `value` read as the identity `name` reads it: an address as its key form, an
/// e-mail folded, a header's value visible ASCII.
fn identity_value(routing: &Routing, name: &str, value: &str) -> Result<String, String> {
    let source = routing.identities.get(name);
    let is_ip = name == CLIENT_IP || source.is_some_and(|s| matches!(s.source, Source::ClientIp));
    if is_ip {
        return address(value, routing.ipv6_prefix);
    }
    if value.is_empty() {
        return Err(format!("`{name}` is empty"));
    }
    let value = match source {
        Some(IdentitySource {
            normalize: Normalize::Email,
            ..
        }) => normalize_email(value)
            .map_err(|_| format!("`{name}` has nothing but spaces or invisible characters"))?,
        Some(IdentitySource {
            source: Source::Header(_),
            ..
        }) if !value
            .bytes()
            .all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) =>
        {
            return Err(format!(
                "`{name}` is read from a header: it must be visible ASCII text"
            ));
        }
        Some(IdentitySource {
            source: Source::Header(_),
            ..
        }) if value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']) => {
            return Err(format!(
                "`{name}` is read from a header, whose value never begins or ends with whitespace"
            ));
        }
        _ => value.to_owned(),
    };
    if value.len() > MAX_IDENTITY_BYTES {
        return Err(format!(
            "`{name}` is longer than {MAX_IDENTITY_BYTES} bytes"
        ));
    }
    Ok(value)
}

/// A client address as keys hold it: IPv4 as it is, IPv6 as its network of the
/// configured prefix (an address in it, or the network as written).
fn address(value: &str, ipv6_prefix: u8) -> Result<String, String> {
    let ip = match value.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => match value.parse::<Ipv6Net>() {
            Ok(net) if net.prefix_len() >= ipv6_prefix => IpAddr::V6(net.addr()),
            _ => {
                return Err(format!(
                    "`{}` is not a client address (an IPv4 or IPv6 address, or an IPv6 network of /{ipv6_prefix})",
                    value.escape_debug()
                ));
            }
        },
    };
    Ok(ip_key(ip, ipv6_prefix))
}

/// A key's value with its escapes read: `%25` is `%`, `%26` is `&`; any other `%` is
/// not a key weir makes.
fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("%25") => out.push('%'),
            Some("%26") => out.push('&'),
            _ => {
                return Err(format!(
                    "`{}`: in a key, `%` is written `%25` and `&` `%26`",
                    value.escape_debug()
                ));
            }
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::request::PathOptions;

    fn routing(identities: Vec<IdentitySource>) -> Routing {
        Routing {
            identities: identities
                .into_iter()
                .map(|i| (i.name.clone(), i))
                .collect::<HashMap<_, _>>(),
            plans: None,
            rules: Vec::new(),
            legacy_headers: false,
            ipv6_prefix: 64,
            paths: PathOptions::default(),
            forward_unknown_hosts: true,
            lists: None,
        }
    }

    fn email() -> IdentitySource {
        IdentitySource {
            name: "email".into(),
            source: Source::BodyField("email".into()),
            normalize: Normalize::Email,
        }
    }

    #[test]
    fn addresses_are_keyed_as_requests_key_them() {
        let r = routing(Vec::new());
        let by_ip = ["client_ip".to_owned()];
        let key = |k: &str| canonical_key(&r, Some(&by_ip), k);
        assert_eq!(
            key("client_ip=203.0.113.7").unwrap(),
            "client_ip=203.0.113.7"
        );
        assert_eq!(
            key("client_ip=2001:DB8:0:0:1::5").unwrap(),
            "client_ip=2001:db8::/64"
        );
        assert_eq!(
            key("client_ip=2001:db8::/64").unwrap(),
            "client_ip=2001:db8::/64"
        );
        assert_eq!(
            key("client_ip=::ffff:203.0.113.7").unwrap(),
            "client_ip=203.0.113.7"
        );
        for bad in [
            "client_ip=203.0.113",
            "client_ip=2001:db8::/32",
            "203.0.113.7",
            "user=1",
        ] {
            assert!(key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn identities_are_read_in_order_and_folded() {
        let r = routing(vec![email()]);
        let names = ["email".to_owned(), "client_ip".to_owned()];
        let key = |k: &str| canonical_key(&r, Some(&names), k);
        assert_eq!(
            key("email=Ana@Example.COM&client_ip=192.0.2.1").unwrap(),
            "email=ana@example.com&client_ip=192.0.2.1"
        );
        // A caller without the e-mail is keyed by address alone.
        assert_eq!(key("client_ip=192.0.2.1").unwrap(), "client_ip=192.0.2.1");
        assert!(key("client_ip=192.0.2.1&email=a@b.c").is_err());
        assert!(key("email=a%zz&client_ip=192.0.2.1").is_err());
        assert_eq!(
            key("email=a%26b@c.d&client_ip=192.0.2.1").unwrap(),
            "email=a%26b@c.d&client_ip=192.0.2.1"
        );
    }

    #[test]
    fn a_header_value_is_text_without_whitespace_at_its_edges() {
        let r = routing(vec![IdentitySource {
            name: "api_key".into(),
            source: Source::Header(axum::http::HeaderName::from_static("x-api-key")),
            normalize: Normalize::None,
        }]);
        let names = ["api_key".to_owned()];
        let key = |k: &str| canonical_key(&r, Some(&names), k);
        assert_eq!(key("api_key=v i p").unwrap(), "api_key=v i p");
        // Requests with these are refused, so an override of them would match nothing.
        for bad in [
            "api_key= vip",
            "api_key=vip ",
            "api_key=\tvip",
            "api_key=v\u{7f}",
        ] {
            assert!(key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn decision_api_keys_are_kept_as_v1_check_keeps_them() {
        let r = routing(Vec::new());
        assert_eq!(canonical_key(&r, None, "user-42").unwrap(), "user-42");
        assert_eq!(canonical_key(&r, None, "#x").unwrap(), "##x");
        assert_eq!(canonical_key(&r, None, &"k".repeat(200)).unwrap().len(), 65);
        assert!(canonical_key(&r, None, "").is_err());
    }
}
