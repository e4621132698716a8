//! The `envoy:` section: where envoyproxy/ratelimit's configuration files are, read
//! unchanged into the engine's [`Descriptors`], and how requests are decided.
//!
//! ```yaml
//! envoy:
//!   config_dir: ratelimit/config   # *.yaml and *.yml, relative to this file
//!   all_or_nothing: false          # true: a denied request consumes nothing elsewhere
//!   shadow_mode: false             # true: every answer is OK (statuses still tell)
//!   response_headers: false        # true: RateLimit-* headers for Envoy to add
//!   failure: unavailable           # open: decide on this instance's local fallback
//!   quota_mode: false              # true: every descriptor in quota mode (QUOTA_MODE)
//!   merge_domains: false           # true: a domain may span files (MERGE_DOMAIN_CONFIG)
//!   caller:
//!     address: remote_address      # the entry carrying the client's address
//!     api_key: api_key             # the entry carrying the API key (none by default)
//! ```
//!
//! Every file of the directory is one domain (or part of one, with `merge_domains`) (files named with a leading `.` are left
//! out, as Kubernetes' ConfigMap bookkeeping is); they are read in name order, and
//! an error names the file, the line and the field, as weir's own errors do.

mod file;
mod raw;
mod weir;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};

use super::error::{ConfigError, Errors};
use crate::engine::Descriptors;

/// The `envoy:` section as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnvoy {
    config_dir: Spanned<String>,
    #[serde(default)]
    all_or_nothing: bool,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    response_headers: bool,
    #[serde(default)]
    failure: FailureName,
    #[serde(default)]
    quota_mode: bool,
    #[serde(default)]
    merge_domains: bool,
    #[serde(default)]
    caller: RawCaller,
}

/// `caller`: which descriptor entries say who is calling.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCaller {
    /// The key of the entry carrying the client's address: what Envoy's
    /// `remote_address` action sends (`remote_address`) unless a configuration sends
    /// it under another key.
    #[serde(default = "default_address")]
    address: String,
    /// The key of the entry carrying the caller's API key (matched against the
    /// lists' API keys), if any.
    api_key: Option<String>,
}

impl Default for RawCaller {
    fn default() -> Self {
        Self {
            address: default_address(),
            api_key: None,
        }
    }
}

fn default_address() -> String {
    "remote_address".to_owned()
}

/// What a store that cannot decide means.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FailureName {
    /// `UNAVAILABLE`: Envoy's `failure_mode_deny` decides.
    #[default]
    Unavailable,
    /// Decide on this instance's local fallback, with its share of each limit.
    Open,
}

/// Envoy's rate limit service, configured.
#[derive(Debug, Clone)]
pub(crate) struct EnvoyConfig {
    /// The directory of envoyproxy/ratelimit files.
    pub dir: PathBuf,
    /// The files read, in the order read.
    pub files: Vec<PathBuf>,
    /// Their descriptors, with the section's options.
    pub descriptors: Descriptors,
    /// The SHA-256 of the files read (names and contents, in hex): how a reload sees
    /// that the directory changed.
    pub sha256: String,
}

/// Reads the section and the files it names.
pub(super) fn envoy(
    raw: Option<&Spanned<RawEnvoy>>,
    errors: &Errors<'_>,
    fallback_instances: u64,
    on_redis: bool,
) -> Result<Option<EnvoyConfig>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let section = &raw.value;
    let dir = errors.resolve(&section.config_dir.value);
    let at =
        |message: String| errors.at(section.config_dir.referenced, "envoy.config_dir", message);
    let files = files(&dir).map_err(|e| at(format!("cannot read `{}`: {e}", dir.display())))?;
    let mut descriptors = Descriptors::default();
    descriptors.all_or_nothing = section.all_or_nothing;
    descriptors.shadow_mode = section.shadow_mode;
    descriptors.response_headers = section.response_headers;
    descriptors.fail_open = matches!(section.failure, FailureName::Open);
    descriptors.fallback_instances = fallback_instances;
    descriptors.quota_mode = section.quota_mode;
    descriptors.merge_domains = section.merge_domains;
    descriptors.caller_address = section.caller.address.clone();
    descriptors.caller_api_key = section.caller.api_key.clone();
    let mut digest = Sha256::new();
    for path in &files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(path, format!("cannot read the file: {e}")))?;
        add_file(&mut digest, path, text.as_bytes());
        file::read(
            on_redis,
            &section.caller.address,
            &text,
            path,
            &mut descriptors,
        )?;
    }
    Ok(Some(EnvoyConfig {
        dir,
        files,
        descriptors,
        sha256: hex(&digest.finalize()),
    }))
}

/// The SHA-256 of the configuration files in `dir` as they are now, as
/// [`EnvoyConfig::sha256`] names those read; none if the directory or a file cannot
/// be read.
pub(super) fn dir_sha256(dir: &Path) -> Option<String> {
    let mut digest = Sha256::new();
    for path in files(dir).ok()? {
        add_file(&mut digest, &path, &std::fs::read(&path).ok()?);
    }
    Some(hex(&digest.finalize()))
}

fn add_file(digest: &mut Sha256, path: &Path, bytes: &[u8]) {
    let name = path
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default();
    for part in [name, bytes] {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The configuration files in `dir`, by name.
pub(super) fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let named = path.file_name().and_then(|n| n.to_str()).unwrap_or(".");
        let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if yaml && !named.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
