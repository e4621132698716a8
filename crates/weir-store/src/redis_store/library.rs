//! weir's Lua as a Redis Functions library (Redis 7): `FUNCTION LOAD` once, then each
//! check is an `FCALL` that runs only its entry point, where a script would define
//! every algorithm again on each call.
//!
//! The library and its functions are named after a hash of the source
//! (`weir_<hash>`, `weir_<hash>_gcra`...), so that instances of different weir versions
//! sharing one Redis each call their own code, loaded side by side (an old version's
//! library stays until `FUNCTION DELETE weir_<hash>`; each holds the whole source, tens
//! of kilobytes). Entry points: one per algorithm for the common shape, one check on
//! one key committed (and one for a fixed window kept in per-window counters, see
//! `counter`); and the general one (the driver's `check`) for every other shape
//! and mode. `FLUSHALL` and `SCRIPT FLUSH` keep functions, and `FUNCTION LOAD` reaches
//! replicas; a restart without persistence or `FUNCTION FLUSH` drops them, and the next
//! call loads them again (see `dispatch`).

use redis::{Cmd, Script};
use weir_core::Algorithm;

use super::args::{self, Mode};
use super::dispatch::Call;
use super::params::{CALENDAR, COUNTER};
use super::script::BODY;

/// The library: its source, as `FUNCTION LOAD` takes it, and its functions' names.
pub(super) struct Library {
    source: String,
    /// The general entry point; also the library's name.
    general: String,
    /// The one-check entry point of each way of deciding (see `ScriptPolicy::lua_name`).
    single: Vec<(&'static str, String)>,
}

impl Library {
    pub(super) fn new() -> Self {
        let body = format!("{}\n{}", BODY.join("\n"), include_str!("lua/library.lua"));
        let hash = Script::new(&body).get_hash()[..12].to_owned();
        let general = format!("weir_{hash}");
        let source = format!("#!lua name={general}\n{body}\nregister('{general}')\n");
        let single = Algorithm::ALL
            .iter()
            .map(|a| a.name())
            .chain([COUNTER, CALENDAR])
            .map(|name| (name, format!("{general}_{name}")))
            .collect();
        Self {
            source,
            general,
            single,
        }
    }

    /// `FUNCTION LOAD REPLACE` of the library (on a cluster, the client sends it to
    /// every primary).
    pub(super) fn load(&self) -> Cmd {
        let mut command = redis::cmd("FUNCTION");
        command.arg("LOAD").arg("REPLACE").arg(&self.source);
        command
    }

    /// The `FCALL` for `call`, whose Redis keys are `keys`: the algorithm's own entry
    /// for one committed check, else the general one. Returns the command and whether
    /// it is the one-check entry (whose reply has no leading all-passed flag).
    pub(super) fn fcall(
        &self,
        keys: &[String],
        now_us: Option<u64>,
        call: &Call<'_>,
    ) -> (Cmd, bool) {
        let mut command = redis::cmd("FCALL");
        if let Call::Checks(Mode::Commit, [check]) = call
            && let Some((_, name)) = self.single.iter().find(|(n, _)| *n == check.1.lua_name())
        {
            command.arg(name).arg(1).arg(keys);
            args::single(&mut command, now_us, check);
            return (command, true);
        }
        command.arg(&self.general).arg(keys.len()).arg(keys);
        call.general_args(&mut command, now_us);
        (command, false)
    }
}
