//! Configuration errors that name the file, the line and the field.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_saphyr::Location;

/// A configuration that cannot be used, and where it goes wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or source name) the configuration came from.
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(u64, u64)>,
    /// The field, as a path such as `rules[1].limit`, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The other errors found in the same file, in file order after this one:
    /// `check-config` reports every error it can find in one run.
    pub more: Vec<ConfigError>,
}

impl ConfigError {
    pub(super) fn new(file: &Path, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            position: None,
            field: None,
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// One error holding all of `errors` (the first, and the others in `more`), or
    /// `None` when there are none.
    /// They are put in file order (those with no line last), as found within a line.
    pub(super) fn all(errors: Vec<ConfigError>) -> Option<ConfigError> {
        let mut errors: Vec<ConfigError> = errors.into_iter().flat_map(ConfigError::each).collect();
        errors.sort_by_key(|e| {
            e.position
                .map_or((1, 0, 0), |(line, column)| (0, line, column))
        });
        let mut errors = errors.into_iter();
        let mut first = errors.next()?;
        first.more = errors.collect();
        Some(first)
    }

    /// This error and those in its `more`, each alone.
    fn each(mut self) -> Vec<ConfigError> {
        let more = std::mem::take(&mut self.more);
        std::iter::once(self).chain(more).collect()
    }

    pub(super) fn at(mut self, location: Location) -> Self {
        if location.line() > 0 {
            self.position = Some((location.line(), location.column()));
        }
        self
    }

    pub(super) fn field(mut self, field: impl Into<String>) -> Self {
        let field = field.into();
        if !field.is_empty() && field != "." {
            self.field = Some(field);
        }
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)?;
        // The others, a line each, as rustc lists its errors.
        for other in &self.more {
            write!(f, "\n{other}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// The errors found so far in one file, for the checks that can go on past one.
#[derive(Default)]
pub(super) struct Found(Vec<ConfigError>);

impl Found {
    /// The value of `result`, or `None` with its error kept.
    pub(super) fn keep<T>(&mut self, result: Result<T, ConfigError>) -> Option<T> {
        result.map_err(|error| self.0.push(error)).ok()
    }

    /// `Err` with every error found, if any.
    pub(super) fn finish(self) -> Result<(), ConfigError> {
        ConfigError::all(self.0).map_or(Ok(()), Err)
    }
}

/// The largest file a configuration may name (certificates, keys, tokens, plans).
pub(super) const MAX_NAMED_FILE: u64 = 64 * 1024 * 1024;

/// Builds errors that point into one file.
pub(super) struct Errors<'a> {
    pub(super) file: &'a Path,
}

impl Errors<'_> {
    pub(super) fn at(
        &self,
        location: Location,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::new(self.file, message)
            .at(location)
            .field(field)
    }

    /// A file named in the configuration, relative to the configuration's directory:
    /// a regular file (a pipe or a device would hang the load, or never end) of at most
    /// [`MAX_NAMED_FILE`] bytes.
    pub(super) fn read(
        &self,
        location: Location,
        field: &str,
        name: &str,
    ) -> Result<Vec<u8>, ConfigError> {
        use std::io::Read;
        let path = self.resolve(name);
        let fail = |why: String| {
            self.at(
                location,
                field,
                format!("cannot read `{}`: {why}", path.display()),
            )
        };
        let metadata = std::fs::metadata(&path).map_err(|e| fail(e.to_string()))?;
        if !metadata.is_file() {
            return Err(fail("not a regular file".to_owned()));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|file| file.take(MAX_NAMED_FILE + 1).read_to_end(&mut bytes))
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > MAX_NAMED_FILE {
            return Err(fail(format!("larger than {MAX_NAMED_FILE} bytes")));
        }
        Ok(bytes)
    }

    pub(super) fn resolve(&self, name: &str) -> PathBuf {
        let path = Path::new(name);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.file.parent().unwrap_or(Path::new(".")).join(path)
        }
    }
}
