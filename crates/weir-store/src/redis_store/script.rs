//! The one Lua script every check runs: the algorithms, one file each, and the driver.

use std::time::Duration;

use redis::{Cmd, Script};
use weir_core::Decision;

use super::params::ScriptPolicy;
use crate::{Check, StoreError};

/// The script's source: the prelude, each algorithm, then the driver.
const SOURCE: [&str; 7] = [
    include_str!("lua/prelude.lua"),
    include_str!("lua/fixed_window.lua"),
    include_str!("lua/sliding_window.lua"),
    include_str!("lua/sliding_log.lua"),
    include_str!("lua/token_bucket.lua"),
    include_str!("lua/gcra.lua"),
    include_str!("lua/driver.lua"),
];

/// Values returned per check.
const FIELDS: usize = 5;

/// The script, its source and SHA1 computed once.
pub(super) struct CheckScript {
    source: String,
    hash: String,
}

impl CheckScript {
    pub(super) fn new() -> Self {
        let source = SOURCE.join("\n");
        let hash = Script::new(&source).get_hash().to_owned();
        Self { source, hash }
    }

    /// `EVALSHA` of the script with `keys` and `args`.
    pub(super) fn evalsha(&self, keys: &[String], args: &[String]) -> Cmd {
        let mut command = redis::cmd("EVALSHA");
        command.arg(&self.hash).arg(keys.len()).arg(keys).arg(args);
        command
    }

    /// `EVAL` of the script's source, for when Redis has lost it (`NOSCRIPT`, after a
    /// restart or `SCRIPT FLUSH`): it runs the script and caches it again in one step,
    /// so a flush between loading and running cannot fail a check.
    pub(super) fn eval(&self, keys: &[String], args: &[String]) -> Cmd {
        let mut command = redis::cmd("EVAL");
        command
            .arg(&self.source)
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        command
    }
}

/// What the script does with its checks (the driver's `ARGV[2]`).
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
}

impl Mode {
    fn argument(self) -> &'static str {
        match self {
            Mode::Preview => "0",
            Mode::Commit => "1",
            Mode::Refund => "2",
            Mode::Refused => "3",
        }
    }
}

/// The arguments for `checks`: the time, the mode, then seven per check.
pub(super) fn arguments(
    now_us: Option<u64>,
    mode: Mode,
    checks: &[(Check<'_>, ScriptPolicy)],
) -> Vec<String> {
    let mut args = Vec::with_capacity(2 + 7 * checks.len());
    args.push(now_us.map_or_else(String::new, |now| now.to_string()));
    args.push(mode.argument().to_owned());
    for (check, p) in checks {
        args.push(p.algorithm.to_owned());
        args.push(check.cost.to_string());
        args.push(p.limit.to_string());
        args.push(p.capacity.to_string());
        args.push(p.period_us.to_string());
        args.push(p.ticks_per_us.to_string());
        args.push(p.ticks_per_unit.to_string());
    }
    args
}

/// Reads the script's reply into one decision per check.
pub(super) fn decisions(
    reply: &[i64],
    checks: &[(Check<'_>, ScriptPolicy)],
) -> Result<Vec<Decision>, StoreError> {
    if reply.len() != 1 + FIELDS * checks.len() {
        return Err(StoreError::Protocol(format!(
            "the script returned {} values for {} checks",
            reply.len(),
            checks.len()
        )));
    }
    let micros = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
    Ok(reply[1..]
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
