//! The Redis users of every test server: weir's, allowed exactly the guide's minimal
//! list, and the administrator's.
//!
//! Every `redis-server` the testkit starts (single, cluster node, Sentinel's primary
//! and replica) has ACL user [`USER`] with [`PASSWORD`], keys `~weir:*` and exactly
//! the commands of the guide's Functions-mode list ([`COMMANDS`]), and every URL it
//! hands out carries that user. So the whole Redis suite proves the guide's list
//! (`docs/guide/src/sharing/redis.md`, "A Redis ACL user for weir"): a command weir
//! sends that the list lacks fails some test with `NOPERM`. Bans and rules of
//! `algorithm: concurrency` need [`SORTED_SET_COMMANDS`] too, granted only where a
//! test runs them ([`RedisServer::grant_bans_and_concurrency`](crate::RedisServer::grant_bans_and_concurrency)).
//!
//! The `default` user has a password of its own, known only to the testkit: its
//! `redis-cli` (the administrator's paths: `FLUSHALL`, `DEBUG`, `CONFIG`, replication,
//! `SHUTDOWN`), the sentinels, and [`RedisServer::admin_url`](crate::RedisServer::admin_url)
//! for a test's own client. So a test that reached Redis without weir's user would be
//! refused, not quietly run as the administrator.

/// The ACL user weir connects as.
pub const USER: &str = "weir";

/// [`USER`]'s password (a test constant).
pub const PASSWORD: &str = "weir-test-acl-password";

/// The key pattern [`USER`] may touch: the default `key_prefix`'s. A test with a
/// prefix of its own names it under `weir:`.
pub const KEYS: &str = "~weir:*";

/// The `default` user's password: the testkit's `redis-cli`, the sentinels,
/// replication, and [`RedisServer::admin_url`](crate::RedisServer::admin_url).
pub(crate) const ADMIN_PASSWORD: &str = "weir-test-admin-password";

/// The guide's Functions-mode list (Redis 7+), exactly.
pub const COMMANDS: [&str; 24] = [
    "+fcall",
    "+function|load",
    "+evalsha",
    "+eval",
    "+incrby",
    "+pexpire",
    "+del",
    "+ping",
    "+get",
    "+set",
    "+getrange",
    "+setrange",
    "+pttl",
    "+hget",
    "+hgetall",
    "+hset",
    "+hdel",
    "+incr",
    "+time",
    "+info",
    "+role",
    "+cluster|slots",
    "+cluster|info",
    "+asking",
];

/// What the guide says bans (`on_limited: { ban }`) and rules of `algorithm:
/// concurrency` add: their sorted sets.
pub const SORTED_SET_COMMANDS: [&str; 7] = [
    "+zadd",
    "+zcard",
    "+zrange",
    "+zrevrange",
    "+zremrangebyscore",
    "+zscore",
    "+zrem",
];

/// The `redis-server` arguments that make the two users: `default` with
/// [`ADMIN_PASSWORD`] (and a replica's way into its primary), and [`USER`].
pub(crate) fn server_args() -> Vec<String> {
    let mut user = vec![
        "--user".to_owned(),
        USER.to_owned(),
        "on".to_owned(),
        format!(">{PASSWORD}"),
        KEYS.to_owned(),
        "-@all".to_owned(),
    ];
    user.extend(COMMANDS.iter().map(|c| (*c).to_owned()));
    user.extend(
        [
            "--requirepass",
            ADMIN_PASSWORD,
            "--masterauth",
            ADMIN_PASSWORD,
        ]
        .map(str::to_owned),
    );
    user
}

/// `scheme://USER:PASSWORD@127.0.0.1:port`.
pub(crate) fn url(scheme: &str, port: u16) -> String {
    format!("{scheme}://{USER}:{PASSWORD}@127.0.0.1:{port}")
}

/// The `redis://` URL, as weir's user, of a server (or a proxy to one) on `port`.
pub fn url_on(port: u16) -> String {
    url("redis", port)
}
