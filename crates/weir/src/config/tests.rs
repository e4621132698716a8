//! What a valid configuration reads as, where that is not visible from outside the
//! crate (the routing and region specs are the engine's own, not API).

use std::path::Path;
use std::time::Duration;

use axum::http::Method;
use weir_core::{Algorithm, Policy, Priority};

use super::{Config, ConfigBuilder, RuleBuilder};

fn parse(lines: &[&str]) -> Config {
    Config::parse(&lines.join("\n"), Path::new("weir.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_region_section_reads_as_this_region_and_its_peers() {
    let config = parse(&[
        "store: { type: redis, url: redis://127.0.0.1:7001 }",
        "region:",
        "  name: eu",
        "  peers: { us: redis://127.0.0.1:7002 }",
        "rules:",
        "  - name: partner",
        "    scope: global",
        "    algorithm: token_bucket",
        "    limit: 100",
        "    period: 1m",
    ]);
    let region = config.engine.region.unwrap_or_else(|| panic!("a region"));
    assert_eq!((region.name.as_str(), region.regions()), ("eu", 2));
    assert_eq!(region.rebalance, Duration::from_secs(2));
}

/// While the store is down, a fail-open global rule falls back to this instance's part
/// of its region's even split: 100 / (2 regions x 2 instances); a local rule to its
/// instance's part alone.
#[test]
fn a_global_rules_fallback_is_its_part_of_the_regions_split() {
    let config = parse(&[
        "store: { type: redis, url: redis://127.0.0.1:7001, fallback_instances: 2 }",
        "region: { name: eu, peers: { us: redis://127.0.0.1:7002 } }",
        "rules:",
        "  - name: partner",
        "    scope: global",
        "    algorithm: token_bucket",
        "    limit: 100",
        "    period: 1m",
        "    match: { path_prefix: /api }",
        "  - name: local",
        "    algorithm: token_bucket",
        "    limit: 100",
        "    period: 1m",
        "    match: { path_prefix: /api }",
    ]);
    let limits: Vec<u64> = config
        .engine
        .routing
        .rules
        .iter()
        .map(|rule| rule.fallback_policy(&rule.policy).limit())
        .collect();
    assert_eq!(limits, [25, 50]);
}

#[test]
fn a_priority_on_a_rules_match_is_its_requests_priority() {
    let config = parse(&[
        "upstream: { url: http://127.0.0.1:9 }",
        "shedding:",
        "  min_limit: 2",
        "rules:",
        "  - name: exports",
        "    match: { path_prefix: /exports, priority: sheddable }",
        "    algorithm: gcra",
        "    limit: 10",
        "    period: 1m",
    ]);
    assert_eq!(
        config.engine.routing.rules[0].priority,
        Some(Priority::Sheddable)
    );
}

/// A prefix is a prefix of the text, as a file's `path_prefix` (documented so).
#[test]
fn a_built_prefix_matches_as_a_files_does() {
    let gcra = Policy::new(Algorithm::Gcra, 10, Duration::from_secs(60), None)
        .unwrap_or_else(|e| panic!("{e}"));
    let config = ConfigBuilder::new()
        .rule(RuleBuilder::new("books", gcra).path_prefix("/books"))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let route = &config.engine.routing.rules[0].route;
    assert!(route.matches(&Method::GET, None, "/books/1"));
    assert!(route.matches(&Method::GET, None, "/bookshelf"));
    assert!(!route.matches(&Method::GET, None, "/book"));
}

#[test]
fn the_regions_example_lists_the_same_regions_and_rules_everywhere() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/regions");
    let configs: Vec<Config> = ["ap", "eu", "us"]
        .iter()
        .map(|r| Config::load(&dir.join(format!("{r}.yaml"))).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    for config in &configs {
        let region = config
            .engine
            .region
            .as_ref()
            .unwrap_or_else(|| panic!("a region"));
        let mut names: Vec<&str> = region.peers.iter().map(|(n, _)| n.as_str()).collect();
        names.push(&region.name);
        names.sort_unstable();
        assert_eq!(names, ["ap", "eu", "us"]);
        assert_eq!(config.engine.rules, configs[0].engine.rules);
    }
}

/// The headers callers are identified or given plans by: what the forward-auth door
/// under `convention: envoy` refuses joined.
#[test]
fn the_identity_headers_are_the_keys_tokens_and_plan_headers() {
    let config = parse(&[
        "identities:",
        "  api_key: { header: X-Api-Key }",
        "  user: { jwt: { claim: sub, hs256_secret: a-long-random-secret-for-tests } }",
        "  email: { body_field: email }",
        "plans: { header: X-Plan, default: free }",
        "rules:",
        "  - name: free",
        "    match: { path_prefix: /api }",
        "    plans: [free]",
        "    key: [api_key]",
        "    algorithm: gcra",
        "    limit: 10",
        "    period: 1m",
    ]);
    let clock = std::sync::Arc::new(weir_core::ManualClock::new(0));
    let store = std::sync::Arc::new(weir_store::MemoryStore::new(
        weir_store::MemoryStoreConfig::default(),
        clock.clone(),
    ));
    let engine = crate::engine::Engine::new(&config.engine, store, clock);
    let names: Vec<String> = engine
        .identity_headers()
        .iter()
        .map(|h| h.as_str().to_owned())
        .collect();
    assert_eq!(names, ["authorization", "x-api-key", "x-plan"]);
}

/// What `check-config` says agrees with its numbers.
#[test]
fn the_summary_agrees_with_its_numbers() {
    let one = parse(&[
        "rules:",
        "  - { name: a, algorithm: gcra, limit: 1, period: 1s }",
    ]);
    assert_eq!(one.summary(), "1 rule");
    let two = parse(&[
        "rules:",
        "  - { name: a, algorithm: gcra, limit: 1, period: 1s }",
        "  - { name: b, algorithm: gcra, limit: 1, period: 1s }",
    ]);
    assert_eq!(two.summary(), "2 rules");
}
