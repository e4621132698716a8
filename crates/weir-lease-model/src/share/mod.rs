//! Regional shares of a global limit (issue 22): TODO doc.

pub mod actions;
pub mod properties;
pub mod state;

pub use actions::{Action, Apply, DeadlineFrom, Held, SeqCheck, ShareModel};
