//! The plot as a reader sees it, read from the SVG as XML (no pixels compared): bucket
//! widths in round units, counts labelled as whole numbers, legend swatches drawn as
//! their entries are, and many rules laid out in a grid of bounded height.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failure, with its message"
)]

use weir_simulate::{Outcome, Progress, Trace, Traffic};

/// `requests` (ms, key) against `specs`, plotted: the SVG's text.
fn plot(specs: &[&str], requests: &[(u64, &str)]) -> String {
    let rules: Vec<_> = specs
        .iter()
        .map(|s| weir_simulate::from_spec(s).unwrap())
        .collect();
    let traffic: Traffic = Trace::from_requests(requests.iter().map(|&(ms, k)| (ms, k, 1))).into();
    let outcome: Outcome = weir_simulate::simulate(&rules, &traffic, &Progress::hidden());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plot.svg");
    weir_simulate::write_svg(&outcome, &path).unwrap();
    std::fs::read_to_string(&path).unwrap()
}

/// A `<text>`'s content, without the line breaks plotters puts around it.
fn text<'a>(node: roxmltree::Node<'a, '_>) -> Option<&'a str> {
    node.has_tag_name("text")
        .then(|| node.text())
        .flatten()
        .map(str::trim)
}

/// Every `<text>`'s content.
fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    doc.descendants()
        .filter_map(text)
        .map(str::to_owned)
        .collect()
}

/// The element drawn just before the legend label `label` (its swatch): its tag.
fn swatch<'a>(doc: &'a roxmltree::Document<'_>, label: &str) -> &'a str {
    let text = doc
        .descendants()
        .find(|&n| text(n) == Some(label))
        .unwrap_or_else(|| panic!("no legend entry {label:?}"));
    let before = text
        .prev_sibling_element()
        .expect("a swatch before the label");
    before.tag_name().name()
}

/// A label that is a number written with a zero fraction: `5.0`, `120.00`.
fn zero_fraction(text: &str) -> bool {
    text.split_once('.').is_some_and(|(whole, fraction)| {
        !whole.is_empty()
            && whole.chars().all(|c| c.is_ascii_digit() || c == '-')
            && !fraction.is_empty()
            && fraction.chars().all(|c| c == '0')
    })
}

#[test]
fn buckets_are_labelled_in_round_units() {
    // 149.95 s of traffic in 200 buckets would be 749.75 ms each: the plot takes 1 s.
    let svg = plot(&["gcra:10/1m"], &[(0, "a"), (75_000, "a"), (149_950, "a")]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts = texts(&doc);
    for label in ["per 1 s", "admitted per 1 s", "denied per 1 s"] {
        assert!(texts.iter().any(|t| t == label), "{label} not in {texts:?}");
    }
    assert!(!svg.contains("749.75"), "{texts:?}");
    // 100 ms of traffic (a boundary burst): per 500 µs.
    let burst: Vec<(u64, &str)> = [(59_900, "a"); 10]
        .into_iter()
        .chain([(60_000, "a"); 10])
        .collect();
    let svg = plot(&["fixed_window:10/1m"], &burst);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts = self::texts(&doc);
    assert!(texts.iter().any(|t| t == "per 500 µs"), "{texts:?}");
}

#[test]
fn counts_are_labelled_as_whole_numbers() {
    // Few requests, so plotters would step the count axes by 0.5 and write "5.0".
    let requests: Vec<(u64, &str)> = (0..5).map(|s| (s * 1000, "a")).collect();
    let svg = plot(&["fixed_window:3/1m", "sliding_log:5/1m"], &requests);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts = texts(&doc);
    let zero_fractions: Vec<&String> = texts.iter().filter(|t| zero_fraction(t)).collect();
    assert!(zero_fractions.is_empty(), "{zero_fractions:?}");
    // The counts' axes are labelled, in whole numbers.
    for count in ["0", "1", "2", "5"] {
        assert!(texts.iter().any(|t| t == count), "{count} not in {texts:?}");
    }
}

#[test]
fn the_legend_shows_points_as_a_dot_and_lines_as_lines() {
    let svg = plot(&["fixed_window:10/1m"], &[(0, "a"), (30_000, "a")]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(swatch(&doc, "most admitted to one key in 1m"), "circle");
    assert_eq!(swatch(&doc, "limit (10/1m)"), "polyline");
    assert_eq!(swatch(&doc, "admitted per 200 ms"), "polyline");
    assert_eq!(swatch(&doc, "denied per 200 ms"), "polyline");
}

#[test]
fn six_rules_are_laid_out_in_a_grid_no_taller_than_three_panels() {
    let specs = [
        "fixed_window:10/1m",
        "sliding_window:10/1m",
        "sliding_log:10/1m",
        "token_bucket:10/1m:5",
        "gcra:10/1m",
        "leaky_bucket:10/1m:5",
    ];
    let svg = plot(&specs, &[(0, "a"), (1000, "a")]);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let root = doc.root_element();
    let size = |name| root.attribute(name).unwrap().parse::<u32>().unwrap();
    // Two columns of three panels of 440 px: it was one column, 2,640 px tall.
    assert_eq!((size("width"), size("height")), (2000, 1320));
    let captions = texts(&doc)
        .into_iter()
        .filter(|t| t.contains("worst window"))
        .count();
    assert_eq!(captions, 6);
}
