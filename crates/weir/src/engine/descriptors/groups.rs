//! How a request's counted limits are grouped into store calls, and how its overall
//! code follows from the statuses with quota mode (envoyproxy/ratelimit's
//! `quota_mode`: a quota descriptor over its limit fails the request only when every
//! quota descriptor of the request is over).

use super::{DescriptorAnswer, DescriptorLimit, Descriptors, Quota};

/// A group of a request's descriptors decided in one store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Group {
    /// Every descriptor, each charged on its own (`all_or_nothing` off).
    All,
    /// Quota descriptors (`all_or_nothing` on): each charged on its own, first, since
    /// whether the request is denied depends on them all.
    Quota,
    /// The enforcing descriptors (`all_or_nothing` on), charged together.
    Enforcing,
    /// Shadow descriptors (`all_or_nothing` on), charged together, apart from the
    /// others so that they never hold them back.
    Shadow,
}

/// How the checks of a group are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Charge {
    /// All or nothing: one over, none consumed.
    Together,
    /// Each within its limit charged; each over filled, as envoyproxy/ratelimit counts
    /// hits past the limit.
    EachFilled,
    /// Each within its limit charged; the ones over consume nothing.
    Each,
}

impl Group {
    /// The groups of a request, in the order decided.
    pub(super) fn order(limits: &Descriptors) -> &'static [Group] {
        match limits.all_or_nothing {
            true => &[Group::Quota, Group::Enforcing, Group::Shadow],
            false => &[Group::All],
        }
    }

    /// The group of a descriptor's limit.
    pub(super) fn of(limits: &Descriptors, limit: &DescriptorLimit) -> Group {
        match () {
            _ if !limits.all_or_nothing => Group::All,
            _ if is_quota(limits, Some(limit)) => Group::Quota,
            _ if limit.shadow_mode => Group::Shadow,
            _ => Group::Enforcing,
        }
    }

    /// How its checks are charged.
    pub(super) fn charge(self) -> Charge {
        match self {
            Group::All => Charge::EachFilled,
            Group::Quota => Charge::Each,
            Group::Enforcing | Group::Shadow => Charge::Together,
        }
    }
}

/// Whether a descriptor with `limit` (none: no limit applies) is a quota descriptor:
/// every one but an unlimited one under the section's `quota_mode`, else one whose
/// limit says `quota_mode` (as envoyproxy/ratelimit counts them).
pub(super) fn is_quota(limits: &Descriptors, limit: Option<&DescriptorLimit>) -> bool {
    match limit {
        Some(limit) if limit.quota == Quota::Unlimited => false,
        Some(limit) => limits.quota_mode || limit.quota_mode,
        None => limits.quota_mode,
    }
}

/// Whether a request is over the limit (before global shadow mode): a descriptor
/// that is not a quota descriptor is over, or there are quota descriptors and every
/// one is over.
pub(super) fn over_limit<'a>(
    limits: &Descriptors,
    answered: impl Iterator<Item = (Option<&'a DescriptorLimit>, &'a DescriptorAnswer)>,
) -> bool {
    let (mut quotas, mut quotas_over) = (0, 0);
    for (limit, status) in answered {
        if is_quota(limits, limit) {
            quotas += 1;
            quotas_over += usize::from(status.over_limit);
        } else if status.over_limit {
            return true;
        }
    }
    quotas > 0 && quotas == quotas_over
}
