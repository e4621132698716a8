//! The descriptor limits of envoyproxy/ratelimit's configuration, as a tree per domain,
//! and the lookup that service makes: the most specific match wins.
//!
//! A request descriptor is a list of entries (`key`, `value`). Each entry is looked up
//! one level deeper: first `key_value` exactly, then the level's wildcard values in
//! file order (`*` matches any run of characters, anywhere in the value), then `key`
//! alone (a value-less descriptor: the default for its key). A limit applies only when
//! the request's last entry lands on a descriptor that has one; the walk stops early
//! where a descriptor has no children. A matched descriptor without a limit (and no
//! children) whitelists. These are the semantics of that service's `GetLimit`, to the
//! letter, so that its configuration files mean the same here.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use compact_str::CompactString;
use weir_core::{Algorithm, Policy};
use weir_store::LeasePlan;

use super::also::AlsoLimit;
use super::should_rate_limit::RULE;
use crate::engine::OnLimited;

/// A unit of envoyproxy/ratelimit's `rate_limit`: the length of its fixed windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days, as envoyproxy/ratelimit counts a month.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// The unit named in a configuration file, in any case (`second`, `MINUTE`), as
    /// envoyproxy/ratelimit reads it.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "SECOND" => Self::Second,
            "MINUTE" => Self::Minute,
            "HOUR" => Self::Hour,
            "DAY" => Self::Day,
            "WEEK" => Self::Week,
            "MONTH" => Self::Month,
            "YEAR" => Self::Year,
            _ => return None,
        })
    }

    /// The window's length.
    pub(crate) fn period(self) -> Duration {
        let day = 86_400;
        Duration::from_secs(match self {
            Self::Second => 1,
            Self::Minute => 60,
            Self::Hour => 3_600,
            Self::Day => day,
            Self::Week => 7 * day,
            Self::Month => 30 * day,
            Self::Year => 365 * day,
        })
    }
}

/// How many requests a limit lets through per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quota {
    /// `unlimited: true`: always OK, never counted.
    Unlimited,
    /// `requests_per_unit: 0` (or none given): every request that adds a hit is over.
    Zero,
    /// A fixed window of `requests_per_unit` per `unit`, aligned to the Unix epoch as
    /// envoyproxy/ratelimit's windows are.
    Counted(Policy),
}

/// One descriptor's `rate_limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescriptorLimit {
    /// `requests_per_unit` as written (reported back as `current_limit`).
    pub requests_per_unit: u32,
    /// Its `unit` (`Second` for an unlimited one, which has none).
    pub unit: Unit,
    /// What is decided.
    pub quota: Quota,
    /// `name`: what other limits' `replaces` refer to.
    pub name: Option<String>,
    /// `replaces`: the names of limits this one stands in for when both match.
    pub replaces: Vec<String>,
    /// `shadow_mode`: counted and reported, never over the limit.
    pub shadow_mode: bool,
    /// `x-weir: { failure }`: whether, when the store cannot decide, this limit is
    /// decided on the instance's local fallback (`Some(true)`) or the call answered
    /// `UNAVAILABLE` (`Some(false)`); `None` as the `envoy` section says.
    pub fail_open: Option<bool>,
    /// `x-weir: { also }`: more limits on the descriptor, counted beside this one; the
    /// descriptor is over when any of them is.
    pub also: Vec<AlsoLimit>,
    /// The rule the counters are kept under in the store: [`RULE`], or one of the
    /// descriptor's own when it is leased (the leasing store leases by rule).
    pub rule: Cow<'static, str>,
    /// `x-weir: { lease }`: how its keys are leased on a shared store.
    pub lease: Option<LeasePlan>,
    /// `quota_mode`: over its limit, the descriptor fails the request only when every
    /// quota descriptor of the request is over (its status says over all the same).
    pub quota_mode: bool,
    /// `x-weir: { on_limited }`: bans for the values it denies again and again (the
    /// limit is named: its bans are listed and lifted by the name).
    pub on_limited: Option<OnLimited>,
}

impl DescriptorLimit {
    /// A counted limit of `requests_per_unit` per `unit` (a zero limits everything).
    /// Above weir's largest limit (a billion), the limit counted is that: envoyproxy/
    /// ratelimit takes any 32-bit number, often the largest as "unlimited", and such a
    /// limit must not become a zero that denies everything.
    pub(crate) fn counted(requests_per_unit: u32, unit: Unit) -> Self {
        let quota = Policy::new(
            Algorithm::FixedWindow,
            u64::from(requests_per_unit).min(weir_core::MAX_LIMIT),
            unit.period(),
            None,
        )
        .map_or(Quota::Zero, Quota::Counted);
        Self {
            requests_per_unit,
            unit,
            quota,
            name: None,
            replaces: Vec::new(),
            shadow_mode: false,
            fail_open: None,
            also: Vec::new(),
            rule: Cow::Borrowed(RULE),
            lease: None,
            quota_mode: false,
            on_limited: None,
        }
    }

    /// Its counted limits, each with the rule its counter is kept under: its own
    /// (when counted), then `also`'s.
    pub(crate) fn counters(&self) -> impl Iterator<Item = (&Policy, &str)> {
        let own = match &self.quota {
            Quota::Counted(policy) => Some((policy, &*self.rule)),
            _ => None,
        };
        own.into_iter()
            .chain(self.also.iter().map(|a| (&a.policy, a.rule.as_str())))
    }

    /// An `unlimited: true` limit.
    pub(crate) fn unlimited() -> Self {
        Self {
            quota: Quota::Unlimited,
            ..Self::counted(0, Unit::Second)
        }
    }
}

/// The hasher of the tree's maps, looked up several times on every `ShouldRateLimit`:
/// foldhash, several times quicker than SipHash on short keys, and seeded.
type Seeded = foldhash::fast::RandomState;

/// Where a descriptor is in a [`Descriptors`] tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeId(usize);

#[derive(Debug, Clone, Default)]
struct Node {
    /// Children by `key_value`, or `key` for a value-less one (wildcards included).
    children: HashMap<String, usize, Seeded>,
    /// Children whose value has a `*`, in file order: the pattern split on `*`, and
    /// the child.
    wildcards: Vec<(Vec<String>, usize)>,
    limit: Option<DescriptorLimit>,
    /// `share_threshold`: the wildcard value (`files/*`) every value it matches is
    /// counted as.
    shared: Option<String>,
}

/// Why a descriptor cannot be added: envoyproxy/ratelimit refuses the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TreeError {
    /// A second file for one domain.
    #[error(
        "duplicate domain `{0}`: each domain is configured in one file (unless `merge_domains: true` in the `envoy` section)"
    )]
    DuplicateDomain(String),
    /// Two descriptors with the same key and value at one level.
    #[error("duplicate descriptor composite key `{0}`")]
    DuplicateKey(String),
    /// Two limits with bans of one name: the name addresses one limit's bans.
    #[error(
        "two descriptor limits with `on_limited` are named `{0}`: the name says whose bans are listed and lifted, so each needs a name of its own"
    )]
    BanNameTaken(String),
}

/// Every domain's descriptors: what envoyproxy/ratelimit's configuration directory
/// describes, and the options of weir's `envoy:` section.
#[derive(Debug, Clone, Default)]
pub(crate) struct Descriptors {
    domains: HashMap<String, usize, Seeded>,
    nodes: Vec<Node>,
    /// Decide a request's descriptors all-or-nothing: when one is over the limit, the
    /// others consume nothing (weir's way). Off: each descriptor is charged on its
    /// own, as envoyproxy/ratelimit does.
    pub all_or_nothing: bool,
    /// Global shadow mode: every answer is OK (the statuses still say what was over).
    pub shadow_mode: bool,
    /// Add `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` for the
    /// descriptor closest to its limit to the response headers Envoy sends.
    pub response_headers: bool,
    /// While a shared store cannot decide, decide on this instance's local fallback,
    /// each limit divided by `fallback_instances` (rounded up), rather than answer
    /// `UNAVAILABLE`.
    pub fail_open: bool,
    /// The instances that share the traffic (the store's `fallback_instances`).
    pub fallback_instances: u64,
    /// Every descriptor (but an unlimited one) is a quota descriptor, as
    /// envoyproxy/ratelimit's `QUOTA_MODE`: a request is over the limit only when every
    /// descriptor is.
    pub quota_mode: bool,
    /// A domain may be configured over several files (envoyproxy/ratelimit's
    /// `MERGE_DOMAIN_CONFIG`): a second file of a domain adds to it.
    pub merge_domains: bool,
    /// The key of the entries carrying the client's address (`caller.address`).
    pub caller_address: String,
    /// The key of the entries carrying the caller's API key (`caller.api_key`), if any.
    pub caller_api_key: Option<String>,
    /// The named limits with bans (`x-weir: { on_limited }`), by name.
    bans: Vec<(String, OnLimited)>,
}

impl Descriptors {
    /// How many domains are configured.
    pub(crate) fn domains(&self) -> usize {
        self.domains.len()
    }

    /// Whether `domain` is configured.
    pub(crate) fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// Starts a domain's tree.
    pub(crate) fn add_domain(&mut self, domain: &str) -> Result<NodeId, TreeError> {
        if let Some(&root) = self.domains.get(domain) {
            return match self.merge_domains {
                true => Ok(NodeId(root)),
                false => Err(TreeError::DuplicateDomain(domain.to_owned())),
            };
        }
        let id = self.push(None);
        self.domains.insert(domain.to_owned(), id.0);
        Ok(id)
    }

    /// Adds a descriptor under `parent`: `key` with `value` (none or empty: the
    /// default for the key; with `*`: a wildcard), and its limit if it has one.
    /// `path` names the parent in an error (`domain.key_value.`).
    pub(crate) fn add(
        &mut self,
        parent: NodeId,
        path: &str,
        key: &str,
        value: Option<&str>,
        limit: Option<DescriptorLimit>,
    ) -> Result<NodeId, TreeError> {
        let composite = match value {
            Some(value) if !value.is_empty() => format!("{key}_{value}"),
            _ => key.to_owned(),
        };
        if self.nodes[parent.0].children.contains_key(&composite) {
            return Err(TreeError::DuplicateKey(format!("{path}{composite}")));
        }
        let id = self.push(limit);
        let node = &mut self.nodes[parent.0];
        if composite.contains('*') {
            let parts = composite.split('*').map(str::to_owned).collect();
            node.wildcards.push((parts, id.0));
        }
        node.children.insert(composite, id.0);
        Ok(id)
    }

    /// Records that the limit named `name` has bans `on`: refused if another has the
    /// name.
    pub(crate) fn add_ban(&mut self, name: &str, on: OnLimited) -> Result<(), TreeError> {
        if self.bans.iter().any(|(n, _)| n == name) {
            return Err(TreeError::BanNameTaken(name.to_owned()));
        }
        self.bans.push((name.to_owned(), on));
        Ok(())
    }

    /// The named limits with bans, and their bans (for the admin API).
    pub(crate) fn bans(&self) -> &[(String, OnLimited)] {
        &self.bans
    }

    /// Every descriptor's limit.
    pub(crate) fn limits(&self) -> impl Iterator<Item = &DescriptorLimit> {
        self.nodes.iter().filter_map(|node| node.limit.as_ref())
    }

    /// The leased rules of the descriptors, and their plans (for the leasing store).
    pub(crate) fn leases(&self) -> impl Iterator<Item = (&str, LeasePlan)> {
        self.nodes
            .iter()
            .filter_map(|node| node.limit.as_ref())
            .filter_map(|limit| Some((limit, limit.lease?)))
            .flat_map(|(limit, plan)| limit.counters().map(move |(_, rule)| (rule, plan)))
    }

    fn push(&mut self, limit: Option<DescriptorLimit>) -> NodeId {
        self.nodes.push(Node {
            limit,
            ..Node::default()
        });
        NodeId(self.nodes.len() - 1)
    }

    /// Marks `node`, a wildcard descriptor of `value`, `share_threshold`: every value
    /// it matches is counted as one.
    pub(crate) fn share(&mut self, node: NodeId, value: &str) {
        self.nodes[node.0].shared = Some(value.to_owned());
    }

    #[cfg(test)]
    /// The limit for a request descriptor's entries in `domain`: none for an unknown
    /// domain, no match, or a match without a limit.
    pub(crate) fn lookup<'e>(
        &self,
        domain: &str,
        entries: impl ExactSizeIterator<Item = (&'e str, &'e str)>,
    ) -> Option<&DescriptorLimit> {
        self.find(domain, entries).map(|(limit, _)| limit)
    }

    /// [`Descriptors::lookup`], with the entries matched by a `share_threshold`
    /// wildcard: their places, and the wildcard value each is counted as.
    pub(crate) fn find<'e>(
        &self,
        domain: &str,
        entries: impl ExactSizeIterator<Item = (&'e str, &'e str)>,
    ) -> Option<(&DescriptorLimit, Vec<(usize, &str)>)> {
        let mut at = *self.domains.get(domain)?;
        let last = entries.len().checked_sub(1)?;
        let mut found = None;
        let mut shared = Vec::new();
        // Inline up to 24 bytes: a usual entry's `key_value` costs no allocation.
        let mut composite = CompactString::default();
        for (i, (key, value)) in entries.enumerate() {
            let node = &self.nodes[at];
            composite.clear();
            composite.reserve(key.len() + 1 + value.len());
            composite.push_str(key);
            composite.push('_');
            composite.push_str(value);
            let exact = node.children.get(composite.as_str()).copied();
            let wildcard = || {
                node.wildcards
                    .iter()
                    .find(|(parts, _)| wildcard_match(parts, &composite))
                    .map(|&(_, child)| child)
            };
            let (next, by_wildcard) = match exact {
                Some(next) => (Some(next), false),
                None => match wildcard() {
                    Some(next) => (Some(next), true),
                    None => (node.children.get(key).copied(), false),
                },
            };
            let Some(next) = next else { break };
            let child = &self.nodes[next];
            if let Some(pattern) = child.shared.as_deref().filter(|_| by_wildcard) {
                shared.push((i, pattern));
            }
            if i == last {
                found = child.limit.as_ref();
            }
            if child.children.is_empty() {
                break;
            }
            at = next;
        }
        found.map(|limit| (limit, shared))
    }
}

/// Whether `value` matches a pattern split on `*` (each `*` any run of characters).
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|only| only == value);
    };
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

impl Quota {
    /// This quota divided among `instances` (rounded up): an instance's share while
    /// the shared store is down.
    pub(crate) fn share(self, instances: u64) -> Self {
        match self {
            Quota::Counted(policy) if instances > 1 => Policy::new(
                policy.algorithm(),
                policy.limit().div_ceil(instances),
                policy.period(),
                None,
            )
            .map_or(Quota::Zero, Quota::Counted),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pattern: &str) -> Vec<String> {
        pattern.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn wildcards_match_anywhere() {
        let cases = [
            ("path_/foo*", "path_/foo/bar", true),
            ("path_/foo*", "path_/fo", false),
            ("path_bar*baz*qux", "path_bar1baz2qux", true),
            ("path_bar*baz*qux", "path_barbazqux", true),
            ("path_bar*baz*qux", "path_barqux", false),
            ("path_a*a", "path_a", false),
            ("path_*", "path_", true),
            ("exact", "exact", true),
        ];
        for (pattern, value, want) in cases {
            assert_eq!(
                wildcard_match(&split(pattern), value),
                want,
                "{pattern} {value}"
            );
        }
    }

    fn tree() -> Descriptors {
        let mut set = Descriptors::default();
        let domain = set.add_domain("d").unwrap();
        let k1 = set.add(domain, "d.", "key1", None, None).unwrap();
        set.add(
            k1,
            "d.key1.",
            "subkey",
            None,
            Some(DescriptorLimit::counted(5, Unit::Second)),
        )
        .unwrap();
        let limited = DescriptorLimit::counted(10, Unit::Minute);
        set.add(domain, "d.", "key2", Some("value2"), Some(limited))
            .unwrap();
        set.add(
            domain,
            "d.",
            "key2",
            None,
            Some(DescriptorLimit::counted(20, Unit::Hour)),
        )
        .unwrap();
        set.add(
            domain,
            "d.",
            "key2",
            Some("v*"),
            Some(DescriptorLimit::counted(30, Unit::Day)),
        )
        .unwrap();
        set.add(domain, "d.", "open", None, None).unwrap();
        set
    }

    fn limit_of(set: &Descriptors, domain: &str, entries: &[(&str, &str)]) -> Option<u32> {
        set.lookup(domain, entries.iter().copied())
            .map(|l| l.requests_per_unit)
    }

    #[test]
    fn the_most_specific_match_wins() {
        let set = tree();
        assert_eq!(limit_of(&set, "d", &[("key2", "value2")]), Some(10));
        assert_eq!(limit_of(&set, "d", &[("key2", "vx")]), Some(30));
        assert_eq!(limit_of(&set, "d", &[("key2", "other")]), Some(20));
        assert_eq!(
            limit_of(&set, "d", &[("key1", "a"), ("subkey", "b")]),
            Some(5)
        );
        // The request's depth must be the limit's.
        assert_eq!(limit_of(&set, "d", &[("key1", "a")]), None);
        assert_eq!(limit_of(&set, "d", &[("key2", "value2"), ("x", "y")]), None);
        assert_eq!(limit_of(&set, "d", &[("open", "x")]), None);
        assert_eq!(limit_of(&set, "d", &[]), None);
        assert_eq!(limit_of(&set, "unknown", &[("key2", "value2")]), None);
    }

    #[test]
    fn duplicates_are_refused() {
        let mut set = tree();
        assert_eq!(
            set.add_domain("d"),
            Err(TreeError::DuplicateDomain("d".into()))
        );
        let domain = NodeId(0);
        assert_eq!(
            set.add(domain, "d.", "key2", Some("value2"), None),
            Err(TreeError::DuplicateKey("d.key2_value2".into()))
        );
        // An empty value is no value.
        assert_eq!(
            set.add(domain, "d.", "key2", Some(""), None),
            Err(TreeError::DuplicateKey("d.key2".into()))
        );
    }

    #[test]
    fn a_shared_wildcard_is_reported_only_when_matched_through() {
        let mut set = Descriptors::default();
        let domain = set.add_domain("d").unwrap();
        let limit = || Some(DescriptorLimit::counted(1, Unit::Second));
        let shared = set.add(domain, "d.", "f", Some("a*"), limit()).unwrap();
        set.share(shared, "a*");
        set.add(domain, "d.", "f", Some("ab"), limit()).unwrap();
        let found = |value| set.find("d", [("f", value)].into_iter()).map(|(_, s)| s);
        assert_eq!(found("ax"), Some(vec![(0, "a*")]));
        // The exact value wins, and is counted as itself.
        assert_eq!(found("ab"), Some(vec![]));
        assert_eq!(found("b"), None);
    }

    #[test]
    fn merged_domains_add_to_the_first_file() {
        let mut set = tree();
        set.merge_domains = true;
        let again = set.add_domain("d").unwrap();
        set.add(
            again,
            "d.",
            "more",
            None,
            Some(DescriptorLimit::counted(7, Unit::Day)),
        )
        .unwrap();
        assert_eq!(limit_of(&set, "d", &[("more", "x")]), Some(7));
        assert_eq!(limit_of(&set, "d", &[("key2", "value2")]), Some(10));
        assert_eq!(
            set.add(again, "d.", "more", None, None),
            Err(TreeError::DuplicateKey("d.more".into()))
        );
    }

    #[test]
    fn a_zero_limit_limits_everything() {
        assert_eq!(DescriptorLimit::counted(0, Unit::Second).quota, Quota::Zero);
        assert!(matches!(
            DescriptorLimit::counted(1, Unit::Year).quota,
            Quota::Counted(_)
        ));
    }
}
