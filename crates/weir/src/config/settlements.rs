//! The `settlements` section: how many settlements (the refunds and charges of
//! answered requests) an instance keeps owed while the shared store cannot take them.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::{ConfigError, Errors};
use crate::engine::DEFAULT_MAX_OWED;

/// The most `max_owed` may be (a few hundred bytes each: some GB).
const MAX_MAX_OWED: usize = 10_000_000;

/// The section as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSettlements {
    /// The most settlements kept owed at once; past it the oldest are given up.
    pub(super) max_owed: Option<Spanned<usize>>,
}

/// `settlements.max_owed`, or its default; only with a shared store (the memory store
/// never owes one).
pub(super) fn max_owed(
    raw: Option<&Spanned<RawSettlements>>,
    on_redis: bool,
    errors: &Errors<'_>,
) -> Result<usize, ConfigError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_MAX_OWED);
    };
    if !on_redis {
        return Err(errors.at(
            raw.referenced,
            "settlements",
            "`settlements` applies to a shared store (type redis or redis_cluster): the memory store writes every settlement at once",
        ));
    }
    match &raw.value.max_owed {
        None => Ok(DEFAULT_MAX_OWED),
        Some(max) if (1..=MAX_MAX_OWED).contains(&max.value) => Ok(max.value),
        Some(max) => Err(errors.at(
            max.referenced,
            "settlements.max_owed",
            format!("max_owed must be a whole number from 1 to {MAX_MAX_OWED}"),
        )),
    }
}
