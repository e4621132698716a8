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
}

impl ConfigError {
    pub(super) fn new(file: &Path, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            position: None,
            field: None,
            message: message.into(),
        }
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
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

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

    /// A file named in the configuration, relative to the configuration's directory.
    pub(super) fn read(
        &self,
        location: Location,
        field: &str,
        name: &str,
    ) -> Result<Vec<u8>, ConfigError> {
        let path = self.resolve(name);
        std::fs::read(&path).map_err(|e| {
            self.at(
                location,
                field,
                format!("cannot read `{}`: {e}", path.display()),
            )
        })
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
