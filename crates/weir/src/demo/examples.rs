//! The example configurations of `examples/`, built into the binary, so that an
//! installed `weir` can show them (`weir example NAME`) and write them with the files
//! they name (`weir example NAME --dir DIR`).

use std::path::Path;

/// One example: its name, what it shows, its YAML, and the files it names (relative
/// path and contents).
#[derive(Debug)]
pub struct Example {
    /// Its name: the file's name without `.yaml`.
    pub name: &'static str,
    /// What it shows, in a line.
    pub about: &'static str,
    /// The configuration.
    pub yaml: &'static str,
    /// The files it names, by the relative path it names them by.
    pub files: &'static [(&'static str, &'static str)],
}

macro_rules! example {
    ($name:literal, $about:literal $(, $file:literal)*) => {
        Example {
            name: $name,
            about: $about,
            yaml: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/", $name, ".yaml")),
            files: &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/", $file))),)*],
        }
    };
}

/// Every example of `examples/*.yaml`, in the order `weir example` lists them.
pub const EXAMPLES: &[Example] = &[
    example!(
        "basic",
        "a few limits on the embedded memory store, asked with POST /v1/check"
    ),
    example!(
        "login",
        "the gateway in front of a login: failed logins per account and IP, lockouts"
    ),
    example!(
        "public-api",
        "the gateway in front of a public API: plans by API key, costs, anonymous callers",
        "plans/api-keys.yaml"
    ),
    example!(
        "ai-tokens",
        "the gateway metering an AI route in the tokens each answer used"
    ),
    example!(
        "shadow",
        "a stricter limit dark-launched beside the enforcing one"
    ),
    example!("redis", "limits shared by every instance through one Redis"),
    example!("redis-cluster", "limits shared through a Redis Cluster"),
    example!(
        "axum-app",
        "the rules of the example axum app (the tower layer, in process)"
    ),
];

/// Writes `example` into `dir` (made if missing) as `NAME.yaml`, with the files it
/// names beside it; an existing file is never overwritten. Returns the paths written.
pub fn write_example(example: &Example, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let name = format!("{}.yaml", example.name);
    let files = std::iter::once((name.as_str(), example.yaml)).chain(example.files.iter().copied());
    let mut written = Vec::new();
    for (relative, contents) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        std::io::Write::write_all(&mut file, contents.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}
