//! The `weir simulate` command end to end: the real binary prints the table, writes its
//! SVG plot, reads a weir configuration's rules, and refuses bad input with exit code 1
//! (the simulator itself is tested in `crates/weir-simulate/tests/simulate.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use std::path::Path;
use std::process::Command;

/// The `weir` binary under test.
fn weir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weir"))
}

/// Runs `command`, which must succeed; returns its standard output.
fn stdout_of(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The fields of the table row of rule `name` in `stdout`.
fn row<'a>(stdout: &'a str, name: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row for {name} in {stdout}"))
        .split_whitespace()
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_binary_prints_the_table_and_writes_an_svg_plot() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("timestamp_ms,key,cost\n");
    for _ in 0..10 {
        csv.push_str("59900,a,1\n");
    }
    for _ in 0..10 {
        csv.push_str("60000,a\n");
    }
    let trace = write(dir.path(), "trace.csv", &csv);
    let plot = dir.path().join("out.svg");
    let stdout = stdout_of(
        weir()
            .args([
                "simulate",
                "--rule-spec",
                "fixed_window:10/1m",
                "--rule-spec",
                "sliding_log:10/1m",
                "--trace",
            ])
            .arg(&trace)
            .arg("--plot")
            .arg(&plot),
    );
    assert!(stdout.contains("20 requests, 1 key"), "{stdout}");
    let numbers = |name: &str| row(&stdout, name)[3..].join(" ");
    // attempts, admitted, denied, retry waste, worst window, where it ends, key.
    assert_eq!(
        numbers("fixed_window:10/1m"),
        "20 20 0 0 20 (2.00x) +0.100s, a"
    );
    assert_eq!(
        numbers("sliding_log:10/1m"),
        "20 10 10 9 10 (1.00x) +0.000s, a"
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg:.200}"
    );
    assert!(
        svg.contains("fixed_window:10/1m") && svg.contains("admitted") && svg.contains("denied")
    );
    // The plot says what the table says, against the limit.
    assert!(
        svg.contains("worst window 2.00x the limit")
            && svg.contains("most admitted to one key in 1m")
            && svg.contains("limit (10/1m)"),
        "{svg:.200}"
    );
}

#[test]
fn a_missing_trace_names_the_system_error_once() {
    let out = weir()
        .args([
            "simulate",
            "--rule-spec",
            "gcra:1/1s",
            "--trace",
            "/nonexistent.csv",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "weir: /nonexistent.csv: No such file or directory (os error 2)\n"
    );
}

#[test]
fn the_binary_simulates_a_configs_rules_on_a_pattern() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/basic.yaml");
    let stdout = stdout_of(weir().args(["simulate", "--config"]).arg(&config).args([
        "--rule",
        "search",
        "--rule",
        "search-smooth",
        "--pattern",
        "boundary-burst",
    ]));
    // 60 a minute each: 60 requests at 59.9 s and 60 at 60 s.
    assert!(stdout.contains("120 requests"), "{stdout}");
    let admitted = |name: &str| row(&stdout, name)[4].to_owned();
    assert_eq!(admitted("search"), "120");
    assert_eq!(admitted("search-smooth"), "60");
}

/// Milliseconds since the epoch of an RFC 3339 instant.
fn ms(instant: &str) -> i64 {
    let t: jiff::Timestamp = instant.parse().unwrap();
    t.as_millisecond()
}

/// A calendar rule decides as the engine does: windows in its time zone across a
/// month's end and a daylight-saving day, on the trace's clock and on a pattern's
/// from time 0 (where January 1970 in Berlin began before the epoch).
#[test]
fn the_binary_simulates_calendar_rules_in_their_time_zone() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "weir.yaml",
        "rules:\n  - name: monthly\n    algorithm: fixed_window\n    limit: 2\n    period: calendar_month\n    time_zone: Europe/Berlin\n  - name: daily\n    algorithm: fixed_window\n    limit: 1\n    period: calendar_day\n    time_zone: Europe/Berlin\n",
    );
    let mut csv = String::from("timestamp_ms,key\n");
    // Berlin springs forward on 2027-03-28: that day runs from 23:00Z to 22:00Z.
    for instant in [
        "2027-03-27T23:00:00Z",
        "2027-03-28T21:59:59.999Z",
        "2027-03-28T22:00:00Z",
    ] {
        csv.push_str(&format!("{},d\n", ms(instant)));
    }
    // April starts in Berlin at 22:00Z on March 31 (a UTC month would not yet).
    for instant in ["2027-03-31T21:59:59Z", "2027-03-31T22:00:00Z"] {
        for _ in 0..3 {
            csv.push_str(&format!("{},m\n", ms(instant)));
        }
    }
    let trace = write(dir.path(), "trace.csv", &csv);
    let stdout = stdout_of(
        weir()
            .args(["simulate", "--config"])
            .arg(&config)
            .arg("--trace")
            .arg(&trace),
    );
    // name, algorithm, limit (two words), attempts, admitted, denied.
    let counts = |name: &str| row(&stdout, name)[2..7].join(" ");
    assert_eq!(
        counts("monthly"),
        "2/calendar_month Europe/Berlin 9 6 3",
        "{stdout}"
    );
    assert_eq!(
        counts("daily"),
        "1/calendar_day Europe/Berlin 9 4 5",
        "{stdout}"
    );

    // 173 requests, one every 1000 s from time 0 to 172,000 s: all in January 1970
    // in Berlin, so 2 admitted for the month (not 2 a UTC day), and 1 in each Berlin
    // day: the first from 0 to 23:00Z, then to 23:00Z on the 2nd, then the 3rd's.
    let stdout = stdout_of(weir().args(["simulate", "--config"]).arg(&config).args([
        "--pattern",
        "steady",
        "--rate",
        "0.001",
        "--duration",
        "2d",
    ]));
    assert_eq!(counts_of(&stdout, "monthly"), "173 2 171", "{stdout}");
    assert_eq!(counts_of(&stdout, "daily"), "173 3 170", "{stdout}");

    // The boundary burst falls on the calendar's first boundary: 1970-01-31 23:00Z.
    let stdout = stdout_of(weir().args(["simulate", "--config"]).arg(&config).args([
        "--rule",
        "monthly",
        "--pattern",
        "boundary-burst",
    ]));
    assert_eq!(counts_of(&stdout, "monthly"), "4 4 0", "{stdout}");
}

/// Attempts, admitted and denied of rule `name`, whose limit is two words.
fn counts_of(stdout: &str, name: &str) -> String {
    row(stdout, name)[4..7].join(" ")
}

#[test]
fn the_binary_refuses_bad_input_with_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write(dir.path(), "trace.csv", "1000,a\n2000,b,many\n");
    for (args, message) in [
        (
            vec![
                "--rule-spec",
                "gcra:1/1s",
                "--trace",
                trace.to_str().unwrap(),
            ],
            ":2: cost `many`",
        ),
        (
            vec!["--rule-spec", "gcra:1/1m/2", "--pattern", "steady"],
            "invalid rule spec",
        ),
        (vec!["--pattern", "steady"], "no rules"),
        (
            vec![
                "--rule-spec",
                "gcra:1/1s",
                "--pattern",
                "bot",
                "--plot",
                "x.png",
            ],
            "PNG plots are not supported",
        ),
        (
            vec![
                "--rule-spec",
                "gcra:1/1s",
                "--pattern",
                "steady",
                "--gap",
                "1s",
            ],
            "--gap does not apply",
        ),
        (
            vec!["--rule-spec", "gcra:1/1s", "--trace", "/nonexistent.csv"],
            "/nonexistent.csv: ",
        ),
    ] {
        let out = weir().arg("simulate").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("weir: ") && stderr.contains(message),
            "{args:?}: {stderr}"
        );
    }
    // Unknown pattern: clap's own error, exit code 2.
    let out = weir()
        .args(["simulate", "--rule-spec", "gcra:1/1s", "--pattern", "flood"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn simulate_fleet_is_a_subcommand_with_its_own_help() {
    let help = stdout_of(weir().args(["simulate", "fleet", "--help"]));
    for flag in ["--scenario", "--seed", "--plot", "--report"] {
        assert!(help.contains(flag), "{flag} missing from {help}");
    }
    let help = stdout_of(weir().args(["simulate", "--help"]));
    assert!(help.contains("weir simulate fleet"), "{help}");
}

#[test]
fn simulate_fleet_writes_its_report_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/small.yaml");
    let (plot, report) = (dir.path().join("fleet.svg"), dir.path().join("fleet.md"));
    let stdout = stdout_of(weir().args([
        "simulate".as_ref(),
        "fleet".as_ref(),
        "--scenario".as_ref(),
        scenario.as_os_str(),
        "--seed".as_ref(),
        "3".as_ref(),
        "--plot".as_ref(),
        plot.as_os_str(),
        "--report".as_ref(),
        report.as_os_str(),
    ]));
    assert!(
        stdout.starts_with("# weir simulate fleet: a small fleet"),
        "{stdout}"
    );
    let written = std::fs::read_to_string(&report).unwrap();
    assert_eq!(written.trim_end(), stdout.trim_end());
    the_fleet_plot_reads_against_each_rules_bound(&std::fs::read_to_string(&plot).unwrap());

    let missing = weir()
        .args(["simulate", "fleet", "--scenario", "/nonexistent/fleet.yaml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/fleet.yaml"));
}

/// The fleet plot, read as XML: each rule against its own bound (the legend gives it:
/// free, 60 a minute with a burst of 60, is held to 120), the shaded shift and failure
/// in colours no line uses and shown in the legend as filled swatches, and counts
/// labelled as whole numbers.
fn the_fleet_plot_reads_against_each_rules_bound(svg: &str) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let texts: Vec<&str> = doc.descendants().filter_map(svg_text).collect();
    for label in [
        "worst key / its bound, with leases",
        "1.0: burst + a period's refill",
        "free (bound 120)",
        "enterprise (bound 2,400)",
        "Redis calls per second",
    ] {
        assert!(texts.contains(&label), "{label:?} not in {texts:?}");
    }
    // A swatch is drawn just before its label.
    let swatch = |label: &str| {
        let text = doc
            .descendants()
            .find(|&n| svg_text(n) == Some(label))
            .unwrap_or_else(|| panic!("no legend entry {label:?}"));
        text.prev_sibling_element().unwrap()
    };
    let strokes: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter_map(|n| n.attribute("stroke"))
        .collect();
    // A shading is grey, or 30 degrees of hue from every line of a colour (the
    // failure was red, over a red line).
    for band in ["shift eu-west -> us-east", "shard 1 of us-east down"] {
        let rect = swatch(band);
        assert_eq!(rect.tag_name().name(), "rect", "{band}");
        let fill = rect.attribute("fill").unwrap();
        let Some(shade) = hue(fill).unwrap() else {
            continue;
        };
        for stroke in &strokes {
            if let Some(Some(line)) = hue(stroke) {
                let apart = (shade - line).abs();
                assert!(
                    apart.min(360.0 - apart) >= 30.0,
                    "{band}: {fill} near a line's {stroke}"
                );
            }
        }
    }
    assert_eq!(swatch("free (bound 120)").tag_name().name(), "polyline");
    // No axis label like "5.0".
    let found: Vec<&str> = texts.iter().copied().filter(|t| zero_fraction(t)).collect();
    assert!(found.is_empty(), "{found:?}");
}

/// A `<text>`'s content, without the line breaks plotters puts around it.
fn svg_text<'a>(node: roxmltree::Node<'a, '_>) -> Option<&'a str> {
    node.has_tag_name("text")
        .then(|| node.text())
        .flatten()
        .map(str::trim)
}

/// A label that is a number written with a zero fraction: `5.0`, `120.00`.
fn zero_fraction(text: &str) -> bool {
    text.split_once('.').is_some_and(|(whole, fraction)| {
        !whole.is_empty()
            && whole.chars().all(|c| c.is_ascii_digit())
            && !fraction.is_empty()
            && fraction.chars().all(|c| c == '0')
    })
}

/// The hue (degrees) of an SVG colour `#RRGGBB`: `Some(None)` for a grey, which has
/// none; `None` if it is not such a colour.
fn hue(colour: &str) -> Option<Option<f64>> {
    let hex = colour.strip_prefix('#').filter(|h| h.len() == 6)?;
    let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok().map(f64::from);
    let (r, g, b) = (channel(0)?, channel(2)?, channel(4)?);
    let (max, min) = (r.max(g).max(b), r.min(g).min(b));
    if max - min < 1.0 {
        return Some(None);
    }
    let d = max - min;
    let h = if max == r {
        ((g - b) / d).rem_euclid(6.0)
    } else if max == g {
        (b - r) / d + 2.0
    } else {
        (r - g) / d + 4.0
    };
    Some(Some(h * 60.0))
}
