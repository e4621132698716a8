//! `lists:` (global, and in a rule): the clients who skip the rules and those refused,
//! by address block and by API key.
//!
//! ```yaml
//! lists:
//!   allow: { client_ip: [10.0.0.0/8], api_keys_file: keys/internal.txt }
//!   deny:  { client_ip: [203.0.113.0/24] }
//! ```
//!
//! Checked at load: every block parses (an address alone is its own block), no block
//! is given twice (IPv4-mapped IPv6 blocks are their IPv4 block, so `::ffff:10.0.0.0/104`
//! repeats `10.0.0.0/8`), the keys file is readable, each key in it once (after the
//! identity's normalisation), and the identity it is read by exists.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ConfigError;
use super::error::Errors;
use super::upstream::networks;
use crate::engine::{CLIENT_IP, IdentitySource, List, Lists, Normalize};
use crate::request::normalize_email;

/// The identity API keys are read by when a list does not name one.
const DEFAULT_KEY_IDENTITY: &str = "api_key";

/// The most entries (blocks and keys) one list holds: each request is matched against
/// every block of the lists that apply.
pub(crate) const MAX_LIST_ENTRIES: usize = 100_000;

/// `lists` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLists {
    allow: Option<Spanned<RawList>>,
    deny: Option<Spanned<RawList>>,
}

/// One list as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawList {
    #[serde(default)]
    client_ip: Vec<Spanned<String>>,
    api_keys_file: Option<Spanned<String>>,
    identity: Option<Spanned<String>>,
}

/// The API keys files the lists of `raw` read (global and the rules'), to watch.
pub(super) fn files(raw: &super::file::RawConfig, errors: &Errors<'_>) -> Vec<PathBuf> {
    let rules = raw.rules.iter().filter_map(|r| r.lists.as_ref());
    raw.lists
        .iter()
        .chain(rules)
        .flat_map(|l| [&l.value.allow, &l.value.deny])
        .flatten()
        .filter_map(|list| list.value.api_keys_file.as_ref())
        .map(|file| errors.resolve(&file.value))
        .collect()
}

/// The lists of `raw`, named `field` in errors (`lists`, or `rules[2].lists`).
pub(super) fn lists(
    raw: &Spanned<RawLists>,
    field: &str,
    identities: &HashMap<String, IdentitySource>,
    errors: &Errors<'_>,
) -> Result<Lists, ConfigError> {
    let list = |raw: &Option<Spanned<RawList>>, name: &str| match raw {
        Some(raw) => list(raw, &format!("{field}.{name}"), identities, errors),
        None => Ok(List::default()),
    };
    Ok(Lists {
        allow: list(&raw.value.allow, "allow")?,
        deny: list(&raw.value.deny, "deny")?,
    })
}

fn list(
    raw: &Spanned<RawList>,
    field: &str,
    identities: &HashMap<String, IdentitySource>,
    errors: &Errors<'_>,
) -> Result<List, ConfigError> {
    let r = &raw.value;
    let ip_field = format!("{field}.client_ip");
    let nets = networks(&r.client_ip, &ip_field, errors)?;
    let mut seen = HashMap::new();
    for (i, net) in nets.iter().enumerate() {
        if let Some(first) = seen.insert(net.trunc(), i) {
            return Err(errors.at(
                r.client_ip[i].referenced,
                format!("{ip_field}[{i}]"),
                format!(
                    "`{}` is given twice (as {ip_field}[{first}] too; IPv4-mapped blocks are their IPv4 block)",
                    r.client_ip[i].value
                ),
            ));
        }
    }
    let nets: Vec<_> = nets.into_iter().map(|net| net.trunc()).collect();
    if r.identity.is_some() && r.api_keys_file.is_none() {
        let at = r.identity.as_ref().map_or(raw.referenced, |i| i.referenced);
        return Err(errors.at(
            at,
            format!("{field}.identity"),
            "`identity` names how the keys of `api_keys_file` are read: give `api_keys_file` too",
        ));
    }
    let (keys, identity) = match &r.api_keys_file {
        None => (HashSet::new(), None),
        Some(file) => {
            let (name, at) = match &r.identity {
                Some(identity) => (identity.value.as_str(), identity.referenced),
                None => (DEFAULT_KEY_IDENTITY, file.referenced),
            };
            let source = identities
                .get(name)
                .filter(|_| name != CLIENT_IP)
                .ok_or_else(|| {
                    errors.at(
                        at,
                        format!("{field}.identity"),
                        format!(
                            "no identity is named `{name}` to read the API keys of `api_keys_file` by (see `identities:`; the default is `{DEFAULT_KEY_IDENTITY}`)"
                        ),
                    )
                })?;
            let keys_field = format!("{field}.api_keys_file");
            let bytes = errors.read(file.referenced, &keys_field, &file.value)?;
            let keys = keys_of(&bytes, source.normalize)
                .map_err(|why| errors.at(file.referenced, &keys_field, why))?;
            (keys, Some(name.to_owned()))
        }
    };
    if nets.len() + keys.len() > MAX_LIST_ENTRIES {
        return Err(errors.at(
            raw.referenced,
            field,
            format!("a list holds at most {MAX_LIST_ENTRIES} blocks and keys"),
        ));
    }
    Ok(List {
        nets,
        keys,
        identity,
    })
}

/// The keys of a keys file: one per line, blank lines and lines starting with `#`
/// skipped, spaces around a key trimmed, normalised as the identity normalises.
fn keys_of(bytes: &[u8], normalize: Normalize) -> Result<HashSet<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_owned())?;
    let mut keys = HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = match normalize {
            Normalize::None => line.to_owned(),
            Normalize::Email => normalize_email(line)
                .map_err(|_| format!("line {}: nothing but invisible characters", n + 1))?,
        };
        if !keys.insert(key) {
            return Err(format!(
                "line {}: the key is listed twice (after normalisation)",
                n + 1
            ));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_one_a_line_and_given_once() {
        let keys = keys_of(b"# internal\nk1\n\n  k2  \n", Normalize::None).unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys.contains("k2"));
        let twice = keys_of(b"k1\nk1\n", Normalize::None).unwrap_err();
        assert_eq!(
            twice,
            "line 2: the key is listed twice (after normalisation)"
        );
        let spelled = keys_of(b"Ana@X.io\nana@x.io\n", Normalize::Email).unwrap_err();
        assert!(spelled.starts_with("line 2"), "{spelled}");
        assert!(keys_of(&[0xff], Normalize::None).is_err());
    }
}
