//! Traffic fixed in advance: timed requests, each on a key and with a cost, in time
//! order. Read from a CSV trace or an access log, or made by an open-loop pattern.
//!
//! Keys are interned (a number per distinct key) so the replay keeps each rule's
//! states in a vector instead of a map of strings: ten million requests fit in 160 MB
//! and replay without hashing.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::access_log;
use super::error::SimulateError;
use super::progress::Progress;

/// One request: when (nanoseconds on the virtual clock), whose key, at what cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) at: u64,
    pub(super) key: u32,
    /// Costs above `u32::MAX` are kept as `u32::MAX`: both are above any policy's
    /// capacity (at most a billion), so they are denied alike.
    pub(super) cost: u32,
}

/// Requests in time order, with the names of their keys.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    events: Vec<Event>,
    keys: Vec<Box<str>>,
    out_of_order: Option<OutOfOrder>,
    /// Where times are counted from in reports: the first request of a file, time 0
    /// for made-up traffic (whose times are chosen relative to the epoch).
    origin: u64,
}

/// Input lines that came earlier in time than a line before them. They are replayed
/// in time order (access logs are written as requests finish, so a slow request is
/// logged after later ones); this says how many there were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfOrder {
    /// How many requests were earlier than one read before them.
    pub count: u64,
    /// The first such line (1-based).
    pub first_line: u64,
}

impl Trace {
    /// Builds a trace from `(timestamp_ms, key, cost)` requests, in any order; reports
    /// count times from the Unix epoch.
    ///
    /// # Panics
    ///
    /// When a timestamp is past the year 2554 (nanoseconds overflow `u64`).
    #[expect(
        clippy::expect_used,
        reason = "documented: a constructor for tests and code"
    )]
    pub fn from_requests<'a>(requests: impl IntoIterator<Item = (u64, &'a str, u64)>) -> Self {
        let mut builder = Builder::default();
        for (ms, key, cost) in requests {
            let at = ms_to_ns(ms).expect("timestamp in range");
            builder.push(at, key, cost, 0);
        }
        builder.finish()
    }

    /// Reads a CSV trace: lines of `timestamp_ms,key[,cost]` (milliseconds since the
    /// Unix epoch; cost a whole number, default 1). A first line that does not start
    /// with a digit is a header; blank lines and lines starting with `#` are skipped.
    /// Keys cannot contain commas (there is no quoting).
    pub fn from_csv(path: &Path, progress: &Progress) -> Result<Self, SimulateError> {
        read_lines(path, progress, |line, text| {
            if line == 1 && !text.starts_with(|c: char| c.is_ascii_digit()) {
                return Ok(None);
            }
            csv_line(text).map(Some)
        })
    }

    /// Reads an access log in the common or combined log format: the client address
    /// (the first field) is the key, the `[10/Oct/2000:13:55:36 -0700]` time the
    /// request's time (whole seconds), every request costs 1.
    pub fn from_access_log(path: &Path, progress: &Progress) -> Result<Self, SimulateError> {
        read_lines(path, progress, |_, text| {
            access_log::line(text).map(|(ms, key)| Some((ms, key, 1)))
        })
    }

    /// How many requests.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether there are no requests.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Lines that were out of time order in the input, if any.
    pub fn out_of_order(&self) -> Option<OutOfOrder> {
        self.out_of_order
    }

    /// Where reports count time from, and the last request's time (ns).
    pub(super) fn span(&self) -> (u64, u64) {
        let last = self.events.last().map_or(self.origin, |e| e.at);
        (self.origin, last)
    }

    pub(super) fn events(&self) -> &[Event] {
        &self.events
    }

    pub(super) fn key_count(&self) -> usize {
        self.keys.len()
    }

    pub(super) fn key_name(&self, key: u32) -> &str {
        &self.keys[key as usize]
    }
}

/// Collects requests, interning keys and noting lines out of time order.
#[derive(Default)]
pub(super) struct Builder {
    index: HashMap<Box<str>, u32>,
    trace: Trace,
}

impl Builder {
    /// Adds a request at `at` ns; `line` is where it was read (0 when made up).
    pub(super) fn push(&mut self, at: u64, key: &str, cost: u64, line: u64) {
        let key = self.key(key);
        self.push_numbered(at, key, cost, line);
    }

    /// Adds a request on a key already numbered by [`Builder::key`].
    pub(super) fn push_numbered(&mut self, at: u64, key: u32, cost: u64, line: u64) {
        let events = &mut self.trace.events;
        if events.last().is_some_and(|last| last.at > at) {
            let disorder = self.trace.out_of_order.get_or_insert(OutOfOrder {
                count: 0,
                first_line: line,
            });
            disorder.count += 1;
        }
        events.push(Event {
            at,
            key,
            cost: u32::try_from(cost).unwrap_or(u32::MAX),
        });
    }

    /// The number of `key`, given on first sight.
    pub(super) fn key(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.index.get(key) {
            return id;
        }
        #[expect(
            clippy::expect_used,
            reason = "a trace is loaded whole, about 16 bytes a request: 2^32 keys would not fit"
        )]
        let id = u32::try_from(self.trace.keys.len()).expect("fewer than 2^32 keys");
        self.trace.keys.push(key.into());
        self.index.insert(key.into(), id);
        id
    }

    /// The trace in time order (stable: requests of one instant keep their order).
    pub(super) fn finish(mut self) -> Trace {
        if self.trace.out_of_order.is_some() {
            self.trace.events.sort_by_key(|e| e.at);
        }
        self.trace
    }
}

/// Milliseconds to nanoseconds, or `None` past the year 2554.
pub(super) fn ms_to_ns(ms: u64) -> Option<u64> {
    ms.checked_mul(1_000_000)
}

/// Reads `path` line by line; `parse` turns a line (number, text without the line end)
/// into a request, `None` to skip it, or a message for the error.
fn read_lines(
    path: &Path,
    progress: &Progress,
    mut parse: impl FnMut(u64, &str) -> Result<Option<(u64, &str, u64)>, String>,
) -> Result<Trace, SimulateError> {
    let io_error = |error| SimulateError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::open(path).map_err(io_error)?;
    let size = file.metadata().map_err(io_error)?.len();
    let bar = progress.bar("reading", size, size >= super::progress::LONG_FILE_BYTES);
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut builder = Builder::default();
    let mut buffer = Vec::new();
    let mut line = 0;
    // Bytes read since the bar was last advanced: it is advanced by the megabyte.
    let mut unreported = 0;
    loop {
        buffer.clear();
        let read = reader.read_until(b'\n', &mut buffer).map_err(io_error)?;
        if read == 0 {
            break;
        }
        line += 1;
        unreported += read as u64;
        if unreported >= 1 << 20 {
            bar.advance(unreported);
            unreported = 0;
        }
        let fail = |message: String| SimulateError::Trace {
            file: path.to_path_buf(),
            line,
            message,
        };
        let text = std::str::from_utf8(&buffer)
            .map_err(|_| fail("not UTF-8 text".to_owned()))?
            .trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() || text.starts_with('#') {
            continue;
        }
        if let Some((ms, key, cost)) = parse(line, text).map_err(fail)? {
            let at = ms_to_ns(ms).ok_or_else(|| {
                fail(format!(
                    "timestamp {ms} is out of range (after the year 2554)"
                ))
            })?;
            builder.push(at, key, cost, line);
        }
    }
    bar.finish();
    let mut trace = builder.finish();
    trace.origin = trace.events.first().map_or(0, |e| e.at);
    if trace.is_empty() {
        return Err(SimulateError::Usage(format!(
            "{}: no requests in the file",
            path.display()
        )));
    }
    Ok(trace)
}

/// One CSV line: `timestamp_ms,key[,cost]`, fields trimmed.
fn csv_line(text: &str) -> Result<(u64, &str, u64), String> {
    let mut fields = text.split(',').map(str::trim);
    let (Some(ms), Some(key)) = (fields.next(), fields.next()) else {
        return Err("expected `timestamp_ms,key[,cost]`".to_owned());
    };
    let cost = fields.next();
    if fields.next().is_some() {
        return Err(format!(
            "expected `timestamp_ms,key[,cost]`, found {} fields",
            text.split(',').count()
        ));
    }
    let ms = ms.parse::<u64>().map_err(|_| {
        format!("timestamp `{ms}` is not a whole number of milliseconds since the Unix epoch")
    })?;
    if key.is_empty() {
        return Err("the key is empty".to_owned());
    }
    let cost = match cost {
        None => 1,
        Some(text) => match text.parse::<u64>() {
            Ok(cost) if cost > 0 => cost,
            _ => return Err(format!("cost `{text}` is not a whole number of at least 1")),
        },
    };
    Ok((ms, key, cost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_csv_fields() {
        assert_eq!(csv_line("1000,a"), Ok((1000, "a", 1)));
        assert_eq!(csv_line(" 1000 , user 7 , 5 "), Ok((1000, "user 7", 5)));
        for bad in [
            "1000",
            "1000,a,1,2",
            "x,a",
            "-1,a",
            "1.5,a",
            "1000,,1",
            "1000,a,0",
            "1000,a,x",
        ] {
            assert!(csv_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sorts_requests_out_of_order_and_says_so() {
        let trace = Trace::from_requests([(2, "a", 1), (1, "b", 1), (2, "c", 1), (1, "a", 3)]);
        let at: Vec<_> = trace.events().iter().map(|e| (e.at, e.key)).collect();
        assert_eq!(
            at,
            [
                (1_000_000, 1),
                (1_000_000, 0),
                (2_000_000, 0),
                (2_000_000, 2)
            ]
        );
        assert_eq!(trace.out_of_order().map(|o| o.count), Some(2));
        assert_eq!(trace.key_count(), 3);
        assert_eq!(trace.key_name(2), "c");
    }
}
