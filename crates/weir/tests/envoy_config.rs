//! `weir check-config` on envoyproxy/ratelimit's own configuration test files
//! (`tests/envoy/upstream`, copied unchanged): the files that service accepts are
//! accepted, and each it refuses is refused with the same reason, naming the file, the
//! line and the field.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

#[path = "envoy/harness.rs"]
mod harness;

use common::weir;
use harness::{config_dir, fixture};

/// `check-config` on an `envoy:` section over `files`: success, standard output and
/// standard error.
fn check(files: &[(&str, String)]) -> (bool, String, String) {
    check_with(files, "")
}

/// [`check`] with `options` in the `envoy:` section.
fn check_with(files: &[(&str, String)], options: &str) -> (bool, String, String) {
    let dir = config_dir(files, options, "");
    let out = weir()
        .arg("check-config")
        .arg("weir.yaml")
        .current_dir(dir.path())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_files_upstream_accepts_are_accepted() {
    for name in [
        "basic_config.yaml",
        "wildcard.yaml",
        "shadowmode_config.yaml",
        "metadata.yaml",
        "merge_domain_key1.yaml",
        "merge_domain_key2.yaml",
    ] {
        let (ok, stdout, stderr) = check(&[fixture(name)]);
        assert!(ok, "{name}: {stderr}");
        assert!(
            stdout.contains("ok (0 rules, 1 envoy domain from 1 file in rl)"),
            "{name}: {stdout}"
        );
    }
    let (ok, _, stderr) = check(&[fixture("share_threshold.yaml")]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = check(&[fixture("basic_config.yaml"), fixture("wildcard.yaml")]);
    assert!(!ok, "two files of one domain: {stdout}");
    assert!(
        stderr.contains("duplicate domain `test-domain`"),
        "{stderr}"
    );
}

#[test]
fn the_files_upstream_refuses_are_refused_with_file_line_and_field() {
    let cases = [
        (
            "bad_limit_unit.yaml",
            "rl/bad_limit_unit.yaml:6:13: descriptors[0].rate_limit.unit: invalid rate limit unit 'foo'",
        ),
        (
            "bad_yaml.yaml",
            "rl/bad_yaml.yaml:1:1: this quote is never closed",
        ),
        (
            "empty_domain.yaml",
            "rl/empty_domain.yaml:1:1: domain: config file cannot have empty domain",
        ),
        (
            "duplicate_key.yaml",
            "rl/duplicate_key.yaml:6:5: descriptors[1].key: duplicate descriptor composite key `test-domain.key1_value1`",
        ),
        (
            "empty_key.yaml",
            "rl/empty_key.yaml:3:5: descriptors[0].key: descriptor has empty key",
        ),
        (
            "misspelled_key.yaml",
            "rl/misspelled_key.yaml:5:5: descriptors[0].ratelimit: unknown field `ratelimit`",
        ),
        (
            "misspelled_key2.yaml",
            "rl/misspelled_key2.yaml:7:7: descriptors[0].rate_limit.requestsperunit: unknown field `requestsperunit`",
        ),
        (
            "non_map_list.yaml",
            "rl/non_map_list.yaml:3:5: descriptors[0]: expected fields here",
        ),
        (
            "non_string_key.yaml",
            "rl/non_string_key.yaml:1:1: 0.25: config error, key is not of type string: 0.25",
        ),
        (
            "replaces_empty.yaml",
            "rl/replaces_empty.yaml:10:15: descriptors[0].descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces entry",
        ),
        (
            "replaces_self.yaml",
            "rl/replaces_self.yaml:10:15: descriptors[0].descriptors[0].rate_limit.replaces[0].name: replaces should not contain name of same descriptor",
        ),
        (
            "unlimited_with_unit.yaml",
            "rl/unlimited_with_unit.yaml:6:13: descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited",
        ),
    ];
    for (name, want) in cases {
        let (ok, _, stderr) = check(&[fixture(name)]);
        assert!(!ok, "{name} accepted");
        assert!(
            stderr.starts_with(&format!("weir: {want}")),
            "{name}: {stderr}"
        );
    }
    // duplicate_domain.yaml beside basic_config.yaml (same domain), as upstream tests it.
    let (ok, _, stderr) = check(&[
        fixture("basic_config.yaml"),
        fixture("duplicate_domain.yaml"),
    ]);
    assert!(!ok);
    assert!(
        stderr.starts_with(
            "weir: rl/duplicate_domain.yaml:1:9: domain: duplicate domain `test-domain`"
        ),
        "{stderr}"
    );
}

#[test]
fn weir_refuses_what_it_does_not_implement_and_bad_values() {
    let cases = [
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
            "rl/a.yaml:4:51: descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number, got `-1`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n",
            "rl/a.yaml:4:17: descriptors[0].rate_limit.unit: invalid rate limit unit ''",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n",
            "rl/a.yaml:3:5: descriptors[0].share_threshold: share_threshold can only be used with wildcard values",
        ),
        (
            "# nothing\n",
            "rl/a.yaml:1:1: domain: config file cannot have empty domain",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    x-weir: {period: 30s}\n",
            "rl/a.yaml:4:13: descriptors[0].x-weir: x-weir needs a rate_limit beside it",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir: {algorithm: gcrb}\n",
            "rl/a.yaml:5:25: descriptors[0].x-weir.algorithm: unknown variant `gcrb`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir: {algorithm: concurrency}\n",
            "rl/a.yaml:5:13: descriptors[0].x-weir.algorithm: `concurrency` cannot limit an Envoy descriptor: Envoy asks before a request and never says when it ends",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir: {burst: 5}\n",
            "rl/a.yaml:5:21: descriptors[0].x-weir: burst applies to token_bucket, gcra and leaky_bucket",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir:\n      also:\n        - {requests_per_unit: 5, unit: minute, burts: 3}\n",
            "rl/a.yaml:7:48: descriptors[0].x-weir.also[0].burts: unknown field `burts`, expected one of requests_per_unit, unit, name, algorithm, period, burst",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir:\n      also:\n        - {requests_per_unit: 5}\n",
            "rl/a.yaml:7:11: descriptors[0].x-weir.also[0].unit: each limit of `also` needs a unit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir:\n      also:\n        - {requests_per_unit: 0, unit: day}\n",
            "rl/a.yaml:7:11: descriptors[0].x-weir.also[0].requests_per_unit: each limit of `also` needs a requests_per_unit of 1 or more",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir:\n      also:\n        - {requests_per_unit: 5, unit: dya}\n",
            "rl/a.yaml:7:40: descriptors[0].x-weir.also[0].unit: invalid rate limit unit 'dya'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir:\n      also:\n        - {requests_per_unit: 5, unit: day, burst: 3}\n",
            "rl/a.yaml:7:52: descriptors[0].x-weir.also[0]: burst applies to token_bucket, gcra and leaky_bucket, not to fixed_window",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    x-weir: {lease: auto}\n",
            "rl/a.yaml:5:21: descriptors[0].x-weir.lease: leases are for token_bucket and gcra, not fixed_window",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10}\n    x-weir: {algorithm: gcra, lease: {batch: 5, hold: 1s, x: 1}}\n",
            "rl/a.yaml:5:59: descriptors[0].x-weir.lease.x: unknown field `x`, expected one of batch, hold",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10}\n    x-weir:\n      algorithm: gcra\n      lease: auto\n      also: [{requests_per_unit: 5, unit: day}]\n",
            "rl/a.yaml:7:14: descriptors[0].x-weir.lease: also[0] (a lease leases every limit): leases are for token_bucket and gcra, not fixed_window",
        ),
    ];
    for (text, want) in cases {
        let (ok, _, stderr) = check(&[("a.yaml", text.to_owned())]);
        assert!(!ok, "{text} accepted");
        assert!(
            stderr.starts_with(&format!("weir: {want}")),
            "{text}: {stderr}"
        );
    }
    // A number where a string is wanted is read as its text, as upstream reads it.
    let (ok, _, stderr) = check(&[(
        "a.yaml",
        "domain: d\ndescriptors:\n  - key: k\n    value: 12\n    rate_limit: {unit: SECOND, requests_per_unit: 1}\n".to_owned(),
    )]);
    assert!(ok, "{stderr}");
}

#[test]
fn a_missing_directory_names_the_section() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("weir.yaml"),
        "envoy:\n  config_dir: nowhere\n",
    )
    .unwrap();
    let out = weir()
        .arg("check-config")
        .arg("weir.yaml")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("weir: weir.yaml:2:15: envoy.config_dir: cannot read `nowhere`"),
        "{stderr}"
    );
}

#[test]
fn the_examples_are_valid() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy");
    for (config, summary) in [
        ("weir.yaml", "ok (0 rules, 1 envoy domain from 1 file in"),
        ("ai/weir.yaml", "ok (0 rules, 1 envoy domain from 1 file in"),
    ] {
        let out = weir()
            .arg("check-config")
            .arg(examples.join(config))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{config}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(summary), "{config}: {stdout}");
    }
}

/// `merge_domains: true` (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`): one domain
/// over several files (upstream's `merge_domain_key*.yaml`); a key given twice across
/// them is still refused, naming the file and line.
#[test]
fn merge_domains_reads_one_domain_from_several_files() {
    let files = [
        fixture("merge_domain_key1.yaml"),
        fixture("merge_domain_key2.yaml"),
    ];
    let (ok, stdout, stderr) = check_with(&files, "  merge_domains: true\n");
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("ok (0 rules, 1 envoy domain from 2 files in rl)"),
        "{stdout}"
    );
    let (ok, _, stderr) = check(&files);
    assert!(!ok);
    assert!(
        stderr.contains("rl/merge_domain_key2.yaml:2:9: domain: duplicate domain `test-domain`: each domain is configured in one file (unless `merge_domains: true` in the `envoy` section)"),
        "{stderr}"
    );
    let again = (
        "z.yaml",
        "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n".to_owned(),
    );
    let (ok, _, stderr) = check_with(&[files[0].clone(), again], "  merge_domains: true\n");
    assert!(!ok);
    assert!(
        stderr.contains("rl/z.yaml:3:5: descriptors[0].key: duplicate descriptor composite key `test-domain.key1_value1`"),
        "{stderr}"
    );
}
