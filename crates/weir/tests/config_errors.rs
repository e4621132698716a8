//! Golden tests of configuration errors: the text of a file in, the exact line
//! `weir check-config` prints out (`file:line:col: field: message`). Syntax errors are
//! reported on the line where the problem is, in words about weir's configuration, not
//! where the parser noticed it or in the parser's own words.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::path::Path;

use weir::Config;

/// The error `text` is refused with, as `weir check-config` prints it.
fn error_of(text: &str) -> String {
    match Config::parse(text, Path::new("weir.yaml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(error) => error.to_string(),
    }
}

/// Each case: the file (lines joined), then the error expected.
fn check(cases: &[(&[&str], &str)]) {
    for (lines, expected) in cases {
        let text = lines.join("\n") + "\n";
        assert_eq!(error_of(&text), *expected, "for:\n{text}");
    }
}

#[test]
fn a_misindented_field_is_reported_on_its_own_line() {
    check(&[
        (
            &[
                "rules:",
                "  - name: api",
                "    algorithm: gcra",
                "   limit: 10",
                "    period: 1m",
            ],
            "weir.yaml:4:4: rules[0]: this line is indented by 3 spaces, the line above by 4: the fields of one rule or section line up under each other",
        ),
        (
            &[
                "rules:",
                "  - name: api",
                "    algorithm: gcra",
                "     limit: 10",
                "    period: 1m",
            ],
            "weir.yaml:4:6: rules[0].algorithm: this line is indented by 5 spaces, the line above by 4, so YAML reads it as more of the value above it: the fields of one rule or section line up under each other",
        ),
    ]);
}

#[test]
fn a_tab_is_reported_where_it_is() {
    check(&[(
        &[
            "rules:",
            "  - name: api",
            "\talgorithm: gcra",
            "    limit: 10",
            "    period: 1m",
        ],
        "weir.yaml:3:1: rules[0]: a tab indents this line: YAML indents with spaces only",
    )]);
}

#[test]
fn an_unclosed_bracket_or_quote_is_reported_where_it_opens() {
    check(&[
        (
            &[
                "rules:",
                "  - name: api",
                "    algorithm: gcra",
                "    limit: [10",
                "    period: 1m",
            ],
            "weir.yaml:4:12: rules[0].limit: this `[` is never closed: a list or mapping opened with `[` ends with `]` (on this line or a later one)",
        ),
        (
            &[
                "rules:",
                "  - {name: api, algorithm: gcra, limit: 10, period: 1m",
            ],
            "weir.yaml:2:5: rules: this `{` is never closed: a list or mapping opened with `{` ends with `}` (on this line or a later one)",
        ),
        (
            &[
                "store:",
                "  type: redis",
                "  url: \"redis://127.0.0.1:6379",
                "rules: []",
            ],
            "weir.yaml:3:8: store: this quote is never closed: a quoted value ends with the same quote it starts with",
        ),
    ]);
}

#[test]
fn a_field_given_twice_names_both_lines() {
    check(&[(
        &[
            "rules:",
            "  - name: api",
            "    algorithm: gcra",
            "    limit: 10",
            "    limit: 20",
            "    period: 1m",
        ],
        "weir.yaml:5:5: rules[0].limit: `limit` is given twice (first on line 4): give each field once",
    )]);
}

#[test]
fn numbers_that_are_not_whole_say_what_the_field_takes() {
    let rule = |limit: &str| {
        [
            "rules:".to_owned(),
            "  - name: api".to_owned(),
            "    algorithm: gcra".to_owned(),
            format!("    limit: {limit}"),
            "    period: 1m".to_owned(),
        ]
        .join("\n")
    };
    for written in ["-5", "ten", "1.5", "99999999999999999999999"] {
        assert_eq!(
            error_of(&rule(written)),
            format!(
                "weir.yaml:4:12: rules[0].limit: limit must be a whole number from 1 to 1000000000 (to 10000 for sliding_log), got `{written}`"
            )
        );
    }
    check(&[(
        &[
            "rules:",
            "  - name: api",
            "    algorithm: gcra",
            "    limit: 10",
            "    period: 1m",
            "    burst: -1 # a comment",
        ],
        "weir.yaml:6:12: rules[0].burst: burst must be a whole number from 1 to 1000000000, got `-1`",
    )]);
}

#[test]
fn a_value_of_the_wrong_shape_says_what_belongs_there() {
    check(&[
        (
            &["rules:"],
            "weir.yaml:1:6: rules: expected a list here (lines starting `- `, or `[a, b]`)",
        ),
        (
            &["store: memory", "rules: []"],
            "weir.yaml:1:8: store: expected fields here (`name: value` lines, or `{name: value}`)",
        ),
        (
            &[
                "rules:",
                "  - name: [api]",
                "    algorithm: gcra",
                "    limit: 10",
                "    period: 1m",
            ],
            "weir.yaml:2:11: rules[0].name: expected a single value here, not a list or fields",
        ),
    ]);
    assert_eq!(
        error_of(""),
        "weir.yaml:1:1: the file ends before any configuration: it needs at least `rules:`"
    );
}

#[test]
fn a_value_refused_before_a_syntax_error_is_reported_first() {
    // The unknown field on line 2 was read whole before the unclosed quote on line 3.
    check(&[(
        &["store:", "  redis:", "    url: \"redis://x", "rules: []"],
        "weir.yaml:2:3: store.redis: unknown field `redis`, expected one of type, max_keys, url, nodes, key_prefix, timeout, clock, window_counters, fallback_instances, slot_lease, sentinels, master_name, username, password_file, password_env, sentinel_username, sentinel_password_file, sentinel_password_env, tls",
    )]);
}

#[test]
fn a_global_rule_and_its_regions_are_checked() {
    let store = "store: { type: redis, url: redis://127.0.0.1:7001 }";
    let region = [
        "region:",
        "  name: eu",
        "  peers: { us: redis://127.0.0.1:7002 }",
    ];
    let rule = |scope: &str, algorithm: &str, limit: &str| {
        [
            "rules:".to_owned(),
            "  - name: partner".to_owned(),
            format!("    scope: {scope}"),
            format!("    algorithm: {algorithm}"),
            format!("    limit: {limit}"),
            "    period: 1m".to_owned(),
        ]
    };
    let file = |parts: &[&[String]]| -> String {
        parts
            .iter()
            .flat_map(|p| p.iter().cloned())
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    };
    let lines = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let cases: Vec<(String, &str)> = vec![
        (
            file(&[&lines(&[store]), &rule("global", "token_bucket", "100")]),
            "weir.yaml:4:12: rules[0].scope: scope: global needs a `region` section (this region and its peers)",
        ),
        (
            file(&[&lines(&region), &rule("global", "token_bucket", "100")]),
            "weir.yaml:2:3: region: a region's instances share its store: `region` needs store type redis or redis_cluster",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &rule("global", "gcra", "100"),
            ]),
            "weir.yaml:7:12: rules[0].scope: scope: global applies to token_bucket, not to gcra (a region's share changes the rate, which only a bucket's level carries across)",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &rule("global", "token_bucket", "100"),
                &lines(&["    lease: auto"]),
            ]),
            "weir.yaml:7:12: rules[0].scope: a global rule is not leased: the region's share is already a lease of the limit",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &rule("global", "token_bucket", "1"),
            ]),
            "weir.yaml:7:12: rules[0].scope: a global limit needs at least one unit per region: 1 is below the 2 regions",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &lines(&["  floor: 0.6"]),
                &rule("global", "token_bucket", "100"),
            ]),
            "weir.yaml:5:10: region.floor: region.floor is each region's fraction of a global limit, above 0 and at most 1/2 (every region has one)",
        ),
        (
            file(&[
                &lines(&[
                    store,
                    "region:",
                    "  name: eu",
                    "  peers: { eu: redis://127.0.0.1:7002 }",
                ]),
                &rule("global", "token_bucket", "100"),
            ]),
            "weir.yaml:4:16: region.peers.eu: peer `eu`: a name of 1 to 32 characters of A-Z, a-z, 0-9, `_` and `-`, not this region's own",
        ),
        (
            file(&[
                &lines(&[
                    store,
                    "region:",
                    "  name: eu",
                    "  peers: { us: http://127.0.0.1:7002 }",
                ]),
                &rule("global", "token_bucket", "100"),
            ]),
            "weir.yaml:4:16: region.peers.us: a peer's store is a redis:// (or rediss://) URL, or a list of a cluster's nodes",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &lines(&["  rebalance: 100ms"]),
                &rule("global", "token_bucket", "100"),
            ]),
            "weir.yaml:5:14: region.rebalance: region.rebalance must be from 500ms to 60s",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &lines(&["  rebalanse: 1s"]),
                &rule("global", "token_bucket", "100"),
            ]),
            "weir.yaml:5:3: region.rebalanse: unknown field `rebalanse`, expected one of name, peers, rebalance, floor",
        ),
        (
            file(&[
                &lines(&["store: { type: redis, url: redis://127.0.0.1:7001, clock: local }"]),
                &lines(&region),
                &rule("global", "token_bucket", "100"),
            ]),
            "weir.yaml:3:3: region: `region` needs the store's clock to be Redis's (`clock: redis`, the default): shares are timed by each Redis server's own clock, never compared across regions, and an instance's clock would be",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &rule("global", "token_bucket", "100000000"),
            ]),
            "weir.yaml:7:12: rules[0].scope: too large to decide exactly in Redis (Lua numbers are exact to 2^53): a global rule's burst x period in microseconds, or burst x limit; use a shorter period or a smaller limit or burst",
        ),
        (
            file(&[
                &lines(&[store]),
                &lines(&region),
                &rule("planet", "token_bucket", "100"),
            ]),
            "weir.yaml:7:12: rules[0].scope: unknown variant `planet`, expected one of region, global",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error_of(&text), expected, "for:\n{text}");
    }
    // A valid one: each region's floor, 2 of 100, and the rule global.
    let ok = file(&[
        &lines(&[store]),
        &lines(&region),
        &rule("global", "token_bucket", "100"),
    ]);
    let config = Config::parse(&ok, Path::new("weir.yaml")).unwrap();
    assert!(config.engine.rules[0].global);
    // (What the region section and the fallback shares read as: config/tests.rs.)
}

#[test]
fn a_priority_on_a_match_needs_shedding_and_belongs_to_the_rule() {
    let rule = |priority_at_cost: bool| {
        let (own, cost) = match priority_at_cost {
            false => (", priority: sheddable", ""),
            true => ("", ", priority: critical"),
        };
        [
            "rules:".to_owned(),
            "  - name: exports".to_owned(),
            format!("    match: {{ path_prefix: /exports{own} }}"),
            format!("    costs: [{{ match: {{ path: /exports/all{cost} }}, cost: 5 }}]"),
            "    algorithm: gcra".to_owned(),
            "    limit: 10".to_owned(),
            "    period: 1m".to_owned(),
        ]
        .join("\n")
            + "\n"
    };
    assert_eq!(
        error_of(&rule(false)),
        "weir.yaml:3:12: rules[0].match.priority: `priority` is the shedding priority of the rule's requests: it needs a `shedding` section"
    );
    let shedding = "upstream: { url: http://127.0.0.1:9 }\nshedding:\n  min_limit: 2\n";
    assert_eq!(
        error_of(&format!("{shedding}{}", rule(true))),
        "weir.yaml:7:13: rules[0].costs[0].match.priority: `priority` belongs on the rule's own `match`, not a cost's"
    );
    // Accepted on the rule's own `match` (what it reads as: config/tests.rs).
    Config::parse(
        &format!("{shedding}{}", rule(false)),
        Path::new("weir.yaml"),
    )
    .unwrap();
}

#[test]
fn a_cost_from_the_answer_needs_one_source_and_a_limit_that_can_owe() {
    let rule = |algorithm: &str, from: &str, extra: &str| -> Vec<String> {
        vec![
            "upstream: { url: http://127.0.0.1:9 }".into(),
            "rules:".into(),
            "  - name: tokens".into(),
            "    match: { path: /v1/chat }".into(),
            format!("    algorithm: {algorithm}"),
            "    limit: 1000".into(),
            "    period: 1m".into(),
            format!("    cost_from: {from}"),
            extra.into(),
        ]
    };
    let cases = [
        (
            rule("sliding_window", "{ json: /usage/total_tokens }", ""),
            "weir.yaml:8:16: rules[0].cost_from: `cost_from` needs a limit that can carry a debt (a cost beyond the estimate, waited out): token_bucket, gcra or leaky_bucket, not sliding_window",
        ),
        (
            rule("gcra", "{ json: /a, response_header: x-t }", ""),
            "weir.yaml:8:16: rules[0].cost_from: give one of `response_header`, `trailer` or `json`",
        ),
        (
            rule("gcra", "{}", ""),
            "weir.yaml:8:16: rules[0].cost_from: give one of `response_header`, `trailer` or `json`",
        ),
        (
            rule("gcra", "{ json: usage.total_tokens }", ""),
            "weir.yaml:8:16: rules[0].cost_from: `usage.total_tokens` is not a JSON pointer: write it as `/usage/total_tokens`",
        ),
        (
            rule("gcra", "{ trailer: \"x tokens\" }", ""),
            "weir.yaml:8:16: rules[0].cost_from: `x tokens` is not a header name",
        ),
        (
            rule("gcra", "{ trailer: x-tokens, max: 0 }", ""),
            "weir.yaml:8:16: rules[0].cost_from: `max` must be between 1 and 64 buckets of the rule (64000), got 0",
        ),
        (
            rule("gcra", "{ trailer: x-tokens, max: 64001 }", ""),
            "weir.yaml:8:16: rules[0].cost_from: `max` must be between 1 and 64 buckets of the rule (64000), got 64001",
        ),
        (
            rule("token_bucket", "{ trailer: x-tokens }", "    lease: auto"),
            "weir.yaml:8:16: rules[0].cost_from: `cost_from` cannot be used with `lease`: a leased batch is spent locally, before the answer states the cost",
        ),
    ];
    for (lines, expected) in cases {
        let text = lines.join("\n") + "\n";
        assert_eq!(error_of(&text), expected, "for:\n{text}");
    }
    // Misspelled fields are refused as anywhere else.
    let misspelled = rule("gcra", "{ header: x-tokens }", "").join("\n") + "\n";
    assert!(
        error_of(&misspelled).contains("unknown field `header`"),
        "{}",
        error_of(&misspelled)
    );
}

#[test]
fn the_auth_door_refuses_every_rule_it_could_not_decide_as_written() {
    let file = |auth: &str, rule: &[&str]| -> String {
        let mut lines = vec![
            "identities:",
            "  email: { body_field: email }",
            "  api_key: { header: x-api-key }",
            auth,
            "rules:",
            "  - name: login",
            "    match: { path: /login }",
            "    algorithm: sliding_log",
            "    limit: 5",
            "    period: 15m",
        ];
        lines.extend_from_slice(rule);
        lines.join("\n") + "\n"
    };
    let door = "auth: { convention: original, denied_status: 403 }";
    let app = "auth: { convention: original, reservations: app }";
    let cases = [
        (
            file(door, &["    key: [api_key, email]"]),
            "weir.yaml:11:10: rules[0].key: rule `login` is keyed on `email`, a body field: the auth door never sees a body, so it could not decide it (key it on a header, a token or the client address, or give it a `match` the proxy's requests do not reach)",
        ),
        // Settled by the app or not, a body is never seen.
        (
            file(app, &["    key: [email]"]),
            "weir.yaml:11:10: rules[0].key: rule `login` is keyed on `email`, a body field: the auth door never sees a body, so it could not decide it (key it on a header, a token or the client address, or give it a `match` the proxy's requests do not reach)",
        ),
        (
            file(door, &["    count_statuses: [401]"]),
            "weir.yaml:6:11: rules[0].count_statuses: rule `login` is counted by the answer's status, which the auth door never sees: set `auth.reservations: app` for the app to settle it with /v1/settle (the door's answer carries a Weir-Reservation id), or keep the rule off the door's requests",
        ),
        (
            file(door, &["    reset_statuses: [200]"]),
            "weir.yaml:6:11: rules[0].reset_statuses: rule `login` is reset by the answer's status, which the auth door never sees: set `auth.reservations: app` for the app to settle it with /v1/settle (the door's answer carries a Weir-Reservation id), or keep the rule off the door's requests",
        ),
        (
            file(
                door,
                &[
                    "    algorithm: gcra",
                    "    cost_from: { response_header: x-cost }",
                ],
            )
            .replace("    algorithm: sliding_log\n", ""),
            "weir.yaml:11:16: rules[0].cost_from: rule `login` is priced by the answer, which the auth door never sees: set `auth.reservations: app` for the app to settle it with /v1/settle (the door's answer carries a Weir-Reservation id), or keep the rule off the door's requests",
        ),
        (
            file("auth: { denied_status: 503 }", &[]),
            "weir.yaml:4:24: auth.denied_status: denied_status must be a 4xx status (429; 403 for nginx and ingress-nginx)",
        ),
        (
            file("auth: { path_prefix: /check }", &[]),
            "weir.yaml:4:22: auth.path_prefix: `path_prefix` is for `convention: envoy` (ext_authz's path_prefix); the other conventions are served at /v1/auth",
        ),
        (
            file("auth: { convention: envoy, path_prefix: /v1/auth/ }", &[]),
            "weir.yaml:4:41: auth.path_prefix: path_prefix must be a plain path such as /v1/auth: starting with `/`, not ending with one, of letters, digits, `-`, `.`, `_`, `~`",
        ),
        (
            file("auth: { trusted_proxies: [10.0.0.0/33] }", &[]),
            "weir.yaml:4:27: auth.trusted_proxies[0]: `10.0.0.0/33` is not an IP address or CIDR block",
        ),
        (
            file("auth: { convention: traefik }", &[]),
            "weir.yaml:4:21: auth.convention: unknown variant `traefik`, expected one of forwarded, original, envoy",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error_of(&text), expected, "for:\n{text}");
    }
    // Settled by the app, a rule counted by outcome may be reached; one without a
    // `match` is never reached through the door.
    for text in [
        file(app, &["    count_statuses: [401]", "    lockout: { growth: 2, max: 1h }"]),
        file(door, &["    key: [api_key]"]),
        "identities:\n  email: { body_field: email }\nauth: {}\nrules:\n  - name: quota\n    algorithm: gcra\n    limit: 5\n    period: 1m\n".to_owned(),
    ] {
        let config = Config::parse(&text, Path::new("weir.yaml")).unwrap();
        assert!(config.has_auth(), "{text}");
    }
}

#[test]
fn every_error_the_checks_can_reach_is_reported_in_one_run_in_file_order() {
    check(&[(
        &[
            "rules:",
            "  - name: a",
            "    algorithm: gcra",
            "    limit: 0",
            "    period: 1m",
            "  - name: b",
            "    algorithm: gcra",
            "    limit: 5",
            "    period: 1m",
            "    burst: 0",
            "  - name: a",
            "    algorithm: fixed_window",
            "    limit: 5",
            "    period: 1m",
            "admin:",
            "  token_file: no-such-token-file",
        ],
        "weir.yaml:4:12: rules[0].limit: limit must be a whole number from 1 to 1000000000, got 0\n\
         weir.yaml:10:12: rules[1].burst: burst must be a whole number from 1 to 1000000000, got 0\n\
         weir.yaml:11:11: rules[2].name: duplicate rule name `a`: every rule needs its own name\n\
         weir.yaml:16:3: admin.token_file: cannot read `no-such-token-file`: No such file or directory (os error 2)",
    )]);
    // The rules' own checks (their matches, keys) run once every rule's policy is
    // valid, and report every rule at once too.
    check(&[(
        &[
            "identities:",
            "  user: { header: X-User }",
            "rules:",
            "  - name: a",
            "    algorithm: gcra",
            "    limit: 5",
            "    period: 1m",
            "    key: [usr]",
            "  - name: b",
            "    algorithm: gcra",
            "    limit: 5",
            "    period: 1m",
            "    match: { path_prefix: books }",
        ],
        "weir.yaml:4:11: rules[0].key: `key` needs a `match`: it applies to gateway rules\n\
         weir.yaml:13:12: rules[1].match: path_prefix `books` must start with `/`",
    )]);
}

#[test]
fn a_bound_is_worded_alike_whatever_breaks_it() {
    let rule = |limit: &str| {
        error_of(&format!(
            "rules:\n  - name: a\n    algorithm: gcra\n    limit: {limit}\n    period: 1m\n"
        ))
    };
    let bound = "rules[0].limit: limit must be a whole number from 1 to 1000000000";
    for limit in ["0", "-5", "1.5", "x", "1000000001"] {
        assert!(rule(limit).contains(bound), "{limit}: {}", rule(limit));
    }
}

#[test]
fn owed_settlements_are_bounded_and_only_on_a_shared_store() {
    let rules = [
        "rules:",
        "  - { name: api, algorithm: gcra, limit: 10, period: 1m }",
    ];
    let with = |lines: &[&'static str]| -> Vec<&'static str> { [lines, &rules[..]].concat() };
    let redis = ["store: { type: redis, url: \"redis://127.0.0.1:6379\" }"];
    check(&[
        (
            &with(&[redis[0], "settlements:", "  max_owed: 0"]),
            "weir.yaml:3:13: settlements.max_owed: max_owed must be a whole number from 1 to 10000000",
        ),
        (
            &with(&[redis[0], "settlements:", "  max_owed: 10000001"]),
            "weir.yaml:3:13: settlements.max_owed: max_owed must be a whole number from 1 to 10000000",
        ),
        (
            &with(&["settlements:", "  max_owed: 10"]),
            "weir.yaml:2:3: settlements: `settlements` applies to a shared store (type redis or redis_cluster): the memory store writes every settlement at once",
        ),
        (
            &with(&[redis[0], "settlements:", "  max_owing: 10"]),
            "weir.yaml:3:3: settlements.max_owing: unknown field `max_owing`, expected one of max_owed",
        ),
    ]);
    let text = with(&[redis[0], "settlements: { max_owed: 50000 }"]).join("\n") + "\n";
    assert!(Config::parse(&text, Path::new("weir.yaml")).is_ok());
}

#[test]
fn a_named_file_that_is_not_a_regular_file_is_refused_without_reading_it() {
    // /dev/zero never ends: read, it would take all memory; a pipe would hang the load.
    check(&[(
        &[
            "tls:",
            "  certificates:",
            "    - { cert_file: /dev/zero, key_file: /dev/zero }",
            "rules:",
            "  - { name: a, algorithm: gcra, limit: 5, period: 1m }",
        ],
        "weir.yaml:3:20: tls.certificates[0].cert_file: cannot read `/dev/zero`: not a regular file",
    )]);
}

#[test]
fn a_concurrency_rule_takes_no_rate_fields_and_needs_a_match() {
    let rule = |extra: &str| -> Vec<String> {
        let mut lines = vec![
            "upstream: { url: http://127.0.0.1:9 }".to_owned(),
            "rules:".to_owned(),
            "  - name: in-flight".to_owned(),
            "    algorithm: concurrency".to_owned(),
            "    limit: 3".to_owned(),
        ];
        lines.extend(extra.lines().map(str::to_owned));
        lines
    };
    let cases = [
        (
            rule("    match: { path_prefix: /r }\n    period: 1m"),
            "weir.yaml:7:13: rules[0].period: `period` does not apply to `algorithm: concurrency`: it limits the requests of a key in flight at once (one slot each, held until the answer ends), not a rate",
        ),
        (
            rule("    match: { path_prefix: /r }\n    burst: 5"),
            "weir.yaml:7:12: rules[0].burst: `burst` does not apply to `algorithm: concurrency`: it limits the requests of a key in flight at once (one slot each, held until the answer ends), not a rate",
        ),
        (
            rule("    match: { path_prefix: /r }\n    count_statuses: [200]"),
            "weir.yaml:3:11: rules[0].count_statuses: `count_statuses` does not apply to `algorithm: concurrency`: it limits the requests of a key in flight at once (one slot each, held until the answer ends), not a rate",
        ),
        (
            rule("    key: [client_ip]"),
            "weir.yaml:3:11: rules[0].match: `algorithm: concurrency` needs a `match`: only a door that passes requests on (the gateway, the tower layer) knows when a request ends",
        ),
        (
            vec![
                "rules:".to_owned(),
                "  - { name: a, algorithm: concurrency, limit: 0, match: { path: / } }".to_owned(),
            ],
            "weir.yaml:2:47: rules[0].limit: limit must be a whole number from 1 to 10000: the requests of a key in flight at once",
        ),
        (
            vec![
                "rules:".to_owned(),
                "  - { name: a, algorithm: gcra, limit: 3 }".to_owned(),
            ],
            "weir.yaml:2:13: rules[0].period: `period` is required: gcra counts requests per period",
        ),
        (
            vec![
                "store: { type: memory, slot_lease: 1s }".to_owned(),
                "rules:".to_owned(),
                "  - { name: a, algorithm: gcra, limit: 3, period: 1s }".to_owned(),
            ],
            "weir.yaml:1:36: store.slot_lease: `slot_lease` applies to type redis, redis_cluster and redis_sentinel, not memory",
        ),
        (
            vec![
                "store: { type: redis, url: redis://127.0.0.1:6379, slot_lease: 50ms }".to_owned(),
                "rules:".to_owned(),
                "  - { name: a, algorithm: gcra, limit: 3, period: 1s }".to_owned(),
            ],
            "weir.yaml:1:64: store.slot_lease: slot_lease must be between 200ms and 10m",
        ),
        (
            vec![
                "store: { type: redis, url: redis://127.0.0.1:6379, sentinel_password_env: PW }".to_owned(),
                "rules:".to_owned(),
                "  - { name: a, algorithm: gcra, limit: 3, period: 1s }".to_owned(),
            ],
            "weir.yaml:1:75: store.sentinel_password_env: `sentinel_password_env` applies to type redis_sentinel, not redis",
        ),
        (
            vec![
                "store: { type: redis_sentinel, sentinels: [redis://127.0.0.1:26379], master_name: m,".to_owned(),
                "  sentinel_password_file: pw, sentinel_password_env: PW }".to_owned(),
                "rules:".to_owned(),
                "  - { name: a, algorithm: gcra, limit: 3, period: 1s }".to_owned(),
            ],
            "weir.yaml:2:54: store.sentinel_password_env: give the password by `sentinel_password_file` or by `sentinel_password_env`, not both",
        ),
        (
            vec![
                "auth: { trusted_proxies: [127.0.0.1/32] }".to_owned(),
                "rules:".to_owned(),
                "  - { name: a, algorithm: concurrency, limit: 3, match: { path: / } }".to_owned(),
            ],
            "weir.yaml:3:13: rules[0].algorithm: rule `a` holds a slot until the answer ends, which the auth door never sees: set `auth.reservations: app` for the app to settle it with /v1/settle (the door's answer carries a Weir-Reservation id), or keep the rule off the door's requests",
        ),
    ];
    for (lines, expected) in cases {
        let text = lines.join("\n") + "\n";
        assert_eq!(error_of(&text), expected, "for:\n{text}");
    }
}
