//! The `overrides` section: where overrides set at runtime are kept on the memory
//! store (on a shared store they are kept in it, and the section is not needed).

use std::path::PathBuf;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::{ConfigError, Errors};
use crate::engine::read_overrides_file;

/// The section as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOverrides {
    /// The JSON file overrides are kept in (memory store).
    file: Option<String>,
}

/// Where overrides are kept on the memory store: `None` in this process alone.
pub(super) fn overrides_file(
    raw: Option<&Spanned<RawOverrides>>,
    on_redis: bool,
    errors: &Errors<'_>,
) -> Result<Option<PathBuf>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let at = raw.referenced;
    let Some(file) = raw.value.file.as_deref() else {
        return Ok(None);
    };
    if on_redis {
        return Err(errors.at(
            at,
            "overrides.file",
            "on a shared store, overrides are kept in the store (every instance reads them there): remove `overrides.file`",
        ));
    }
    let path = errors.resolve(file);
    let directory = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !directory.is_dir() {
        return Err(errors.at(
            at,
            "overrides.file",
            format!(
                "the directory `{}` does not exist (weir writes the file there)",
                directory.display()
            ),
        ));
    }
    read_overrides_file(&path).map_err(|message| errors.at(at, "overrides.file", message))?;
    Ok(Some(path))
}
