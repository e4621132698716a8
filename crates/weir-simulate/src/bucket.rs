//! The plot's buckets of time: round widths a reader can say ("per 500 ms", "per 1 s",
//! "per 5 min"), taken from a fixed ladder rather than the span divided exactly (which
//! gave "per 749.75ms").

use std::time::Duration;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const MIN: u64 = 60 * S;
const H: u64 = 60 * MIN;
const D: u64 = 24 * H;

/// Round widths (ns), smallest first: 1, 2, 5 x 10^k up to 500 ms (a trace's times are
/// whole milliseconds, a pattern's finer), then the steps a clock is read in. Past the
/// last rung, widths are whole days.
const LADDER: [u64; 34] = [
    US,
    2 * US,
    5 * US,
    10 * US,
    20 * US,
    50 * US,
    100 * US,
    200 * US,
    500 * US,
    MS,
    2 * MS,
    5 * MS,
    10 * MS,
    20 * MS,
    50 * MS,
    100 * MS,
    200 * MS,
    500 * MS,
    S,
    2 * S,
    5 * S,
    10 * S,
    15 * S,
    30 * S,
    MIN,
    2 * MIN,
    5 * MIN,
    10 * MIN,
    15 * MIN,
    30 * MIN,
    H,
    3 * H,
    6 * H,
    12 * H,
];

/// The narrowest round width (ns) that covers `span` ns in at most `most` buckets
/// (`most >= 1`), so the plot keeps its detail without a width no one would say.
pub(crate) fn width(span: u64, most: u64) -> u64 {
    let least = span.div_ceil(most.max(1)).max(1);
    LADDER
        .iter()
        .copied()
        .find(|&rung| rung >= least)
        .unwrap_or_else(|| least.div_ceil(D) * D)
}

/// A width in the largest unit that divides it, as a reader says it: `750 ms`, `1 s`,
/// `5 min`. Units are the SI symbols, `min` for minutes.
pub(crate) fn name(width: Duration) -> String {
    let ns = width.as_nanos();
    let units = [
        (D, "d"),
        (H, "h"),
        (MIN, "min"),
        (S, "s"),
        (MS, "ms"),
        (US, "µs"),
    ];
    for (size, unit) in units {
        let size = u128::from(size);
        if ns >= size && ns.is_multiple_of(size) {
            return format!("{} {unit}", ns / size);
        }
    }
    format!("{ns} ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_the_narrowest_round_rung_that_fits() {
        // 149.95 s in 200 buckets would be 749.75 ms: the next rung is 1 s.
        assert_eq!(width(149_950 * MS, 200), S);
        // Exactly on a rung: that rung.
        assert_eq!(width(100 * MS, 200), 500 * US);
        assert_eq!(width(10 * H, 200), 5 * MIN);
        // Nothing to cover: the smallest rung.
        assert_eq!(width(0, 200), US);
        // Past the ladder: whole days.
        assert_eq!(width(400 * D, 200), 2 * D);
    }

    #[test]
    fn every_rung_is_named_in_one_unit() {
        for rung in LADDER {
            let text = name(Duration::from_nanos(rung));
            let (number, unit) = text.split_once(' ').unwrap_or_default();
            assert!(number.parse::<u64>().is_ok() && !unit.is_empty(), "{text}");
        }
        for (ns, text) in [
            (750 * MS, "750 ms"),
            (S, "1 s"),
            (90 * S, "90 s"),
            (5 * MIN, "5 min"),
            (12 * H, "12 h"),
            (2 * D, "2 d"),
            (500 * US, "500 µs"),
            (7, "7 ns"),
        ] {
            assert_eq!(name(Duration::from_nanos(ns)), text);
        }
    }
}
