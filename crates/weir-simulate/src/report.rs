//! What a simulation found, per rule, and the table it is printed as.

use std::fmt::{self, Write as _};
use std::time::Duration;

use weir_core::Policy;

use super::bucket;

/// The most a rule admitted to one key within one trailing period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worst {
    /// Cost admitted in that period.
    pub admitted: u64,
    /// When the period ended (ns on the virtual clock): the admission that filled it.
    pub at: u64,
    /// Whose key.
    pub key: String,
}

/// Requests admitted and denied per bucket of time, and what the worst window counts,
/// for the plot. The buckets cover the traffic itself, from its first request to its
/// last, so a burst at the end of a long quiet stretch fills the plot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// Where the first bucket starts (ns).
    pub start: u64,
    /// Each bucket's length (ns): a round duration (1, 2, 5 x 10^k up to 500 ms, then
    /// 1, 2, 5, 10, 15, 30 s and min, 1, 3, 6, 12 h, whole days), so the plot says
    /// "per 500 ms", never "per 749.75ms".
    pub width: u64,
    /// Requests admitted per bucket.
    pub admitted: Vec<u64>,
    /// Requests denied per bucket.
    pub denied: Vec<u64>,
    /// Per bucket, the most cost admitted to one key in one trailing period (of the
    /// rule's length) ending at an admission in the bucket; 0 where nothing was
    /// admitted. Its largest value is the table's worst window: this is what the plot
    /// draws against the limit.
    pub trailing: Vec<u64>,
}

impl Series {
    /// Empty buckets covering `start..=end` (ns), of the narrowest round width that
    /// needs at most `most` buckets for the span (and one more for `end` itself).
    pub(super) fn new(start: u64, end: u64, most: u64) -> Self {
        let span = end.saturating_sub(start);
        let width = bucket::width(span, most);
        let len = (span / width + 1) as usize;
        Self {
            start,
            width,
            admitted: vec![0; len],
            denied: vec![0; len],
            trailing: vec![0; len],
        }
    }

    fn bucket(&self, at: u64) -> usize {
        let last = self.admitted.len() - 1;
        (((at.saturating_sub(self.start)) / self.width) as usize).min(last)
    }

    pub(super) fn count(&mut self, at: u64, allowed: bool) {
        let bucket = self.bucket(at);
        if allowed {
            self.admitted[bucket] += 1;
        } else {
            self.denied[bucket] += 1;
        }
    }

    /// An admission at `at` left `in_window` admitted to its key in the trailing period.
    pub(super) fn trailing(&mut self, at: u64, in_window: u64) {
        let bucket = self.bucket(at);
        self.trailing[bucket] = self.trailing[bucket].max(in_window);
    }
}

/// What one rule did with the traffic.
#[derive(Debug, Clone)]
pub struct RuleReport {
    /// The rule's name (a rule spec is its own name).
    pub name: String,
    /// Its policy.
    pub policy: Policy,
    /// Requests checked (first attempts and retries alike).
    pub attempts: u64,
    /// Attempts admitted.
    pub admitted: u64,
    /// Attempts denied.
    pub denied: u64,
    /// Denied attempts sent before the `Retry-After` of the same client's previous
    /// denial had passed: requests a client honouring `Retry-After` would not have
    /// sent. In a trace, a key is one client.
    pub retry_waste: u64,
    /// The most admitted to one key in one trailing period (`None`: nothing admitted).
    pub worst: Option<Worst>,
    /// Admitted and denied over time.
    pub series: Series,
}

impl RuleReport {
    /// The worst window's admitted cost over the limit: at most 1.0 for an exact
    /// sliding log, up to 2.0 for a fixed window at a boundary, above 1.0 for buckets
    /// whose burst lets a full bucket and a period's refill through together.
    pub fn overshoot(&self) -> f64 {
        self.worst
            .as_ref()
            .map_or(0.0, |w| w.admitted as f64 / self.policy.limit() as f64)
    }
}

/// The simulation's findings: a report per rule, in the order the rules were given.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Where the traffic started (ns): times are printed from here.
    pub start: u64,
    /// Per rule.
    pub rules: Vec<RuleReport>,
    /// For retrying clients: how many requests they wanted to make (first attempts,
    /// had nothing been denied).
    pub demand: Option<u64>,
}

impl Outcome {
    /// The table printed by `weir simulate`: a line per rule.
    pub fn table(&self) -> String {
        let header = [
            "rule",
            "algorithm",
            "limit",
            "attempts",
            "admitted",
            "denied",
            "retry waste",
            "worst window",
            "ends at, key",
        ];
        let rows: Vec<[String; 9]> = self
            .rules
            .iter()
            .map(|r| {
                let (worst, at) = match &r.worst {
                    Some(w) => (
                        format!("{} ({:.2}x)", w.admitted, r.overshoot()),
                        format!("{}, {}", Seconds(w.at - self.start), w.key),
                    ),
                    None => ("0".to_owned(), "-".to_owned()),
                };
                [
                    r.name.clone(),
                    r.policy.algorithm().to_string(),
                    limit(&r.policy),
                    r.attempts.to_string(),
                    r.admitted.to_string(),
                    r.denied.to_string(),
                    r.retry_waste.to_string(),
                    worst,
                    at,
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: [&str; 9]| {
            let mut text = String::new();
            for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
                let pad = width - cell.chars().count();
                // Names left, numbers right, the last column unpadded.
                match i {
                    0..=2 => {
                        text.push_str(cell);
                        text.extend(std::iter::repeat_n(' ', pad));
                    }
                    8 => text.push_str(cell),
                    _ => {
                        text.extend(std::iter::repeat_n(' ', pad));
                        text.push_str(cell);
                    }
                }
                text.push_str("  ");
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        line(header);
        for row in &rows {
            line(row.each_ref().map(String::as_str));
        }
        out
    }
}

/// `limit/period` as a configuration writes it, with a burst when one is set:
/// `100/1m`, `100/1m burst 20`, `100/calendar_month Europe/Berlin`.
pub(crate) fn limit(policy: &Policy) -> String {
    let every = match policy.calendar() {
        Some(calendar) => calendar.name(),
        None => period(policy.period()),
    };
    let mut text = format!("{}/{every}", policy.limit());
    if let Some(burst) = policy.burst() {
        let _ = write!(text, " burst {burst}");
    }
    text
}

/// A period in the largest unit that divides it: `1m`, `90s`, `1500ms`.
pub(crate) fn period(period: Duration) -> String {
    let ms = period.as_millis();
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    for (size, unit) in units {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Nanoseconds from the start, printed as `+12.345s`.
pub(super) struct Seconds(pub(super) u64);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0 / 1_000_000;
        write!(f, "+{}.{:03}s", ms / 1000, ms % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_in_their_largest_unit() {
        for (ms, text) in [
            (60_000, "1m"),
            (90_000, "90s"),
            (1500, "1500ms"),
            (86_400_000, "1d"),
            (7_200_000, "2h"),
        ] {
            assert_eq!(period(Duration::from_millis(ms)), text);
        }
    }

    #[test]
    fn series_buckets_cover_the_span() {
        // 1 ms in at most 10 buckets: 100 µs each, and one for the end itself.
        let mut series = Series::new(1_000_000, 2_000_000, 10);
        assert_eq!((series.width, series.admitted.len()), (100_000, 11));
        series.count(1_000_000, true);
        series.count(1_999_999, false);
        series.count(5_000_000, false);
        assert_eq!(series.admitted[0], 1);
        assert_eq!(series.denied[9], 1);
        assert_eq!(series.denied[10], 1);
        // 7 ms in at most 10 buckets: not 700 µs but the next round width, 1 ms.
        let series = Series::new(0, 7_000_000, 10);
        assert_eq!((series.width, series.admitted.len()), (1_000_000, 8));
    }
}
