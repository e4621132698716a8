//! The Redis store: one limit shared by every weir instance, on Redis or Redis Cluster.
//!
//! Each check (or group of layered checks) is one call of weir's Lua that reads the
//! state, decides, writes the new state and sets its expiry, atomically; a refund is
//! the same call in another mode. On Redis 7 the Lua is a Functions library loaded
//! once, called by `FCALL` (one lean entry point per algorithm for one check); on
//! Redis 6 it is one script by `EVALSHA` (see `dispatch`). The Lua decides exactly as
//! weir-core does (see `params`), which the conformance suite checks by replaying the
//! same sequences through both. On a Redis Cluster, layered checks of several
//! identities span several slots and run as one call per identity (see
//! `RedisStore::run_groups`).
//!
//! Connections: one multiplexed connection per node (concurrent checks are pipelined
//! on it); every check is bounded by the configured timeout. A store made by
//! [`RedisStore::start`] runs a health loop (see [`StoreHealth`]): it connects, probes
//! with `PING` (every primary of a cluster) when the store is idle or a check failed,
//! and while the store is lost probes every 100-250 ms, each time on a fresh connection
//! when the current one fails. A fresh cluster connection reads the topology again from
//! the seed nodes, so a primary that failed over or moved is found without traffic.

mod access;
mod args;
mod connect;
mod counter;
mod dispatch;
mod keys;
mod lease;
mod ledger;
mod library;
mod link;
mod params;
mod probe;
mod script;
mod sentinel;
mod server_name;
mod settle;
mod share;
mod slots;
mod switches;
mod table;

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value};
use weir_core::{Algorithm, Clock, Decision, Grant, LeaseId, Policy, Take};

pub use self::access::{
    ClientIdentity, Credentials, RedisAccess, RedisTls, Secret, check_certificates, check_identity,
    check_redis_url, redacted,
};
use self::args::Mode;
use self::connect::{first_connect_within, open};
use self::dispatch::Lua;
pub use self::keys::hash_slot;
pub use self::ledger::LedgerPage;
use self::params::ScriptPolicy;
pub use self::params::{RedisPolicyError, check_redis_policy};
use self::probe::watch;
pub use self::server_name::{CLUSTER_REFUSAL, check_server_name};
pub use self::table::TableSnapshot;
use crate::{
    Check, Key, LeaseStore, Settled, ShareStore, SlotStore, SlotTake, SlotsFree, Store, StoreError,
    StoreFuture, StoreHealth,
};

/// Where the Redis store's state lives. Its `Debug` hides a password written in a
/// URL (`redis://:<redacted>@host`).
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis server, e.g. `redis://127.0.0.1:6379`.
    Single(String),
    /// A Redis Cluster, from seed nodes.
    Cluster(Vec<String>),
    /// The primary that Redis Sentinel names.
    Sentinel {
        /// The sentinels' URLs, asked in turn.
        sentinels: Vec<String>,
        /// The name the sentinels monitor the primary by.
        master: String,
        /// The sentinels' own ACL user and password, apart from the data nodes'
        /// (`access`); none: each sentinel's URL's. Sentinels take `access`'s TLS.
        credentials: Credentials,
    },
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisTarget::Single(url) => f
                .debug_tuple("Single")
                .field(&access::redacted(url))
                .finish(),
            RedisTarget::Cluster(urls) => f
                .debug_tuple("Cluster")
                .field(&urls.iter().map(|u| access::redacted(u)).collect::<Vec<_>>())
                .finish(),
            RedisTarget::Sentinel {
                sentinels,
                master,
                credentials,
            } => f
                .debug_struct("Sentinel")
                .field(
                    "sentinels",
                    &sentinels
                        .iter()
                        .map(|u| access::redacted(u))
                        .collect::<Vec<_>>(),
                )
                .field("master", master)
                .field("credentials", credentials)
                .finish(),
        }
    }
}

/// Whose clock decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisClock {
    /// The Redis server's `TIME`, read inside the script: one clock per key, so clock
    /// skew between weir instances cannot over-admit (the default).
    #[default]
    Server,
    /// The weir instance's clock, passed to the script.
    Local,
}

/// Configuration of a [`RedisStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisStoreConfig {
    /// The server or cluster.
    pub target: RedisTarget,
    /// Prepended to every key: `<prefix>:{<identity>}:<rule>` (and
    /// `<prefix>:{<identity>}w<n>:<rule>` for window counters).
    pub key_prefix: String,
    /// The longest a check may take, connecting included.
    pub timeout: Duration,
    /// Whose clock decides.
    pub clock: RedisClock,
    /// With [`RedisClock::Local`]: keep each fixed window in a counter per window and
    /// check one unit by `INCRBY` rather than by Lua (envoyproxy/ratelimit's way and
    /// cost; see `counter` for what changes). Ignored on the server's clock.
    pub window_counters: bool,
    /// TLS and credentials.
    pub access: RedisAccess,
}

#[derive(Clone)]
enum Connection {
    Single(link::Link),
    Cluster(ClusterConnection),
}

/// Limit state in Redis, shared by every instance that points at it.
pub struct RedisStore {
    /// The current connection, once one is made; the health loop replaces it when it
    /// fails.
    connection: ArcSwapOption<Connection>,
    health: Arc<StoreHealth>,
    config: RedisStoreConfig,
    lua: Lua,
    prefix: String,
    timeout: Duration,
    clock: Option<Arc<dyn Clock>>,
    /// The instance's clock, whichever clock decides: it places a check in its
    /// calendar window (see `ScriptPolicy::on_calendar`).
    instance_clock: Arc<dyn Clock>,
    /// The health loop's own links to a cluster's nodes (none for a single server).
    nodes: Option<probe::NodeLinks>,
    /// A cluster's primaries as the current connection was made with them.
    topology: parking_lot::Mutex<Vec<probe::Primary>>,
    /// The URL of the server the current connection is to (for Sentinel, the primary
    /// the sentinels named).
    primary: parking_lot::Mutex<String>,
    /// The slots of requests in flight this store holds, renewed while held.
    slots: slots::Held,
    /// Connections to the sentinels (of a Sentinel target), kept between asks.
    sentinels: sentinel::SentinelLinks,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the configured server or cluster, failing if it cannot within the
    /// timeout (at least a second). `clock` is used only with [`RedisClock::Local`].
    /// The store has no health loop: its connection reconnects on its own when a check
    /// is sent (what tests and benchmarks need); a service uses [`RedisStore::start`].
    pub async fn connect(
        config: &RedisStoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let store = Self::unconnected(config, clock, true);
        let (connection, primary) =
            open(config, &store.sentinels, first_connect_within(config)).await?;
        *store.primary.lock() = primary;
        store.connection.store(Some(Arc::new(connection)));
        store.prepare().await;
        Ok(store)
    }

    /// A store that connects in the background and then watches the server (its
    /// health loop, see the module's doc) until the store is dropped; until the first
    /// connection every check fails with [`StoreError::Unavailable`] (and the caller
    /// applies its failure policy). Lets a service start, and serve, while Redis is
    /// down. Call inside a Tokio runtime.
    pub fn start(config: &RedisStoreConfig, clock: Arc<dyn Clock>) -> Arc<Self> {
        let store = Arc::new(Self::unconnected(config, clock, false));
        tokio::spawn(watch(Arc::downgrade(&store), store.health()));
        tokio::spawn(slots::renew(Arc::downgrade(&store)));
        if let RedisTarget::Sentinel {
            sentinels,
            master,
            credentials,
        } = &config.target
        {
            for sentinel in sentinels {
                tokio::spawn(switches::watch(
                    Arc::downgrade(&store),
                    sentinel.clone(),
                    master.clone(),
                    config.access.with(credentials),
                    store.timeout,
                ));
            }
        }
        store
    }

    /// What the health loop sees (for a store made by [`RedisStore::connect`]: up).
    pub fn health(&self) -> Arc<StoreHealth> {
        Arc::clone(&self.health)
    }

    /// Sends checks as scripts (`EVALSHA`), as to a Redis without Functions, even where
    /// Redis has them: for comparing the two paths, which decide alike.
    pub fn use_scripts(&self) {
        self.lua.use_scripts();
    }

    /// Waits until the store is reachable, for at most `within`; returns whether it
    /// is.
    pub async fn wait_connected(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while !self.health.is_up() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    fn unconnected(config: &RedisStoreConfig, clock: Arc<dyn Clock>, up: bool) -> Self {
        Self {
            connection: ArcSwapOption::empty(),
            health: Arc::new(StoreHealth::new(up)),
            config: config.clone(),
            lua: Lua::new(),
            prefix: config.key_prefix.clone(),
            timeout: config.timeout,
            clock: (config.clock == RedisClock::Local).then_some(clock.clone()),
            instance_clock: clock,
            nodes: match &config.target {
                RedisTarget::Cluster(urls) => Some(probe::NodeLinks::new(urls, &config.access)),
                RedisTarget::Single(_) | RedisTarget::Sentinel { .. } => None,
            },
            topology: parking_lot::Mutex::default(),
            primary: parking_lot::Mutex::default(),
            slots: slots::Held::default(),
            sentinels: sentinel::SentinelLinks::default(),
        }
    }

    /// Runs `checks` in `mode`: one script, or one per identity on a cluster when they
    /// have several.
    async fn run(&self, checks: &[Check<'_>], mode: Mode) -> Result<Vec<Decision>, StoreError> {
        let now_us = self.now_us();
        let counter_time = self.counter_time(now_us);
        let prepared = checks
            .iter()
            .map(|c| Ok((*c, self.script_policy(c.policy, counter_time)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        if matches!(self.config.target, RedisTarget::Cluster(_))
            && checks
                .iter()
                .any(|c| c.key.identity != checks[0].key.identity)
        {
            return self.run_groups(&prepared, now_us, mode).await;
        }
        self.run_script(&prepared, now_us, mode).await
    }

    /// The numbers the scripts take for `policy`, its window placed by `counter_time`
    /// (see [`RedisStore::counter_time`]) and a calendar's by the instance's clock.
    fn script_policy(
        &self,
        policy: &Policy,
        counter_time: Option<u64>,
    ) -> Result<ScriptPolicy, StoreError> {
        let script = ScriptPolicy::new(policy)?.at(counter_time);
        Ok(match policy.calendar() {
            Some(_) => script.on_calendar(policy, self.instance_clock.now()),
            None => script,
        })
    }

    /// The instances' time in microseconds, or `None` on the server's clock.
    fn now_us(&self) -> Option<u64> {
        self.clock.as_ref().map(|clock| clock.now() / 1_000)
    }

    /// The time that places fixed windows in counters, when they are kept so.
    fn counter_time(&self, now_us: Option<u64>) -> Option<u64> {
        now_us.filter(|_| self.config.window_counters)
    }

    /// Runs the Lua once on `checks`, whose keys share one slot (or one server); one
    /// unit of a fixed window kept in counters goes by `INCRBY` instead (see `counter`).
    async fn run_script(
        &self,
        checks: &[(Check<'_>, ScriptPolicy)],
        now_us: Option<u64>,
        mode: Mode,
    ) -> Result<Vec<Decision>, StoreError> {
        let keys: Vec<String> = checks
            .iter()
            .map(|(c, p)| keys::redis_key(&self.prefix, c.key, p.key_window()))
            .collect();
        if let ([(check, policy)], Mode::Commit, Some(now)) = (checks, mode, now_us)
            && counter::applies(check, policy)
        {
            return Ok(vec![self.count(&keys[0], policy, now).await?]);
        }
        self.execute(&keys, checks, now_us, mode).await
    }

    /// Checks of several identities on a Redis Cluster. The keys of one identity share
    /// its hash tag, so one slot: the checks run as one group per identity, one script
    /// each, one group after another, and the decisions keep the order of `checks`.
    ///
    /// A preview or a refund runs each group on its own. A commit runs each group
    /// all-or-nothing; when one denies, every group already committed is given back
    /// (one refund script each) and the groups not reached are decided without writing,
    /// so the answer is the single server's: nothing consumed, and the checks that pass
    /// report their state as it was (read back after the refund).
    ///
    /// The bound, against one server deciding all the checks at once: it never admits
    /// more (a refund gives back what its commit took, exactly for the bucket
    /// algorithms; for the window algorithms, see `weir_core::refund`, exact unless a
    /// window boundary or another request on the key falls in the milliseconds between
    /// commit and refund). While a refund is pending, a concurrent request may see a
    /// lower budget and be denied. A crash or timeout between commit and refund leaves
    /// the units consumed until they expire, which fails safe: a refund that fails is
    /// logged and the denial stands; a commit that fails gives back the groups before
    /// it and returns its error.
    async fn run_groups(
        &self,
        checks: &[(Check<'_>, ScriptPolicy)],
        now_us: Option<u64>,
        mode: Mode,
    ) -> Result<Vec<Decision>, StoreError> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, (check, _)) in checks.iter().enumerate() {
            match groups
                .iter_mut()
                .find(|g| checks[g[0]].0.key.identity == check.key.identity)
            {
                Some(group) => group.push(i),
                None => groups.push(vec![i]),
            }
        }
        let part = |group: &[usize]| group.iter().map(|&i| checks[i]).collect::<Vec<_>>();
        let mut decisions: Vec<Option<Decision>> = vec![None; checks.len()];
        let mut place = |group: &[usize], decided: Vec<Decision>| {
            for (&i, d) in group.iter().zip(decided) {
                decisions[i] = Some(d);
            }
        };
        for (n, group) in groups.iter().enumerate() {
            let decided = match self.run_script(&part(group), now_us, mode).await {
                Ok(decided) => decided,
                Err(error) => {
                    if mode == Mode::Commit {
                        self.give_back(&groups[..n], &part, now_us).await;
                    }
                    return Err(error);
                }
            };
            let denied = mode == Mode::Commit && !decided.iter().all(|d| d.allowed);
            place(group, decided);
            if denied {
                for (earlier, after) in groups[..n]
                    .iter()
                    .zip(self.give_back(&groups[..n], &part, now_us).await)
                {
                    // Where the refund failed, the commit's decisions stay: true, as
                    // those units stay consumed.
                    if let Some(after) = after {
                        place(earlier, after);
                    }
                }
                for later in &groups[n + 1..] {
                    place(
                        later,
                        self.run_script(&part(later), now_us, Mode::Refused).await?,
                    );
                }
                break;
            }
        }
        decisions
            .into_iter()
            .map(|d| d.ok_or_else(|| StoreError::Protocol("a check was not decided".into())))
            .collect()
    }

    /// Refunds committed `groups` (one script each); returns what each group's checks
    /// report after it, or `None` where the refund failed (logged: the units stay
    /// consumed until they expire).
    async fn give_back<'c>(
        &self,
        groups: &[Vec<usize>],
        part: &impl Fn(&[usize]) -> Vec<(Check<'c>, ScriptPolicy)>,
        now_us: Option<u64>,
    ) -> Vec<Option<Vec<Decision>>> {
        let mut after = Vec::with_capacity(groups.len());
        for group in groups {
            let refunded = self.run_script(&part(group), now_us, Mode::Refund).await;
            after.push(refunded.map_err(|error| {
                tracing::warn!(%error, "could not give back a layered check's units on another slot of the cluster; they stay consumed until they expire");
            }).ok());
        }
        after
    }

    /// Sends one command within the timeout. The outer error is the timeout; the inner
    /// one is Redis's answer. Tells the health loop whether Redis answered.
    async fn query(&self, command: &Cmd) -> Result<Result<Value, RedisError>, StoreError> {
        let connection = self
            .connection
            .load()
            .as_deref()
            .cloned()
            .ok_or_else(|| StoreError::Unavailable("not connected to Redis yet".into()))?;
        let reply = send(connection, command, self.timeout).await;
        match &reply {
            Ok(Err(e)) if unreachable(e) => self.health.failed(),
            Ok(_) => self.health.answered(),
            Err(_) => self.health.failed(),
        }
        reply
    }

    /// One probe of the current connection (see `probe`), else of a fresh one, which
    /// replaces it when it passes. Returns the cluster slots whose primary did not
    /// answer, the rest of the cluster answering.
    async fn probe(&self) -> Result<Vec<RangeInclusive<u16>>, StoreError> {
        let current = self.connection.load_full();
        let within = match &current {
            Some(connection) => match self.probe_connection(connection, true).await {
                Ok(_) if self.primary_moved().await => self.timeout,
                Ok((lost, _)) => return Ok(lost),
                Err(error) => {
                    tracing::debug!(%error, "Redis probe failed; reconnecting");
                    self.timeout
                }
            },
            None => first_connect_within(&self.config),
        };
        let (fresh, primary) = open(&self.config, &self.sentinels, within).await?;
        let (lost, primaries) = self.probe_connection(&fresh, false).await?;
        self.connection.store(Some(Arc::new(fresh)));
        *self.primary.lock() = primary;
        *self.topology.lock() = primaries;
        self.prepare().await;
        Ok(lost)
    }

    /// Whether the sentinels (of a Sentinel target) now name another primary than the
    /// one the connection is to: a failover that left the old primary running, still
    /// taking writes that its demotion will discard. Sentinels that do not answer
    /// leave the connection as it is.
    async fn primary_moved(&self) -> bool {
        let RedisTarget::Sentinel {
            sentinels,
            master,
            credentials,
        } = &self.config.target
        else {
            return false;
        };
        let access = self.config.access.with(credentials);
        let asked = sentinel::primary(sentinels, master, &access, self.timeout, &self.sentinels);
        match asked.await {
            Ok(named) if named != *self.primary.lock() => {
                tracing::info!(
                    primary = %named,
                    "the sentinels name a new Redis primary; moving to it"
                );
                true
            }
            _ => false,
        }
    }

    /// Probes `connection`: a single server by `PING` and `ROLE`; a cluster by what its
    /// nodes say (`NodeLinks::view`), and then, when every primary answered, by a
    /// `PING` on `connection` itself. The `current` connection fails too when the slot
    /// map changed since it was made (a failover, a resharding), so that a fresh one
    /// learns the new map. Returns the slots lost and the cluster's primaries.
    async fn probe_connection(
        &self,
        connection: &Connection,
        current: bool,
    ) -> Result<(Vec<RangeInclusive<u16>>, Vec<probe::Primary>), StoreError> {
        let Some(nodes) = &self.nodes else {
            probe::ping_checks_connection(connection, self.timeout).await?;
            return Ok((Vec::new(), Vec::new()));
        };
        let known = self.topology.lock().clone();
        let view = nodes.view(self.timeout, &known).await?;
        if current && view.primaries != known {
            return Err(StoreError::Unavailable(
                "the cluster's slot map changed".into(),
            ));
        }
        if view.lost.is_empty() {
            probe::ping_checks_connection(connection, self.timeout).await?;
        }
        Ok((view.lost, view.primaries))
    }

    /// Refuses at once a command on `key` whose cluster slot the health loop found
    /// lost (the rest of the cluster answering), rather than wait for its timeout. On
    /// every check's path: while no slot is lost (always on a single server), one
    /// shared read, and the key is not hashed.
    fn refuse_lost(&self, key: &str) -> Result<(), StoreError> {
        match self.health.slot_lost(|| keys::hash_slot(key.as_bytes())) {
            Some(slot) => Err(StoreError::SlotLost(slot)),
            None => Ok(()),
        }
    }

    /// Deletes a key's state, and its lease records for the algorithms that lease
    /// (one slot: a cluster takes both in one `DEL`).
    async fn delete(&self, key: Key<'_>, policy: &Policy) -> Result<(), StoreError> {
        let policy = self.script_policy(policy, self.counter_time(self.now_us()))?;
        let mut command = redis::cmd("DEL");
        let state = keys::redis_key(&self.prefix, key, policy.key_window());
        self.refuse_lost(&state)?;
        if matches!(policy.algorithm, Algorithm::TokenBucket | Algorithm::Gcra) {
            command.arg(lease::records_key(&state));
        }
        command.arg(state);
        self.query(&command).await?.map(|_| ()).map_err(classify)
    }
}

/// Sends `command` within `timeout`. The outer error is the timeout; the inner one is
/// Redis's answer.
async fn send(
    connection: Connection,
    command: &Cmd,
    timeout: Duration,
) -> Result<Result<Value, RedisError>, StoreError> {
    let reply = match connection {
        Connection::Single(mut c) => {
            tokio::time::timeout(timeout, command.query_async(&mut c)).await
        }
        Connection::Cluster(mut c) => {
            tokio::time::timeout(timeout, command.query_async(&mut c)).await
        }
    };
    reply.map_err(|_| StoreError::Timeout(timeout))
}

/// Sorts a client error into what the caller acts on.
fn classify(error: RedisError) -> StoreError {
    if error.is_timeout() {
        StoreError::Unavailable(format!("timed out: {error}"))
    } else if unreachable(&error) {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Protocol(error.to_string())
    }
}

/// Whether a client error says Redis could not be reached, did not answer in time, or
/// answered that it cannot serve now: loading its data after a restart (`LOADING`), a
/// cluster missing a primary (`CLUSTERDOWN`, `TRYAGAIN`), a replica cut off from its
/// primary (`MASTERDOWN`) or one that took writes it cannot (`READONLY`, a failover in
/// progress). Those are outages, for the breaker and the rules' failure policies, not
/// faults of weir's or of the request's.
fn unreachable(error: &RedisError) -> bool {
    error.is_timeout()
        || error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || matches!(
            error.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
            )
        )
}

impl Store for RedisStore {
    fn check_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.run(checks, Mode::Commit))
    }

    fn preview_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, Vec<Decision>> {
        Box::pin(self.run(checks, Mode::Preview))
    }

    /// One refund script; on a Redis Cluster, one per identity (each atomic, not the
    /// whole call).
    fn refund_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(async move { self.run(checks, Mode::Refund).await.map(|_| ()) })
    }

    /// One charge script; on a Redis Cluster, one per identity.
    fn charge_all<'a>(&'a self, checks: &'a [Check<'a>]) -> StoreFuture<'a, ()> {
        Box::pin(async move { self.run(checks, Mode::Charge).await.map(|_| ()) })
    }

    /// One script per slot (see `settle`), remembering `id` beside the keys.
    fn settle_all<'a>(
        &'a self,
        id: u128,
        refunds: &'a [Check<'a>],
        charges: &'a [Check<'a>],
    ) -> StoreFuture<'a, Settled> {
        Box::pin(self.settle(id, refunds, charges))
    }

    fn reset<'a>(&'a self, key: Key<'a>, policy: &'a Policy) -> StoreFuture<'a, ()> {
        Box::pin(self.delete(key, policy))
    }

    /// Whether the health loop finds all of Redis up (always, without one: see
    /// [`RedisStore::connect`]).
    fn is_ready(&self) -> bool {
        self.health.is_whole()
    }
}

/// Leases kept beside the key's state (`lease.lua`).
impl LeaseStore for RedisStore {
    /// One script on the key's state and its lease records (one slot).
    fn take<'a>(&'a self, key: Key<'a>, policy: &'a Policy, take: Take) -> StoreFuture<'a, Grant> {
        Box::pin(async move { self.take_lease(key, policy, &take).await })
    }

    /// One script on the key's state and its lease records (one slot).
    fn give_back<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        lease: LeaseId,
        unspent: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.give_back_lease(key, policy, lease, unspent))
    }
}

/// Shares kept in the key's state and home's records (`share.lua`).
/// Slots as leases renewed while held (see `slots`).
impl SlotStore for RedisStore {
    fn take_slots<'a>(
        &'a self,
        takes: &'a [SlotTake<'a>],
        id: u64,
        lease: Duration,
    ) -> StoreFuture<'a, Vec<SlotsFree>> {
        Box::pin(self.take_slots_on(takes, id, lease))
    }

    fn release_slots<'a>(&'a self, keys: &'a [Key<'a>], id: u64) -> StoreFuture<'a, ()> {
        Box::pin(self.release_slots_on(keys, id))
    }
}

impl ShareStore for RedisStore {
    /// One script on the key's state.
    fn report_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        report: weir_core::Report,
    ) -> StoreFuture<'a, Option<weir_core::Claim>> {
        Box::pin(self.report_share_call(key, policy, report))
    }

    /// One script on the key's state.
    fn apply_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        seq: u64,
        grant: u64,
        hold: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.apply_share_call(key, policy, seq, grant, hold))
    }

    /// One script on the key's home records.
    fn renew_share<'a>(
        &'a self,
        key: Key<'a>,
        policy: &'a Policy,
        renewal: weir_core::Renewal,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(self.renew_share_call(key, policy, renewal))
    }
}
