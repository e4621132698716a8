//! `Config`: what loads, and errors that name the file, line and field.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::path::Path;
use std::time::Duration;

use weir::{Config, Fallback, StoreConfig};
use weir_core::{Algorithm, Policy};
use weir_store::{MemoryStoreConfig, RedisClock, RedisStoreConfig, RedisTarget};

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("weir.yaml")).map_err(|e| e.to_string())
}

#[test]
fn loads_a_valid_config_with_defaults() {
    let config = parse(
        "rules:\n  - name: api\n    algorithm: token_bucket\n    limit: 100\n    period: 1m\n    burst: 20\n  - name: login.v2\n    algorithm: sliding_log\n    limit: 5\n    period: 15m\n",
    )
    .unwrap();
    assert_eq!(config.engine.rules.len(), 2);
    assert_eq!(config.engine.rules[0].name, "api");
    assert_eq!(
        config.engine.rules[0].policy,
        Policy::new(
            Algorithm::TokenBucket,
            100,
            Duration::from_secs(60),
            Some(20)
        )
        .unwrap()
    );
    assert_eq!(
        config.store,
        StoreConfig::Memory(MemoryStoreConfig {
            max_keys: 1_000_000
        })
    );
}

#[test]
fn every_shipped_example_is_valid() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
    }
    assert!(seen > 0);
}

#[test]
fn errors_name_file_line_and_field() {
    let cases = [
        (
            "rules:\n  - name: api\n    algorithm: gcrx\n    limit: 1\n    period: 1m\n",
            "weir.yaml:3:16: rules[0].algorithm: unknown variant `gcrx`",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: 1\n    period: 7x\n",
            "weir.yaml:5:13: rules[0].period: invalid period `7x`",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: 0\n    period: 1m\n",
            "weir.yaml:4:12: rules[0].limit: limit must be a whole number from 1 to 1000000000, got 0",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 1m\n    burst: 0\n",
            "weir.yaml:6:12: rules[0].burst: burst must be a whole number from 1",
        ),
        (
            "rules:\n  - name: api\n    algorithm: fixed_window\n    limit: 5\n    period: 1m\n    burst: 3\n",
            "weir.yaml:6:12: rules[0].burst: burst applies to token_bucket, gcra and leaky_bucket, not to fixed_window",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 0s\n",
            "weir.yaml:5:13: rules[0].period: period must be from 1ms to 366d",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 1m\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 1m\n",
            "weir.yaml:6:11: rules[1].name: duplicate rule name `api`",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 1m\n    limt: 4\n",
            "weir.yaml:6:5: rules[0].limt: unknown field `limt`",
        ),
        (
            "rules:\n  - name: \"a b\"\n    algorithm: gcra\n    limit: 5\n    period: 1m\n",
            "weir.yaml:2:11: rules[0].name: invalid rule name `a b`",
        ),
        (
            "rules:\n  - name: api\n    algorithm: gcra\n    limit: -5\n    period: 1m\n",
            "weir.yaml:4:12: rules[0].limit: limit must be a whole number from 1 to 1000000000 (to 10000 for sliding_log), got `-5`",
        ),
        (
            "store:\n  type: memory\n  max_keys: 0\nrules:\n  - name: api\n    algorithm: gcra\n    limit: 5\n    period: 1m\n",
            "weir.yaml:3:13: store.max_keys: max_keys must be a whole number, at least 1",
        ),
        (
            "store:\n  type: postgres\nrules: []\n",
            "weir.yaml:2:9: store.type: unknown variant `postgres`",
        ),
        (
            "store:\n  type: redis\nrules: []\n",
            "weir.yaml:2:9: store.url: type redis needs `url`",
        ),
        (
            "store:\n  type: redis\n  url: http://x\nrules: []\n",
            "weir.yaml:3:8: store.url: `http://x` is not a Redis URL",
        ),
        (
            // The password never printed; a port that is not a number refused here, not
            // at the first connection.
            "store:\n  type: redis\n  url: ftp://:hunter2@x\nrules: []\n",
            "weir.yaml:3:8: store.url: `ftp://:<redacted>@x` is not a Redis URL (redis://[user[:password]@]host:port[/db]): the scheme is not",
        ),
        (
            "store:\n  type: redis\n  url: redis://weir:hunter2@127.0.0.1:abc\nrules: []\n",
            "weir.yaml:3:8: store.url: `redis://weir:<redacted>@127.0.0.1:abc` is not a Redis URL",
        ),
        (
            "store:\n  type: redis_cluster\n  nodes: [redis://h:1, \"redis://:hunter2@h:x\"]\nrules: []\n",
            "weir.yaml:3:10: store.nodes[1]: `redis://:<redacted>@h:x` is not a Redis URL",
        ),
        (
            "store:\n  type: redis_cluster\n  nodes: []\nrules: []\n",
            "weir.yaml:3:10: store.nodes: `nodes` must list at least one node",
        ),
        (
            "store:\n  type: redis\n  url: redis://h:1\n  max_keys: 5\nrules: []\n",
            "weir.yaml:4:13: store.max_keys: `max_keys` applies to type memory, not redis",
        ),
        (
            "store:\n  max_keys: 5\n  url: redis://h:1\nrules: []\n",
            "weir.yaml:3:8: store.url: `url` applies to type redis, not memory",
        ),
        (
            "store:\n  type: redis\n  url: redis://h:1\n  window_counters: true\nrules: []\n",
            "weir.yaml:4:20: store.window_counters: window_counters needs `clock: local`",
        ),
        (
            "store:\n  window_counters: false\nrules: []\n",
            "weir.yaml:2:20: store.window_counters: `window_counters` applies to type redis, redis_cluster and redis_sentinel, not memory",
        ),
        (
            "store:\n  type: redis\n  url: redis://h:1\n  key_prefix: \"a{b}\"\nrules: []\n",
            "weir.yaml:4:15: store.key_prefix: key_prefix must be 1 to 64 characters",
        ),
        (
            "store:\n  type: redis\n  url: redis://h:1\n  timeout: 0ms\nrules: []\n",
            "weir.yaml:4:12: store.timeout: timeout must be between 1ms and 60s",
        ),
        (
            "store:\n  type: redis\n  url: redis://h:1\n  clock: ntp\nrules: []\n",
            "weir.yaml:4:10: store.clock: unknown variant `ntp`",
        ),
        (
            "store:\n  type: redis\n  url: redis://h:1\nrules:\n  - name: big\n    algorithm: sliding_window\n    limit: 1000000\n    period: 1d\n",
            "weir.yaml:7:12: rules[0].limit: too large to decide exactly in Redis",
        ),
        ("rules: []\n", "weir.yaml: rules: no rules"),
        (
            "upstream:\n  url: ftp://api\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:2:8: upstream.url: `ftp://api` is not an upstream URL",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nclient_ip:\n  trusted_proxies: [10.0.0.0/33]\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:4:21: client_ip.trusted_proxies[0]: `10.0.0.0/33` is not an IP address or CIDR block",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nrules:\n  - name: a\n    match: { path: /x }\n    key: [api_key]\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:6:10: rules[0].key: no identity is named `api_key`",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nidentities:\n  user:\n    header: X-User\n    body_field: user\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:5:5: identities.user: give exactly one of `header`, `jwt`, `body_field`, `query_param`, `cookie`, `client_ip`",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nidentities:\n  user:\n    jwt: { claim: sub, hs256_secret: short }\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:5:5: identities.user.jwt: hs256_secret must be at least 16 bytes",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nidentities:\n  user:\n    jwt: { claim: sub, rs256_public_key_file: /nonexistent.pem }\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:5:5: identities.user.jwt: cannot read `/nonexistent.pem`",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nrules:\n  - name: a\n    match: { path: \"/books/x{id}\" }\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:5:12: rules[0].match: invalid pattern segment",
        ),
        (
            "upstream:\n  url: http://127.0.0.1:9000\nrules:\n  - name: a\n    match: { methods: [\"G T\"] }\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
            "weir.yaml:5:12: rules[0].match: `G T` is not an HTTP method",
        ),
        (
            "rules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n    shadow: true\n",
            "weir.yaml:2:11: rules[0].shadow: `shadow` needs a `match`",
        ),
        ("rules:\n  - name: [\n", "weir.yaml:"),
        ("", "weir.yaml"),
    ];
    for (text, expected) in cases {
        let error = parse(text).expect_err(text);
        assert!(
            error.starts_with(expected),
            "{text:?}\n  gave {error}\n  want {expected}"
        );
        assert!(!error.contains("hunter2"), "a password printed: {error}");
    }
}

#[test]
fn loads_redis_and_cluster_stores() {
    let config = parse(
        "store:\n  type: redis\n  url: redis://127.0.0.1:6379\n  key_prefix: rl\n  timeout: 20ms\n  clock: local\n  window_counters: true\n  fallback_instances: 4\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
    )
    .unwrap();
    assert_eq!(
        config.store,
        StoreConfig::Redis(
            RedisStoreConfig {
                target: RedisTarget::Single("redis://127.0.0.1:6379".into()),
                key_prefix: "rl".into(),
                timeout: Duration::from_millis(20),
                clock: RedisClock::Local,
                window_counters: true,
                access: Default::default(),
            },
            Fallback {
                instances: 4,
                slot_lease: Duration::from_secs(10)
            }
        )
    );
    let config = parse(
        "store:\n  type: redis_cluster\n  nodes: [redis://127.0.0.1:7001, redis://127.0.0.1:7002]\nrules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    period: 1s\n",
    )
    .unwrap();
    assert_eq!(
        config.store,
        StoreConfig::Redis(
            RedisStoreConfig {
                target: RedisTarget::Cluster(vec![
                    "redis://127.0.0.1:7001".into(),
                    "redis://127.0.0.1:7002".into()
                ]),
                key_prefix: "weir".into(),
                timeout: Duration::from_millis(50),
                clock: RedisClock::Server,
                window_counters: false,
                access: Default::default(),
            },
            Fallback {
                instances: 1,
                slot_lease: Duration::from_secs(10)
            }
        )
    );
}

/// A store `timeout` of half the slot lease or more is allowed, with a warning when a
/// rule is `algorithm: concurrency`: a slot's take waits at most half the lease, so
/// the longer timeout never applies to it.
#[test]
fn a_timeout_over_half_the_slot_lease_is_warned_of() {
    let store = |fields: &str, algorithm: &str| {
        parse(&format!(
            "store:\n  type: redis\n  url: redis://127.0.0.1:6379\n{fields}upstream:\n  url: http://127.0.0.1:9\nrules:\n  - name: a\n    match: {{ path_prefix: /a }}\n    algorithm: {algorithm}\n    limit: 5\n"
        ))
        .unwrap()
    };
    let slow = "  timeout: 300ms\n  slot_lease: 500ms\n";
    let warned = store(slow, "concurrency");
    assert_eq!(
        warned.warnings,
        [
            "store.slot_lease: a `concurrency` slot's take waits at most half the lease (250ms), less than `timeout` (300ms): a take Redis answers later is refused as a store timeout; keep `timeout` below half of `slot_lease`"
        ]
    );
    assert!(store("", "concurrency").warnings.is_empty());
    let quick = "  timeout: 200ms\n  slot_lease: 500ms\n";
    assert!(store(quick, "concurrency").warnings.is_empty());
    assert!(store(slow, "gcra\n    period: 1s").warnings.is_empty());
}

#[test]
fn sliding_log_limits_are_bounded() {
    let error = parse(
        "rules:\n  - name: log\n    algorithm: sliding_log\n    limit: 20000\n    period: 1m\n",
    )
    .unwrap_err();
    assert!(
        error.contains("use sliding_window for large limits"),
        "{error}"
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let error = Config::load(Path::new("/nonexistent/weir.yaml"))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("/nonexistent/weir.yaml: cannot read the file"),
        "{error}"
    );
}

/// `lease`: `auto` or a fixed batch and hold, on the buckets only, never on an
/// abuse-critical rule; each refusal names the line and says why.
#[test]
fn leases_are_read_and_refused_with_the_reason() {
    let rule = |extra: &str| {
        format!(
            "rules:\n  - name: api\n    algorithm: token_bucket\n    limit: 100\n    period: 1m\n{extra}"
        )
    };
    let config = parse(&rule("    lease: auto\n")).unwrap();
    assert_eq!(
        config.engine.rules[0].lease,
        Some(weir_store::LeasePlan::auto())
    );
    let config = parse(&rule("    lease: { batch: 20, hold: 500ms }\n")).unwrap();
    assert_eq!(
        config.engine.rules[0].lease,
        Some(weir_store::LeasePlan {
            batch: weir_store::Batch::Fixed(20),
            hold: Duration::from_millis(500),
        })
    );
    assert_eq!(parse(&rule("")).unwrap().engine.rules[0].lease, None);
    let refused = [
        (
            "rules:\n  - name: api\n    algorithm: sliding_window\n    limit: 100\n    period: 1m\n    lease: auto\n".to_owned(),
            "weir.yaml:6:12: rules[0].lease: leases are for token_bucket and gcra, not sliding_window: a window forgets its counts",
        ),
        (
            "rules:\n  - name: api\n    algorithm: fixed_window\n    limit: 100\n    period: 1m\n    lease: auto\n".to_owned(),
            "rules[0].lease: leases are for token_bucket and gcra, not fixed_window",
        ),
        (
            "rules:\n  - name: api\n    algorithm: leaky_bucket\n    limit: 100\n    period: 1m\n    lease: auto\n".to_owned(),
            "rules[0].lease: leases are for token_bucket and gcra, not leaky_bucket: units spent from a lease would skip its queue's delay",
        ),
        (
            rule("    lease: sometimes\n"),
            "weir.yaml:6:12: rules[0].lease: `sometimes` is not a lease: write `auto` or `{ batch: N, hold: DURATION }`",
        ),
        (
            rule("    lease: { batch: 0, hold: 1s }\n"),
            "rules[0].lease: lease.batch must be from 1 to the rule's capacity (100: its burst, or its limit)",
        ),
        (
            rule("    lease: { batch: 101, hold: 1s }\n"),
            "lease.batch must be from 1 to the rule's capacity (100",
        ),
        (
            rule("    lease: { batch: 10, hold: 50ms }\n"),
            "rules[0].lease: lease.hold must be from 100ms to 10m",
        ),
        (
            rule("    lease: { batch: 10, hold: 11m }\n"),
            "lease.hold must be from 100ms to 10m",
        ),
        (rule("    lease: { batch: 10 }\n"), "missing field `hold`"),
        (
            rule("    lease: { batch: 10, hold: 1s, size: 3 }\n"),
            "unknown field `size`",
        ),
        (
            rule("    match: { path: /login }\n    count_statuses: [401]\n    lease: auto\n"),
            "rules[0].lease: a rule with `count_statuses` is never leased: an abuse-critical limit",
        ),
        (
            rule("    match: { path: /login }\n    reset_statuses: [200]\n    lease: auto\n"),
            "a rule with `reset_statuses` is never leased",
        ),
        (
            rule("    match: { path: /login }\n    count_statuses: [401]\n    lockout: { growth: 2, max: 1h }\n    lease: { batch: 5, hold: 1s }\n"),
            "a rule with `count_statuses` is never leased",
        ),
    ];
    for (text, expected) in refused {
        let error = parse(&text).expect_err(&text);
        assert!(
            error.contains(expected),
            "{text}\n{error}\nwanted: {expected}"
        );
    }
}
