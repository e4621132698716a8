//! What can stop a simulation: input that cannot be read one way, or a bad request.

use std::path::PathBuf;

/// Why a simulation could not run. Nothing is printed or written when one occurs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimulateError {
    /// The rules file could not be read: the loader's error, which names the file (weir's
    /// configuration errors name the line and field too).
    #[error(transparent)]
    Rules(Box<dyn std::error::Error + Send + Sync>),
    /// A line of a trace or access log cannot be read.
    #[error("{}:{line}: {message}", file.display())]
    Trace {
        /// The file.
        file: PathBuf,
        /// The 1-based line number.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// A file could not be read or written. The system's error is part of the message,
    /// not a source below it, so that a chain of causes prints it once.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        error: std::io::Error,
    },
    /// The command asks for something that does not exist or cannot be done: an
    /// unknown rule or pattern, a malformed rule spec, a parameter out of range.
    #[error("{0}")]
    Usage(String),
    /// The plot could not be drawn.
    #[error("cannot draw the plot {}: {message}", path.display())]
    Plot {
        /// The file being written.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}
