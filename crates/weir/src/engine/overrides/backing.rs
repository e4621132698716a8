//! Where overrides are kept: in this process (and a file), or in the shared store.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use serde::{Deserialize, Serialize};
use weir_store::{RedisStore, StoreError};

use super::{ListEntry, Override, Overrides, POLL_EVERY, Stored};

/// The shared table's name (see `weir_store`'s `RedisStore::table_put`).
const TABLE: &str = "overrides";

/// The shared table of the list entries set at runtime.
pub(super) const LISTS_TABLE: &str = "lists";

/// Where overrides are kept.
#[derive(Clone)]
pub(crate) enum Backing {
    /// In this process alone: lost at exit.
    InProcess,
    /// In this process, and in a JSON file written atomically at each change.
    File(PathBuf),
    /// In the shared store (a Redis hash every instance polls).
    Shared(Arc<RedisStore>),
}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backing::InProcess => f.write_str("InProcess"),
            Backing::File(path) => f.debug_tuple("File").field(path).finish(),
            Backing::Shared(_) => f.write_str("Shared"),
        }
    }
}

/// What the overrides file keeps: every override and every runtime list entry,
/// expired ones left out.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Kept {
    /// The overrides.
    pub overrides: Vec<Stored>,
    /// The list entries set at runtime (absent from files written before them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lists: Vec<ListEntry>,
}

/// Reads the overrides file at `path`: nothing when there is none yet.
pub(crate) fn read_file(path: &Path) -> Result<Kept, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Kept::default()),
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
    };
    let kept = serde_json::from_str::<Kept>(&text)
        .map_err(|e| format!("`{}` is not an overrides file: {e}", path.display()))?;
    if let Some((i, bad)) = kept
        .lists
        .iter()
        .enumerate()
        .find(|(_, e)| !e.is_canonical())
    {
        return Err(format!(
            "`{}`: lists[{i}]: `{}` is not a canonical address block",
            path.display(),
            bad.entry.escape_debug()
        ));
    }
    Ok(kept)
}

/// Writes `kept` to `path` atomically: a temporary file beside it, synced, then
/// renamed over it (a crash leaves the old file or the new one, never half of one).
pub(super) fn write_file(path: &Path, kept: &Kept) -> std::io::Result<()> {
    use std::io::Write;
    let text = serde_json::to_string_pretty(kept).map_err(std::io::Error::other)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".tmp-{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// Why an override could not be kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeepError {
    /// The shared store did not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The file could not be written.
    #[error("cannot write the overrides file: {0}")]
    File(#[from] std::io::Error),
}

impl Overrides {
    /// The book of `backing` with what it holds now: the file's overrides, or the
    /// shared table's (an unreachable store starts it empty; the poll reads it once it
    /// answers). On a shared store, polls it every [`POLL_EVERY`] until the book is
    /// dropped (call it inside a Tokio runtime).
    pub(crate) async fn open(
        backing: Backing,
        clock: Arc<dyn weir_core::Clock>,
    ) -> Result<Arc<Self>, String> {
        let initial = match &backing {
            Backing::InProcess | Backing::Shared(_) => Kept::default(),
            Backing::File(path) => read_file(path)?,
        };
        let shared = matches!(backing, Backing::Shared(_));
        let book = Arc::new(Self::new(backing, initial, clock));
        if shared {
            book.poll().await;
            tokio::spawn(poll_while_kept(Arc::downgrade(&book)));
        }
        Ok(book)
    }

    /// The shared store the book is kept in, if it is kept in one: where the other
    /// records every instance reads live too (the ledger of bans).
    pub(crate) fn shared_store(&self) -> Option<&Arc<RedisStore>> {
        match &self.backing {
            Backing::Shared(redis) => Some(redis),
            Backing::InProcess | Backing::File(_) => None,
        }
    }

    /// Reads the shared tables (overrides, list entries) again when their version
    /// changed, and prunes what expired there. Logged when the store does not answer
    /// (the snapshot stays).
    pub(crate) async fn poll(&self) {
        let Backing::Shared(redis) = &self.backing else {
            return;
        };
        // Not beside a change of this instance's: a snapshot read before it would
        // hide it until the next poll.
        let _one = self.writing.lock().await;
        self.poll_entries(redis).await;
        let version = match redis.table_version(TABLE).await {
            Ok(version) => version,
            Err(error) => {
                tracing::debug!(%error, "overrides: the shared store did not answer a poll");
                return;
            }
        };
        if *self.version.lock() == Some(version) {
            return;
        }
        let snapshot = match redis.table_read(TABLE).await {
            Ok(snapshot) => snapshot,
            Err(error) => {
                tracing::warn!(%error, "overrides: could not read the shared table");
                return;
            }
        };
        let now = self.now_secs();
        let mut records = Vec::with_capacity(snapshot.records.len());
        for (field, value) in &snapshot.records {
            let Some(stored) = Stored::from_record(field, value) else {
                continue;
            };
            if stored.entry.in_force(now) {
                records.push(stored);
            } else {
                // Removed only if nobody set it again meanwhile.
                let _ = redis.table_remove(TABLE, field, Some(value)).await;
            }
        }
        self.replace(records);
        *self.version.lock() = Some(snapshot.version);
    }

    /// Keeps `entry` for `rule` and `key`; returns the override it replaced (in force).
    pub(crate) async fn put(
        &self,
        rule: &str,
        key: &str,
        entry: Override,
    ) -> Result<Option<Override>, KeepError> {
        let _one = self.writing.lock().await;
        let stored = Stored {
            rule: rule.to_owned(),
            key: key.to_owned(),
            entry,
        };
        let replaced = match &self.backing {
            Backing::Shared(redis) => {
                let field = Stored::field(rule, key);
                let old = redis.table_put(TABLE, &field, &stored.to_json()).await?;
                old.and_then(|value| Stored::from_record(&field, &value))
                    .map(|s| s.entry)
            }
            Backing::InProcess | Backing::File(_) => self.get(rule, key),
        };
        if let Backing::File(path) = &self.backing {
            let mut all = self.unexpired();
            all.retain(|s| (s.rule.as_str(), s.key.as_str()) != (rule, key));
            all.push(stored.clone());
            write_file(
                path,
                &Kept {
                    overrides: all,
                    lists: self.unexpired_entries(),
                },
            )?;
        }
        self.change(rule, key, Some(stored.entry));
        Ok(replaced.filter(|o| o.in_force(self.now_secs())))
    }

    /// Removes the override of `rule` and `key`; returns it, if one was in force.
    pub(crate) async fn remove(
        &self,
        rule: &str,
        key: &str,
    ) -> Result<Option<Override>, KeepError> {
        let _one = self.writing.lock().await;
        let removed = match &self.backing {
            Backing::Shared(redis) => {
                let field = Stored::field(rule, key);
                let old = redis.table_remove(TABLE, &field, None).await?;
                old.and_then(|value| Stored::from_record(&field, &value))
                    .map(|s| s.entry)
            }
            Backing::InProcess | Backing::File(_) => self.get(rule, key),
        };
        if let Backing::File(path) = &self.backing {
            let mut all = self.unexpired();
            all.retain(|s| (s.rule.as_str(), s.key.as_str()) != (rule, key));
            write_file(
                path,
                &Kept {
                    overrides: all,
                    lists: self.unexpired_entries(),
                },
            )?;
        }
        self.change(rule, key, None);
        Ok(removed.filter(|o| o.in_force(self.now_secs())))
    }

    /// Every override not yet expired (what the file keeps).
    pub(super) fn unexpired(&self) -> Vec<Stored> {
        let now = self.now_secs();
        let mut all = self.all();
        all.retain(|s| s.entry.in_force(now));
        all
    }
}

/// Polls the shared table every [`POLL_EVERY`] while the book is kept.
async fn poll_while_kept(book: Weak<Overrides>) {
    let mut every = tokio::time::interval(POLL_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(book) = book.upgrade() else { break };
        book.poll().await;
    }
}
