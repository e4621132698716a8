//! How a check reaches Redis: an `FCALL` of weir's Functions library where Redis has
//! Functions (7 and later), else the script by `EVALSHA`.
//!
//! Which one is learnt once: when Redis answers that `FUNCTION` or `FCALL` is an unknown
//! command (Redis 6), or refuses them to this user (ACL), checks go by script from then
//! on. A Redis that lost the library (a restart without persistence, `FUNCTION FLUSH`,
//! a promoted replica that never had it) answers `Function not found`: the library is
//! loaded again and the call repeated once; if it is lost again in between, the check
//! runs by `EVAL`, which needs nothing loaded, so a flush never fails a check.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value};
use weir_core::Decision;

use super::args::{self, Mode};
use super::lease::LeaseCall;
use super::library::Library;
use super::params::ScriptPolicy;
use super::script::CheckScript;
use super::share::ShareCall;
use super::{RedisStore, classify};
use crate::{Check, StoreError};

/// What one call of the Lua does: checks in a mode, a lease's take or give-back, or a
/// step of a regional share's rebalance.
pub(super) enum Call<'c> {
    /// The driver's checks.
    Checks(Mode, &'c [(Check<'c>, ScriptPolicy)]),
    /// A take or a give-back (lease.lua) on one key under one policy.
    Lease(&'c ScriptPolicy, &'c LeaseCall),
    /// A region's report or apply, or a renewal at home (share.lua).
    Share(&'c ScriptPolicy, &'c ShareCall),
    /// A settlement written once: how many of the checks are refunds (the first ones;
    /// the rest are charges), and the checks (driver.lua's `settle`).
    Settle(usize, &'c [(Check<'c>, ScriptPolicy)]),
}

impl Call<'_> {
    /// The general entry's arguments for this call.
    pub(super) fn general_args(&self, command: &mut Cmd, now_us: Option<u64>) {
        match self {
            Call::Checks(mode, checks) => args::general(command, now_us, *mode, checks),
            Call::Lease(policy, lease) => lease.args(command, now_us, policy),
            Call::Share(policy, share) => share.args(command, now_us, policy),
            Call::Settle(refunds, checks) => args::settle(command, now_us, *refunds, checks),
        }
    }
}

/// weir's Lua in both forms, and which one checks use.
pub(super) struct Lua {
    script: CheckScript,
    library: Library,
    /// Whether checks call the library: until Redis turns out to lack Functions, or
    /// scripts are asked for.
    functions: AtomicBool,
}

/// Whether the log has said that checks run as Functions, and as scripts: once per
/// process (the start's admission check, the store itself and a region's peers each
/// learn it).
static SAID_FUNCTIONS: AtomicBool = AtomicBool::new(false);
static SAID_SCRIPTS: AtomicBool = AtomicBool::new(false);

impl Lua {
    pub(super) fn new() -> Self {
        Self {
            script: CheckScript::new(),
            library: Library::new(),
            functions: AtomicBool::new(true),
        }
    }

    /// From now on, checks go by script.
    pub(super) fn use_scripts(&self) {
        self.functions.store(false, Ordering::Relaxed);
    }

    /// Redis lacks Functions or refuses them to this user: checks go by script from
    /// now on, which the log says once (a managed service's ACL decides the mode, and
    /// its operator wants to know which one it got).
    fn fall_back_to_scripts(&self) {
        if self.functions.swap(false, Ordering::Relaxed)
            && !SAID_SCRIPTS.swap(true, Ordering::Relaxed)
        {
            tracing::info!(
                "Redis has no Functions, or the ACL user may not use them: checks run as scripts (EVALSHA)"
            );
        }
    }

    /// The library loaded: the log says once that checks run as Functions.
    fn announce_functions(&self) {
        if !SAID_FUNCTIONS.swap(true, Ordering::Relaxed) {
            tracing::info!("checks run as weir's Redis Functions library (FCALL)");
        }
    }

    fn functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }
}

/// Redis's answer, and whether it came from a one-check entry (five values, without
/// the general entry's leading all-passed flag).
type Reply = Result<(Value, bool), RedisError>;

impl RedisStore {
    /// Runs `checks`, whose Redis keys are `keys` (one slot, or one server), once in
    /// `mode`, and reads their decisions.
    pub(super) async fn execute(
        &self,
        keys: &[String],
        checks: &[(Check<'_>, ScriptPolicy)],
        now_us: Option<u64>,
        mode: Mode,
    ) -> Result<Vec<Decision>, StoreError> {
        let (values, single) = self.call(keys, now_us, &Call::Checks(mode, checks)).await?;
        let fields = if single {
            &values[..]
        } else {
            values.get(1..).unwrap_or_default()
        };
        args::decisions(fields, checks)
    }

    /// Runs `call` once on `keys` (one slot, or one server), by function or by script;
    /// returns its integers, and whether a one-check entry answered (five values, without
    /// the general entry's leading all-passed flag).
    pub(super) async fn call(
        &self,
        keys: &[String],
        now_us: Option<u64>,
        call: &Call<'_>,
    ) -> Result<(Vec<i64>, bool), StoreError> {
        if let Some(key) = keys.first() {
            self.refuse_lost(key)?;
        }
        let reply = if self.lua.functions() {
            self.by_function(keys, now_us, call).await?
        } else {
            self.by_script(keys, now_us, call)
                .await?
                .map(|v| (v, false))
        };
        let (value, single) = reply.map_err(classify)?;
        let values: Vec<i64> =
            redis::from_redis_value(value).map_err(|e| StoreError::Protocol(e.to_string()))?;
        Ok((values, single))
    }

    /// Loads the library on a new connection, or learns that Redis has no Functions.
    /// Loading here only spares the first checks a reload: a failure is left to them.
    pub(super) async fn prepare(&self) {
        if !self.lua.functions() {
            return;
        }
        match self.query(&self.lua.library.load()).await {
            Ok(Err(e)) if lacks_functions(&e) => self.lua.fall_back_to_scripts(),
            Ok(Err(error)) => {
                tracing::debug!(%error, "could not load weir's Redis Functions library")
            }
            Ok(Ok(_)) => self.lua.announce_functions(),
            Err(_) => {}
        }
    }

    /// `FCALL`; on `Function not found`, loads the library and calls once more; if it
    /// is still (or again) missing, or cannot be loaded, `EVAL` of the script.
    async fn by_function(
        &self,
        keys: &[String],
        now_us: Option<u64>,
        call: &Call<'_>,
    ) -> Result<Reply, StoreError> {
        let (fcall, single) = self.lua.library.fcall(keys, now_us, call);
        match self.query(&fcall).await? {
            Err(e) if missing_function(&e) => {}
            Err(e) if lacks_functions(&e) => {
                self.lua.fall_back_to_scripts();
                let reply = self.by_script(keys, now_us, call).await?;
                return Ok(reply.map(|v| (v, false)));
            }
            reply => return Ok(reply.map(|v| (v, single))),
        }
        match self.query(&self.lua.library.load()).await? {
            Ok(_) => match self.query(&fcall).await? {
                Err(e) if missing_function(&e) => {}
                reply => return Ok(reply.map(|v| (v, single))),
            },
            Err(e) if lacks_functions(&e) => self.lua.fall_back_to_scripts(),
            Err(error) => {
                tracing::debug!(%error, "could not load weir's Redis Functions library; checking by script");
            }
        }
        let eval = self.lua.script.eval(keys, now_us, call);
        Ok(self.query(&eval).await?.map(|v| (v, false)))
    }

    /// `EVALSHA`, and `EVAL` when Redis has lost the script.
    async fn by_script(
        &self,
        keys: &[String],
        now_us: Option<u64>,
        call: &Call<'_>,
    ) -> Result<Result<Value, RedisError>, StoreError> {
        let evalsha = self.lua.script.evalsha(keys, now_us, call);
        match self.query(&evalsha).await? {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let eval = self.lua.script.eval(keys, now_us, call);
                self.query(&eval).await
            }
            reply => Ok(reply),
        }
    }
}

/// Whether Redis answered that a function does not exist: it lost the library.
fn missing_function(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// Whether Redis has no Functions (`FCALL` and `FUNCTION` are unknown commands before
/// Redis 7) or refuses them to this user.
fn lacks_functions(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::NoPerm)
        || error.code() == Some("ERR")
            && error
                .detail()
                .is_some_and(|d| d.starts_with("unknown command"))
}
