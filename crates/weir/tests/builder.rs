//! `ConfigBuilder` against the file: what a built rule matches, and inputs no file
//! would hold (control characters, quotes, braces, unicode) built or refused, never a
//! panic.
#![allow(clippy::unwrap_used, reason = "test")]

use std::time::Duration;

use weir::{ConfigBuilder, RuleBuilder};
use weir_core::{Algorithm, Policy};

fn gcra() -> Policy {
    Policy::new(Algorithm::Gcra, 10, Duration::from_secs(60), None).unwrap()
}

/// Odd inputs are built or refused, and the refusals that a file makes are made.
#[test]
fn odd_inputs_never_panic_the_builder() {
    let cases: Vec<(&str, ConfigBuilder)> = vec![
        (
            "name newline",
            ConfigBuilder::new().rule(RuleBuilder::new("a\nb", gcra())),
        ),
        (
            "path quote",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\"b")),
        ),
        (
            "path DEL",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\u{7f}")),
        ),
        (
            "path C1",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\u{85}b")),
        ),
        (
            "path BOM",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a\u{feff}")),
        ),
        (
            "path unicode",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/é")),
        ),
        (
            "path brace",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/{id}")),
        ),
        (
            "host unicode",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).host("bücher.example")),
        ),
        (
            "host upper",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).host("API.Example.")),
        ),
        (
            "header quote",
            ConfigBuilder::new()
                .identity_from_header("u", "x-\"a")
                .rule(RuleBuilder::new("a", gcra()).key(["u"])),
        ),
        (
            "identity name weird",
            ConfigBuilder::new()
                .identity_from_header("u: {x", "x-a")
                .rule(RuleBuilder::new("a", gcra()).key(["u: {x"])),
        ),
        (
            "identity long",
            ConfigBuilder::new()
                .identity_from_header("u".repeat(2000), "x-a")
                .rule(RuleBuilder::new("a", gcra())),
        ),
        (
            "methods empty",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).methods([])),
        ),
        (
            "methods bad",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).methods(["G ET"])),
        ),
        (
            "path and prefix",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).path("/a").path_prefix("/b")),
        ),
        (
            "cost 0",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).cost(0)),
        ),
        (
            "cost huge",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).cost(u64::MAX)),
        ),
        (
            "key empty",
            ConfigBuilder::new().rule(RuleBuilder::new("a", gcra()).key([])),
        ),
        (
            "dup identity",
            ConfigBuilder::new()
                .identity_from_header("u", "x-a")
                .identity_from_header("u", "x-b")
                .rule(RuleBuilder::new("a", gcra()).key(["u"])),
        ),
        (
            "dup rule",
            ConfigBuilder::new()
                .rule(RuleBuilder::new("a", gcra()))
                .rule(RuleBuilder::new("a", gcra())),
        ),
        (
            "redis bad",
            ConfigBuilder::new()
                .redis("http://x\n  type: memory")
                .rule(RuleBuilder::new("a", gcra())),
        ),
        ("no rules", ConfigBuilder::new()),
        (
            "year",
            ConfigBuilder::new().rule(RuleBuilder::new(
                "a",
                Policy::new(
                    Algorithm::FixedWindow,
                    10,
                    Duration::from_secs(366 * 86400),
                    None,
                )
                .unwrap(),
            )),
        ),
        (
            "sliding_log big",
            ConfigBuilder::new().rule(RuleBuilder::new(
                "a",
                Policy::new(Algorithm::SlidingLog, 10_000, Duration::from_secs(1), None).unwrap(),
            )),
        ),
        (
            "leaky",
            ConfigBuilder::new().rule(RuleBuilder::new(
                "a",
                Policy::new(Algorithm::LeakyBucket, 10, Duration::from_secs(1), Some(3)).unwrap(),
            )),
        ),
    ];
    let refused = [
        "name newline",
        "methods bad",
        "path and prefix",
        "key empty",
        "dup identity",
        "dup rule",
        "no rules",
    ];
    for (what, builder) in cases {
        let built = builder.build();
        if refused.contains(&what) {
            assert!(built.is_err(), "{what} should be refused");
        }
    }
}
