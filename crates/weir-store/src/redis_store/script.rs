//! weir's Lua: the algorithms, one file each, and the driver, sent as one script
//! (`EVALSHA`, with `EVAL` when Redis has lost it). The path for a Redis without
//! Functions (before 7), and the last resort of the Functions path (see `dispatch`).

use redis::{Cmd, Script};

use super::args::{self, Mode};
use super::params::ScriptPolicy;
use crate::Check;

/// The definitions shared by the script and the Functions library: the prelude, each
/// algorithm, then the driver, which defines `check(keys, argv)`.
pub(super) const BODY: [&str; 7] = [
    include_str!("lua/prelude.lua"),
    include_str!("lua/fixed_window.lua"),
    include_str!("lua/sliding_window.lua"),
    include_str!("lua/sliding_log.lua"),
    include_str!("lua/token_bucket.lua"),
    include_str!("lua/gcra.lua"),
    include_str!("lua/driver.lua"),
];

/// The script, its source and SHA1 computed once.
pub(super) struct CheckScript {
    source: String,
    hash: String,
}

impl CheckScript {
    pub(super) fn new() -> Self {
        let source = format!("{}\nreturn check(KEYS, ARGV)\n", BODY.join("\n"));
        let hash = Script::new(&source).get_hash().to_owned();
        Self { source, hash }
    }

    /// `EVALSHA` of the script on `checks`, whose Redis keys are `keys`.
    pub(super) fn evalsha(
        &self,
        keys: &[String],
        now_us: Option<u64>,
        mode: Mode,
        checks: &[(Check<'_>, ScriptPolicy)],
    ) -> Cmd {
        Self::command("EVALSHA", &self.hash, keys, now_us, mode, checks)
    }

    /// `EVAL` of the script's source, for when Redis has lost it (`NOSCRIPT`, after a
    /// restart or `SCRIPT FLUSH`): it runs the script and caches it again in one step,
    /// so a flush between loading and running cannot fail a check.
    pub(super) fn eval(
        &self,
        keys: &[String],
        now_us: Option<u64>,
        mode: Mode,
        checks: &[(Check<'_>, ScriptPolicy)],
    ) -> Cmd {
        Self::command("EVAL", &self.source, keys, now_us, mode, checks)
    }

    fn command(
        name: &str,
        script: &str,
        keys: &[String],
        now_us: Option<u64>,
        mode: Mode,
        checks: &[(Check<'_>, ScriptPolicy)],
    ) -> Cmd {
        let mut command = redis::cmd(name);
        command.arg(script).arg(keys.len()).arg(keys);
        args::general(&mut command, now_us, mode, checks);
        command
    }
}
