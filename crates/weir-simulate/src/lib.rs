//! `weir simulate`: offline what-if, a library the `weir` binary embeds behind its
//! default `simulate` feature (so a service built without it carries no plotting). Replays a trace, an access log or a named traffic
//! pattern against rules, with weir's own algorithms on a virtual clock, and reports
//! what each rule admitted, denied, let through in its worst trailing period, and how
//! many retries were wasted.
//!
//! No store, no runtime, no real time: each rule keeps a state per key in memory and
//! is handed each request's timestamp, as `weir-core`'s pure `check` is designed to
//! be. The stages, one file each: the rules (`rules`), the traffic (`trace`,
//! `access_log`, `pattern`, `clients`), the replay (`replay`, `run`), and what comes
//! out (`report`, `plot`, with `bucket` for the plot's round widths of time); `cli` is
//! the command. [`chart`] holds what this plot and `weir simulate fleet`'s share.
//!
//! It depends on `weir-core` only, never on the `weir` service: rules come as
//! [`Rule`]s, from inline specs or from a rules file read by the [`LoadRules`] the
//! embedding program hands to [`run`].

#![deny(missing_docs)]

mod access_log;
mod bucket;
pub mod chart;
mod cli;
mod clients;
mod error;
mod pattern;
mod plot;
mod progress;
mod replay;
mod report;
mod rules;
mod run;
mod trace;

pub use cli::{SimulateArgs, run};
pub use clients::Clients;
pub use error::SimulateError;
pub use pattern::{Params, Pattern};
pub use plot::write_svg;
pub use progress::Progress;
pub use replay::{Traffic, simulate};
pub use report::{Outcome, RuleReport, Series, Worst};
pub use rules::{LoadRules, Rule, from_spec};
pub use trace::{OutOfOrder, Trace};
