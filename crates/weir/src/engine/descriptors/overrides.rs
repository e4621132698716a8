//! Overrides on named Envoy descriptor limits: `weir override set <name> <key>` (and
//! the admin API) for the descriptor limit whose `rate_limit.name` is `<name>`, as for
//! a rule. The key is the descriptor as its counter is kept: the domain, then each
//! entry, joined by `|` (`edge|remote_address=203.0.113.7|path=/login`), with `\`, `|`
//! and `=` in a domain, key or value escaped by a `\`.
//!
//! A key is read back into the domain and entries and looked up as Envoy's request
//! would be: it must reach the limit named (a key that reaches no limit, or another,
//! is refused), and is kept as that request's counter is (a value a `share_threshold`
//! wildcard matches as the wildcard), so that an override holds exactly for the
//! budget it names, however the key was spelt. An override changes the limit's own
//! `requests_per_unit` (its algorithm kept), not its `x-weir: { also }` limits.

use std::borrow::Cow;

use super::should_rate_limit::identity;
use super::{DescriptorLimit, Descriptors, Quota};
use crate::engine::{Engine, key};

/// A descriptor's limit, if one applies.
type Applied<'l> = Option<Cow<'l, DescriptorLimit>>;

/// The limit named `name`, among the counted ones: `Ok(None)` when none is, `Err` with
/// how many are when several are (an override would not say which).
pub(crate) fn named<'d>(
    limits: &'d Descriptors,
    name: &str,
) -> Result<Option<&'d DescriptorLimit>, usize> {
    let mut found = limits
        .limits()
        .filter(|l| l.name.as_deref() == Some(name) && matches!(l.quota, Quota::Counted(_)));
    let first = found.next();
    match found.count() {
        0 => Ok(first),
        more => Err(more + 1),
    }
}

/// The canonical key of `key`, written for the limit `limit` (named `name`), or what
/// is wrong with it.
pub(crate) fn descriptor_key(
    limits: &Descriptors,
    name: &str,
    limit: &DescriptorLimit,
    key: &str,
) -> Result<String, String> {
    let parts = split(key, '|')?;
    let (domain, entries) = parts.split_first().ok_or("the key is empty")?;
    let entries: Vec<(String, String)> = entries
        .iter()
        .map(|entry| {
            let pair = split(entry, '=')?;
            match pair.as_slice() {
                [key, value] if !key.is_empty() => Ok((key.clone(), value.clone())),
                _ => Err(format!(
                    "`{}` is not `key=value` (a key is written `domain|key=value|key=value`, with `\\`, `|` and `=` escaped by a `\\`)",
                    entry.escape_debug()
                )),
            }
        })
        .collect::<Result<_, String>>()?;
    let borrowed: Vec<(&str, &str)> = entries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let found = limits.find(domain, borrowed.iter().copied());
    match found {
        Some((reached, shared)) if std::ptr::eq(reached, limit) => {
            Ok(key::stored_form(&identity(domain, &borrowed, &shared)).into_owned())
        }
        _ => Err(format!(
            "`{}` does not reach the descriptor limit `{name}`: a key is the domain and the request's entries, `domain|key=value|...`",
            key.escape_debug()
        )),
    }
}

/// `text` split at each `at` not escaped by a `\`, the escapes read (`\\`, `\|`, `\=`
/// only: any other is not a key weir makes).
fn split(text: &str, at: char) -> Result<Vec<String>, String> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | '|' | '=')) => {
                    // Kept escaped for a later split, read at the last.
                    if at == '|' {
                        parts.last_mut().into_iter().for_each(|p| {
                            p.push('\\');
                            p.push(escaped);
                        });
                    } else if let Some(p) = parts.last_mut() {
                        p.push(escaped);
                    }
                }
                _ => {
                    return Err(format!(
                        "`{}`: in a key, only `\\\\`, `\\|` and `\\=` are escapes",
                        text.escape_debug()
                    ));
                }
            },
            c if c == at => parts.push(String::new()),
            c => {
                if let Some(p) = parts.last_mut() {
                    p.push(c);
                }
            }
        }
    }
    if at == '|' {
        // The domain is read now; the entries at their own split.
        if let Some(domain) = parts.first_mut() {
            *domain = split(domain, '=')?.join("=");
        }
    }
    Ok(parts)
}

impl Engine {
    /// Puts in each limit's place the override in force for its key, if its name has one (not a
    /// rule's name: a rule's overrides are its own; not a leased limit, whose
    /// leases are planned for its own limit).
    pub(super) fn descriptor_overrides(&self, applied: &mut [Applied<'_>], keys: &[String]) {
        for (limit, key) in applied.iter_mut().zip(keys) {
            let Some(l) = limit.as_deref() else {
                continue;
            };
            let (Some(name), Quota::Counted(base)) = (&l.name, l.quota) else {
                continue;
            };
            if l.lease.is_some() || self.rule(name).is_some() {
                continue;
            }
            if let Some(policy) = self.overrides.policy(name, key, &base) {
                let mut owned = l.clone();
                owned.quota = Quota::Counted(policy);
                owned.requests_per_unit = u32::try_from(policy.limit()).unwrap_or(u32::MAX);
                *limit = Some(Cow::Owned(owned));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn escapes_are_read_once() {
        assert_eq!(split("d|k=v", '|').unwrap(), ["d", "k=v"]);
        assert_eq!(split(r"d\|x|k=v", '|').unwrap(), ["d|x", "k=v"]);
        assert_eq!(split(r"k\=1=v\\", '=').unwrap(), ["k=1", r"v\"]);
        // An escaped `|` in an entry is kept for the entry's own split.
        assert_eq!(split(r"d|k=a\|b", '|').unwrap(), ["d", r"k=a\|b"]);
        assert_eq!(split(r"k=a\|b", '=').unwrap(), ["k", "a|b"]);
        assert!(split(r"d|k=\x", '|').is_err());
    }
}
