//! Progress bars on standard error, for long runs watched in a terminal.
//!
//! A bar appears only when stderr is a terminal and the work is long (a file of at
//! least [`LONG_FILE_BYTES`], a replay of at least [`LONG_REPLAY`] checks), so scripts,
//! pipes and tests see nothing. Bars are advanced in batches: the replay's inner loop
//! must not pay for drawing.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A file this large (64 MiB, about 2.5 million trace lines) shows a bar while read.
pub(super) const LONG_FILE_BYTES: u64 = 64 << 20;

/// A replay of this many checks (requests times rules) shows a bar.
pub(super) const LONG_REPLAY: u64 = 2_000_000;

/// Whether progress bars may be shown at all.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    visible: bool,
}

impl Progress {
    /// Bars on standard error when it is a terminal.
    pub fn on_terminal() -> Self {
        Self {
            visible: std::io::stderr().is_terminal(),
        }
    }

    /// No bars.
    pub fn hidden() -> Self {
        Self { visible: false }
    }

    /// A bar for `total` units of `what`, shown if bars are visible and `long`.
    pub(super) fn bar(&self, what: &str, total: u64, long: bool) -> Bar {
        if !(self.visible && long) {
            return Bar(None);
        }
        let bar = ProgressBar::new(total);
        let template = format!("{what:>9} [{{bar:40}}] {{percent:>3}}% {{elapsed}} (eta {{eta}})");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Bar(Some(bar))
    }
}

/// A progress bar, or nothing.
pub(super) struct Bar(Option<ProgressBar>);

impl Bar {
    /// Counts `n` more units done.
    pub(super) fn advance(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// Removes the bar.
    pub(super) fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}
