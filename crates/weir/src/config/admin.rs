//! The `admin` section: the admin API is off unless it is there, and its bearer token
//! is read from the environment or a file, never written in the configuration.

use sha2::{Digest, Sha256};

use super::error::{ConfigError, Errors};
use super::file::RawAdmin;
use serde_saphyr::Spanned;

/// The shortest token accepted: a guessable token would open the admin API to anyone
/// who reaches the admin listener.
pub(super) const MIN_TOKEN_BYTES: usize = 16;

/// The admin API's settings.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AdminConfig {
    /// The SHA-256 of the bearer token (the token itself is not kept).
    token_sha256: [u8; 32],
}

impl std::fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminConfig").finish_non_exhaustive()
    }
}

impl AdminConfig {
    /// Whether `token` is the configured one. Digests are compared, so the time taken
    /// says nothing about how much of the token was right.
    pub(crate) fn accepts(&self, token: &str) -> bool {
        Sha256::digest(token.as_bytes()).as_slice() == self.token_sha256
    }
}

pub(super) fn admin(
    raw: Option<&Spanned<RawAdmin>>,
    errors: &Errors<'_>,
) -> Result<Option<AdminConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let at = raw.referenced;
    let token = match (&raw.value.token_env, &raw.value.token_file) {
        (Some(name), None) => std::env::var(name).map_err(|_| {
            errors.at(
                at,
                "admin.token_env",
                format!("the environment variable `{name}` holding the admin token is not set (or not UTF-8)"),
            )
        })?,
        (None, Some(file)) => {
            let bytes = errors.read(at, "admin.token_file", file)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                errors.at(at, "admin.token_file", "the admin token file is not UTF-8")
            })?;
            text.lines().next().unwrap_or_default().to_owned()
        }
        _ => {
            return Err(errors.at(
                at,
                "admin",
                "give exactly one of `token_env` (an environment variable) or `token_file` (a file) for the admin API's bearer token",
            ));
        }
    };
    let token = token.trim();
    if token.len() < MIN_TOKEN_BYTES || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(errors.at(
            at,
            "admin",
            format!("the admin token must be at least {MIN_TOKEN_BYTES} bytes without spaces or control characters (try `openssl rand -hex 32`)"),
        ));
    }
    Ok(Some(AdminConfig {
        token_sha256: Sha256::digest(token.as_bytes()).into(),
    }))
}
