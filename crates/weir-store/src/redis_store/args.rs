//! What a call sends to the Lua and what it reads back: integers written as integers
//! (no string built per argument), and five integers per decision.

use std::time::Duration;

use redis::Cmd;
use weir_core::Decision;

use super::params::ScriptPolicy;
use crate::{Check, StoreError};

/// Values returned per check.
const FIELDS: usize = 5;

/// What the general entry does with its checks (the driver's `argv[2]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Decides, writes nothing.
    Preview,
    /// Decides all-or-nothing and writes the outcome.
    Commit,
    /// Gives each check's cost back; each check reports a peek after it.
    Refund,
    /// Decides as a commit that another check denied: writes nothing, and the checks
    /// that pass report their unchanged state.
    Refused,
    /// Takes each check's cost past the limit (a debt); each reports a peek after it.
    Charge,
    /// Gives back the first checks' costs and charges the rest, at most once per
    /// settlement id (see [`settle`]).
    Settle,
}

impl Mode {
    fn argument(self) -> u8 {
        match self {
            Mode::Preview => 0,
            Mode::Commit => 1,
            Mode::Refund => 2,
            Mode::Refused => 3,
            Mode::Charge => 9,
            Mode::Settle => 10,
        }
    }
}

/// The time: microseconds since the epoch, or `""` for the server's `TIME`.
fn time(command: &mut Cmd, now_us: Option<u64>) {
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
}

/// The general entry's arguments: the time, the mode, then seven per check.
pub(super) fn general(
    command: &mut Cmd,
    now_us: Option<u64>,
    mode: Mode,
    checks: &[(Check<'_>, ScriptPolicy)],
) {
    time(command, now_us);
    command.arg(mode.argument());
    for (check, p) in checks {
        // A region's share takes its floor in L's place (see ScriptPolicy).
        let (l, per_unit) = match p.region_floor {
            Some(floor) => (floor, 0),
            None => (p.ticks_per_us, p.ticks_per_unit),
        };
        command
            .arg(p.lua_name())
            .arg(check.cost)
            .arg(p.limit)
            .arg(p.capacity)
            .arg(p.period_arg())
            .arg(l)
            .arg(per_unit);
    }
}

/// A settlement's arguments: the general entry's in [`Mode::Settle`], then how many
/// of `checks` are refunds (the first ones) and how long its id is remembered.
pub(super) fn settle(
    command: &mut Cmd,
    now_us: Option<u64>,
    refunds: usize,
    checks: &[(Check<'_>, ScriptPolicy)],
) {
    general(command, now_us, Mode::Settle, checks);
    let remembered = u64::try_from(crate::SETTLEMENTS_REMEMBERED.as_millis()).unwrap_or(u64::MAX);
    command.arg(refunds).arg(remembered);
}

/// A one-check entry's arguments: the time, the cost, then only what the algorithm
/// reads (each number costs Redis a parse): capacity, L, P for the buckets; limit and
/// period for the windows, whose capacity is their limit.
pub(super) fn single(
    command: &mut Cmd,
    now_us: Option<u64>,
    (check, p): &(Check<'_>, ScriptPolicy),
) {
    time(command, now_us);
    command.arg(check.cost);
    if p.algorithm.takes_burst() {
        command
            .arg(p.capacity)
            .arg(p.ticks_per_us)
            .arg(p.ticks_per_unit);
    } else {
        command.arg(p.limit).arg(p.period_arg());
    }
}

/// Reads one decision per check from `reply`, five values each.
pub(super) fn decisions(
    reply: &[i64],
    checks: &[(Check<'_>, ScriptPolicy)],
) -> Result<Vec<Decision>, StoreError> {
    if reply.len() != FIELDS * checks.len() {
        return Err(StoreError::Protocol(format!(
            "the script returned {} values for {} checks",
            reply.len(),
            checks.len()
        )));
    }
    let micros = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
    Ok(reply
        .chunks_exact(FIELDS)
        .zip(checks)
        .map(|(f, (_, p))| Decision {
            allowed: f[0] == 1,
            limit: p.limit,
            remaining: u64::try_from(f[1]).unwrap_or(0),
            reset_after: micros(f[2]),
            retry_after: (f[3] >= 0 && f[0] != 1).then(|| micros(f[3])),
            delay: micros(f[4]),
        })
        .collect())
}
