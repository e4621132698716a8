//! weir's Lua: the algorithms, one file each, and the driver, sent as one script
//! (`EVALSHA`, with `EVAL` when Redis has lost it). The path for a Redis without
//! Functions (before 7), and the last resort of the Functions path (see `dispatch`).

use redis::{Cmd, Script};

use super::dispatch::Call;

/// The definitions shared by the script and the Functions library: the prelude, each
/// algorithm, the regional shares (an algorithm and three operations), the driver, which defines `check(keys, argv)`, then the leases, which it
/// calls for two of its modes.
pub(super) const BODY: [&str; 9] = [
    include_str!("lua/prelude.lua"),
    include_str!("lua/fixed_window.lua"),
    include_str!("lua/sliding_window.lua"),
    include_str!("lua/sliding_log.lua"),
    include_str!("lua/token_bucket.lua"),
    include_str!("lua/gcra.lua"),
    include_str!("lua/share.lua"),
    include_str!("lua/driver.lua"),
    include_str!("lua/lease.lua"),
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

    /// `EVALSHA` of the script for `call`, whose Redis keys are `keys`.
    pub(super) fn evalsha(&self, keys: &[String], now_us: Option<u64>, call: &Call<'_>) -> Cmd {
        Self::command("EVALSHA", &self.hash, keys, now_us, call)
    }

    /// `EVAL` of the script's source, for when Redis has lost it (`NOSCRIPT`, after a
    /// restart or `SCRIPT FLUSH`): it runs the script and caches it again in one step,
    /// so a flush between loading and running cannot fail a check.
    pub(super) fn eval(&self, keys: &[String], now_us: Option<u64>, call: &Call<'_>) -> Cmd {
        Self::command("EVAL", &self.source, keys, now_us, call)
    }

    fn command(
        name: &str,
        script: &str,
        keys: &[String],
        now_us: Option<u64>,
        call: &Call<'_>,
    ) -> Cmd {
        let mut command = redis::cmd(name);
        command.arg(script).arg(keys.len()).arg(keys);
        call.general_args(&mut command, now_us);
        command
    }
}
