//! A rule's `lease`: `auto`, or `{ batch: N, hold: DURATION }`; and why a rule may not
//! be leased.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};
use weir_core::Policy;
use weir_store::{Batch, LeasePlan};

use super::file::RawRule;
use super::period::Period;

/// The shortest hold: a lease must outlive the take's round trip by a margin.
pub(super) const MIN_HOLD: Duration = Duration::from_millis(100);
/// The longest hold: what a crashed instance's units may stay out of use.
pub(super) const MAX_HOLD: Duration = Duration::from_secs(600);

/// `lease` as written.
#[derive(Debug)]
pub(super) enum RawLease {
    Auto,
    Fixed(RawFixedLease),
}

/// `lease: { batch, hold }`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFixedLease {
    batch: u64,
    hold: Period,
}

impl<'de> Deserialize<'de> for RawLease {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = RawLease;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`auto` or `{ batch: N, hold: DURATION }`")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawLease, E> {
                match text {
                    "auto" => Ok(RawLease::Auto),
                    other => Err(E::custom(format!(
                        "`{}` is not a lease: write `auto` or `{{ batch: N, hold: DURATION }}`",
                        other.escape_debug()
                    ))),
                }
            }
            fn visit_map<M: de::MapAccess<'de>>(self, map: M) -> Result<RawLease, M::Error> {
                RawFixedLease::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawLease::Fixed)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The lease plan of `raw` under `policy`, or why it cannot be leased.
pub(super) fn lease_plan(raw: &RawRule, policy: &Policy) -> Result<Option<LeasePlan>, String> {
    let Some(lease) = &raw.lease else {
        return Ok(None);
    };
    weir_core::leasable(policy).map_err(|e| e.to_string())?;
    let abuse = [
        (!raw.count_statuses.is_empty(), "count_statuses"),
        (!raw.reset_statuses.is_empty(), "reset_statuses"),
        (raw.lockout.is_some(), "lockout"),
        (raw.on_limited.is_some(), "on_limited"),
    ];
    if let Some((_, field)) = abuse.iter().find(|(present, _)| *present) {
        return Err(format!(
            "a rule with `{field}` is never leased: an abuse-critical limit (counted by outcome, reset on success, locked out) must see every attempt on the shared store at once, not from units an instance holds"
        ));
    }
    plan(&lease.value, policy).map(Some)
}

/// The lease plan of `lease` under `policy` (a rule's, or an Envoy descriptor's
/// limit), or why it cannot be leased.
pub(super) fn plan(lease: &RawLease, policy: &Policy) -> Result<LeasePlan, String> {
    weir_core::leasable(policy).map_err(|e| e.to_string())?;
    Ok(match lease {
        RawLease::Auto => LeasePlan::auto(),
        RawLease::Fixed(fixed) => {
            let capacity = policy.capacity();
            if fixed.batch == 0 || fixed.batch > capacity {
                return Err(format!(
                    "lease.batch must be from 1 to the rule's capacity ({capacity}: its burst, or its limit)"
                ));
            }
            let hold = fixed.hold.0;
            if !(MIN_HOLD..=MAX_HOLD).contains(&hold) {
                return Err("lease.hold must be from 100ms to 10m".to_owned());
            }
            LeasePlan {
                batch: Batch::Fixed(fixed.batch),
                hold,
            }
        }
    })
}
