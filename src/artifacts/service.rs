//! The Artifact service: one per Broker, cheap to clone. Writes new Artifacts (temp file, rename,
//! then the metadata row), hands out the protected path, copies out to and in from
//! client paths, extends and ends lifetimes, and removes bytes on release, expiry, Workspace
//! release and Broker start/exit.
//!
//! File work runs on the blocking pool; the async methods are thin wrappers. Usage per Workspace
//! (bytes, count) and the descriptor facts without a store column (`previewOf`, pixel size) are
//! kept in a small in-memory ledger under a short, never-awaited lock. The store is in-memory as
//! well, so both vanish together when the Broker exits, and the Broker clears the bytes on start
//! and exit to match.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::bounded::{CLIENT_COPY_BOUNDS, Copies, Progress};
use super::descriptor::{Artifact, ArtifactKind, Extras, NewArtifact};
use super::encoding;
use super::error::{ArtifactError, storage};
use super::files::{self, CopyError};
use super::image;
use super::limits::ArtifactLimits;
use crate::home::{Home, ensure_private_dir};
use crate::os::{self, EntryKind};
use crate::protocol::ids::{IdKind, new_id};
use crate::store::{ArtifactRow, Store};

/// Handle to the Broker's Artifact storage.
#[derive(Clone)]
pub struct Artifacts {
    inner: Arc<Inner>,
}

struct Inner {
    /// `<home>/artifacts`.
    root: PathBuf,
    /// The Broker home: imports from and exports into it are refused.
    home_root: PathBuf,
    store: Store,
    limits: ArtifactLimits,
    ledger: Mutex<Ledger>,
    /// Import and export copies, each on its own thread within time bounds.
    copies: Copies,
}

#[derive(Default)]
struct Ledger {
    workspaces: HashMap<String, Held>,
}

/// What one Workspace holds now.
#[derive(Default)]
struct Held {
    bytes: u64,
    artifacts: HashMap<String, (u64, Extras)>,
}

impl Artifacts {
    pub fn new(home: &Home, store: Store, limits: ArtifactLimits) -> Artifacts {
        Artifacts {
            inner: Arc::new(Inner {
                root: home.artifacts_dir(),
                home_root: home.root().to_owned(),
                store,
                limits,
                ledger: Mutex::new(Ledger::default()),
                copies: Copies::default(),
            }),
        }
    }

    pub fn limits(&self) -> ArtifactLimits {
        self.inner.limits
    }

    /// Deletes every stored byte and recreates the empty, owner-only root. Called when the
    /// Broker starts (a killed predecessor's bytes have no metadata any more) and when it exits.
    pub fn purge_all(&self) -> Result<(), ArtifactError> {
        let inner = &self.inner;
        inner.ledger.lock().expect("ledger lock").workspaces.clear();
        match std::fs::remove_dir_all(&inner.root) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(storage("clear protected storage")(error)),
        }
        inner.ensure_root()
    }

    /// Stores `bytes` as a new Artifact of `new.workspace_id`, expiring after the default TTL.
    pub async fn create(
        &self,
        new: NewArtifact,
        bytes: Vec<u8>,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        self.blocking(move |inner| inner.create(new, &bytes, now))
            .await
    }

    /// [`Artifacts::create`] from base64 (as CDP returns binary data). The size is checked
    /// before decoding.
    pub async fn create_base64(
        &self,
        new: NewArtifact,
        data: String,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        self.blocking(move |inner| {
            let len = encoding::decoded_len(&data).ok_or(ArtifactError::BadEncoding)? as u64;
            inner.check_size(len)?;
            let bytes = encoding::decode(&data).ok_or(ArtifactError::BadEncoding)?;
            drop(data);
            inner.create(new, &bytes, now)
        })
        .await
    }

    /// Copies a client file into protected storage as an `upload_input` Artifact. The source
    /// must be an absolute path to a regular file (symlinks are followed) outside the Broker
    /// home; it is only read, never moved or deleted.
    pub async fn import(
        &self,
        workspace_id: &str,
        source: PathBuf,
        mime_type: Option<String>,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        let workspace_id = workspace_id.to_owned();
        self.bounded("import", move |inner, progress| {
            inner.import(&workspace_id, &source, mime_type, now, progress)
        })
        .await
    }

    /// The Artifact and its absolute protected path.
    pub async fn get(
        &self,
        workspace_id: &str,
        id: &str,
        now: i64,
    ) -> Result<(Artifact, PathBuf), ArtifactError> {
        let (workspace_id, id) = (workspace_id.to_owned(), id.to_owned());
        self.blocking(move |inner| inner.get(&workspace_id, &id, now))
            .await
    }

    /// [`Artifacts::get`] for `browser.upload`: only `upload_input` Artifacts qualify, so page
    /// captures and downloads can never be fed back into a page.
    pub async fn upload_input(
        &self,
        workspace_id: &str,
        id: &str,
        now: i64,
    ) -> Result<(Artifact, PathBuf), ArtifactError> {
        let (artifact, path) = self.get(workspace_id, id, now).await?;
        match artifact.kind {
            ArtifactKind::UploadInput => Ok((artifact, path)),
            other => Err(ArtifactError::KindNotAllowed {
                kind: other.as_str(),
                allowed: ArtifactKind::UploadInput.as_str(),
            }),
        }
    }

    /// Copies the bytes to an absolute client path. An existing file is kept unless `overwrite`.
    pub async fn export(
        &self,
        workspace_id: &str,
        id: &str,
        destination: PathBuf,
        overwrite: bool,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        let (workspace_id, id) = (workspace_id.to_owned(), id.to_owned());
        self.bounded("export", move |inner, progress| {
            inner.export(&workspace_id, &id, &destination, overwrite, now, progress)
        })
        .await
    }

    /// Extends the lifetime to the retained TTL counted from `now` (never shortens it).
    pub async fn retain(
        &self,
        workspace_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        let (workspace_id, id) = (workspace_id.to_owned(), id.to_owned());
        self.blocking(move |inner| inner.retain(&workspace_id, &id, now))
            .await
    }

    /// Deletes the bytes and the metadata now. A second release is `NotFound`.
    pub async fn release(&self, workspace_id: &str, id: &str) -> Result<Artifact, ArtifactError> {
        let (workspace_id, id) = (workspace_id.to_owned(), id.to_owned());
        self.blocking(move |inner| inner.release(&workspace_id, &id))
            .await
    }

    /// Deletes every Artifact whose lifetime ended at or before `now`; returns how many.
    pub async fn sweep_expired(&self, now: i64) -> Result<usize, ArtifactError> {
        self.blocking(move |inner| inner.sweep_expired(now)).await
    }

    /// Deletes all bytes of a released Workspace (its metadata rows went with the Workspace).
    pub async fn purge_workspace(&self, workspace_id: &str) -> Result<(), ArtifactError> {
        let workspace_id = workspace_id.to_owned();
        self.blocking(move |inner| inner.purge_workspace(&workspace_id))
            .await
    }

    /// Runs a copy from or to a client path on its own thread within
    /// [`CLIENT_COPY_BOUNDS`]: a hung client file system fails that one call (`Stalled`)
    /// instead of holding the Connection or the Broker's exit.
    async fn bounded<T, F>(&self, op: &'static str, f: F) -> Result<T, ArtifactError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &Progress) -> Result<T, ArtifactError> + Send + 'static,
    {
        let inner = self.inner.clone();
        let copies = inner.copies.clone();
        copies
            .run(op, CLIENT_COPY_BOUNDS, move |progress| f(&inner, progress))
            .await
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, ArtifactError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, ArtifactError> + Send + 'static,
    {
        let inner = self.inner.clone();
        match tokio::task::spawn_blocking(move || f(&inner)).await {
            Ok(result) => result,
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
}

/// The id without its kind prefix, reduced to characters safe in a file name.
fn path_component(id: &str, kind: IdKind) -> String {
    let bare: String = id
        .strip_prefix(kind.prefix())
        .unwrap_or(id)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    match bare.is_empty() {
        true => "_".to_owned(),
        false => bare,
    }
}

impl Inner {
    fn ensure_root(&self) -> Result<(), ArtifactError> {
        private_dir(&self.root)
    }

    fn workspace_dir(&self, workspace_id: &str) -> PathBuf {
        self.root
            .join(path_component(workspace_id, IdKind::Workspace))
    }

    /// `<root>/<workspace>/<artifact>.<ext>`, or `<root>/<workspace>/<artifact>/<file name>`
    /// when the bytes carry their own name (uploads, downloads).
    fn artifact_path(
        &self,
        workspace_id: &str,
        id: &str,
        mime_type: &str,
        file_name: Option<&str>,
    ) -> PathBuf {
        let stem = path_component(id, IdKind::Artifact);
        let dir = self.workspace_dir(workspace_id);
        match file_name {
            Some(name) => dir.join(stem).join(name),
            None => dir.join(format!("{stem}.{}", files::extension_for(mime_type))),
        }
    }

    fn row_path(&self, row: &ArtifactRow) -> PathBuf {
        self.artifact_path(
            &row.workspace_id,
            &row.id,
            &row.mime_type,
            row.file_name.as_deref(),
        )
    }

    /// Creates the directories a new Artifact's file goes into, all owner-only.
    fn prepare_dirs(&self, final_path: &Path, workspace_id: &str) -> Result<(), ArtifactError> {
        self.ensure_root()?;
        let workspace_dir = self.workspace_dir(workspace_id);
        private_dir(&workspace_dir)?;
        match final_path.parent() {
            Some(parent) if parent != workspace_dir => private_dir(parent),
            _ => Ok(()),
        }
    }

    /// Removes an Artifact's file and, for named files, its own directory.
    fn remove_bytes(&self, path: &Path, named: bool) {
        let removed = match named {
            true => path.parent().map(std::fs::remove_dir_all),
            false => Some(std::fs::remove_file(path)),
        };
        if let Some(Err(error)) = removed
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%error, "cannot remove artifact bytes");
        }
    }

    fn check_size(&self, len: u64) -> Result<(), ArtifactError> {
        match len <= self.limits.max_artifact_bytes {
            true => Ok(()),
            false => Err(ArtifactError::TooLarge {
                len,
                limit: self.limits.max_artifact_bytes,
            }),
        }
    }

    fn create(
        &self,
        mut new: NewArtifact,
        bytes: &[u8],
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        self.check_size(bytes.len() as u64)?;
        if new.width.is_none()
            && let Some((width, height)) = image::dimensions(bytes)
        {
            new.width = Some(width);
            new.height = Some(height);
        }
        let id = new_id(IdKind::Artifact);
        let final_path = self.artifact_path(
            &new.workspace_id,
            &id,
            &new.mime_type,
            new.file_name.as_deref(),
        );
        self.prepare_dirs(&final_path, &new.workspace_id)?;
        let temp = files::temp_path(&final_path);
        let written = (|| {
            use std::io::Write;
            // No fsync: the metadata is in memory and the bytes are cleared at start-up, so
            // nothing could use them after a crash; the rename alone makes them appear whole.
            let mut file = os::create_new_owner_only(&temp)?;
            file.write_all(bytes)
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temp);
            self.remove_bytes(&final_path, new.file_name.is_some());
            return Err(storage("write artifact bytes")(error));
        }
        let written = Written {
            id,
            temp,
            final_path,
            byte_len: bytes.len() as u64,
            sha256: crate::hex::sha256(bytes),
        };
        self.commit(new, written, now)
    }

    /// Reserves quota, renames the written temp file into place and records the metadata row;
    /// undoes all of it on failure.
    fn commit(
        &self,
        new: NewArtifact,
        written: Written,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        let Written {
            id,
            temp,
            final_path,
            byte_len,
            sha256,
        } = written;
        let (temp, final_path) = (temp.as_path(), final_path.as_path());
        let named = new.file_name.is_some();
        let extras = Extras {
            preview_of: new.preview_of.clone(),
            width: new.width,
            height: new.height,
        };
        if let Err(error) = self.reserve(&new.workspace_id, &id, byte_len, extras.clone()) {
            let _ = std::fs::remove_file(temp);
            self.remove_bytes(final_path, named);
            return Err(error);
        }
        let row = ArtifactRow {
            id,
            workspace_id: new.workspace_id,
            kind: new.kind.as_str().to_owned(),
            mime_type: new.mime_type,
            byte_len,
            sha256,
            created_at: now,
            expires_at: now + self.limits.default_ttl_ms,
            retained: false,
            sensitivity: new.sensitivity.to_owned(),
            file_name: new.file_name,
        };
        let committed = std::fs::rename(temp, final_path)
            .map_err(storage("store artifact bytes"))
            .and_then(|()| {
                self.store
                    .insert_artifact(&row)
                    .map_err(ArtifactError::from)
            });
        match committed {
            Ok(()) => Ok(Artifact::from_row(row, Some(&extras))),
            Err(error) => {
                let _ = std::fs::remove_file(temp);
                self.remove_bytes(final_path, named);
                self.unreserve(&row.workspace_id, &row.id);
                Err(error)
            }
        }
    }

    fn import(
        &self,
        workspace_id: &str,
        source: &Path,
        mime_type: Option<String>,
        now: i64,
        progress: &Progress,
    ) -> Result<Artifact, ArtifactError> {
        files::check_client_path(source)?;
        let mime_type = match mime_type {
            Some(mime) if files::is_valid_mime(&mime) => mime,
            Some(mime) => return Err(ArtifactError::BadMimeType(mime)),
            None => files::guess_mime(&source.to_string_lossy()).to_owned(),
        };
        let client = |op: &'static str| {
            let path = source.to_owned();
            move |error: std::io::Error| client_error(op, path, error, "the file is not readable")
        };
        // Checked by path first, so a device or FIFO is normally never even opened.
        let metadata = std::fs::metadata(source).map_err(client("inspect"))?;
        check_import_kind(metadata.is_dir(), metadata.is_file())?;
        if files::is_within(source, &self.home_root) {
            return Err(ArtifactError::PathNotAllowed {
                reason: "the path is inside the Broker home",
            });
        }
        // The path may have been swapped since (a FIFO in place of the file): the open cannot
        // block (O_NONBLOCK), and what counts is what was opened.
        let mut input = os::open_read_nonblocking(source).map_err(client("open"))?;
        let opened = input.metadata().map_err(client("inspect"))?;
        check_import_kind(opened.is_dir(), opened.is_file())?;
        if os::is_pseudo_file(&input) {
            return Err(ArtifactError::PathNotAllowed {
                reason: "the path is a kernel pseudo-file (/proc, /sys, ...), not stored data",
            });
        }
        self.check_size(opened.len())?;
        let opened = files::FileState::of(&opened);
        let file_name = files::sanitize_file_name(source);
        let id = new_id(IdKind::Artifact);
        let final_path = self.artifact_path(workspace_id, &id, &mime_type, Some(&file_name));
        self.prepare_dirs(&final_path, workspace_id)?;
        let temp = files::temp_path(&final_path);
        let copied = os::create_new_owner_only(&temp)
            .map_err(storage("create artifact file"))
            .and_then(|mut output| {
                files::copy_hashing(
                    &mut input,
                    &mut output,
                    self.limits.max_artifact_bytes,
                    |total| progress.advance(total),
                )
                .map_err(|error| match error {
                    CopyError::TooLarge => ArtifactError::TooLarge {
                        len: self.limits.max_artifact_bytes + 1,
                        limit: self.limits.max_artifact_bytes,
                    },
                    CopyError::Read(source_error) => client("read")(source_error),
                    CopyError::Write(write_error) => storage("write artifact bytes")(write_error),
                })
            })
            .and_then(|(byte_len, sha256)| {
                let after = input.metadata().map_err(client("inspect"))?;
                match files::copy_is_whole(opened, byte_len, files::FileState::of(&after)) {
                    true => Ok((byte_len, sha256)),
                    false => Err(ArtifactError::PathNotAllowed {
                        reason: "the file changed while it was copied",
                    }),
                }
            });
        let (byte_len, sha256) = match copied {
            Ok(copied) if progress.begin_finish() => copied,
            // Given up by the caller while the copy was stuck: leave nothing behind.
            Ok(_) => {
                self.remove_bytes(&final_path, true);
                return Err(ArtifactError::Stalled {
                    op: "import",
                    seconds: 0,
                });
            }
            Err(error) => {
                self.remove_bytes(&final_path, true);
                return Err(error);
            }
        };
        let mut new = NewArtifact::new(
            workspace_id,
            ArtifactKind::UploadInput,
            &mime_type,
            "user_file",
        );
        new.file_name = Some(file_name);
        let written = Written {
            id,
            temp,
            final_path,
            byte_len,
            sha256,
        };
        self.commit(new, written, now)
    }

    /// The live row of `id` in `workspace_id`.
    fn live_row(
        &self,
        workspace_id: &str,
        id: &str,
        now: i64,
    ) -> Result<ArtifactRow, ArtifactError> {
        let row = self
            .store
            .get_artifact(workspace_id, id)?
            .ok_or(ArtifactError::NotFound)?;
        match row.expires_at <= now {
            true => Err(ArtifactError::Expired {
                expired_at: row.expires_at,
            }),
            false => Ok(row),
        }
    }

    fn artifact(&self, row: ArtifactRow) -> Artifact {
        let ledger = self.ledger.lock().expect("ledger lock");
        let extras = ledger
            .workspaces
            .get(&row.workspace_id)
            .and_then(|held| held.artifacts.get(&row.id))
            .map(|(_, extras)| extras);
        Artifact::from_row(row, extras)
    }

    fn get(
        &self,
        workspace_id: &str,
        id: &str,
        now: i64,
    ) -> Result<(Artifact, PathBuf), ArtifactError> {
        let row = self.live_row(workspace_id, id, now)?;
        let path = self.row_path(&row);
        if !path.is_file() {
            tracing::error!(artifact = %row.id, "artifact bytes are missing");
            return Err(ArtifactError::NotFound);
        }
        Ok((self.artifact(row), path))
    }

    fn export(
        &self,
        workspace_id: &str,
        id: &str,
        destination: &Path,
        overwrite: bool,
        now: i64,
        progress: &Progress,
    ) -> Result<Artifact, ArtifactError> {
        files::check_client_path(destination)?;
        let (parent, name) = match (destination.parent(), destination.file_name()) {
            (Some(parent), Some(name)) => (parent, name),
            _ => {
                return Err(ArtifactError::PathNotAllowed {
                    reason: "the path names no file",
                });
            }
        };
        let client = |op: &'static str| {
            let path = destination.to_owned();
            move |error: std::io::Error| {
                client_error(op, path, error, "the directory is not writable")
            }
        };
        // Links on the way to the directory are the client's choice; from here on every step
        // is relative to this one opened directory and never follows a link at a name in it.
        let dir = match os::DirHandle::open(parent) {
            Ok(dir) => dir,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ArtifactError::FileNotFound(parent.to_owned()));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(ArtifactError::PathNotAllowed {
                    reason: "the parent is not a directory",
                });
            }
            Err(error) => return Err(client("open the directory of")(error)),
        };
        if files::is_within(parent, &self.home_root) {
            return Err(ArtifactError::PathNotAllowed {
                reason: "the path is inside the Broker home",
            });
        }
        let existing = dir.entry_kind(name).map_err(client("inspect"))?;
        check_destination(existing, overwrite, destination)?;
        let (artifact, source_path) = self.get(workspace_id, id, now)?;
        let mut source = File::open(&source_path).map_err(|error| match error.kind() {
            // Released or swept since the lookup.
            std::io::ErrorKind::NotFound => ArtifactError::NotFound,
            _ => storage("open artifact bytes")(error),
        })?;
        let (temp, mut output) = create_export_temp(&dir).map_err(client("create"))?;
        let result = (|| {
            let (_, sha256) =
                files::copy_hashing(&mut source, &mut output, artifact.byte_len, |total| {
                    progress.advance(total)
                })
                .map_err(|error| match error {
                    CopyError::TooLarge => storage("verify artifact bytes")(std::io::Error::other(
                        "artifact bytes grew",
                    )),
                    CopyError::Read(error) => storage("read artifact bytes")(error),
                    CopyError::Write(error) => client("write")(error),
                })?;
            // The client's copy outlives the Broker: make it durable before it gets its name.
            progress.begin_opaque_step();
            output.sync_all().map_err(client("write"))?;
            if sha256 != artifact.sha256 {
                return Err(storage("verify artifact bytes")(std::io::Error::other(
                    "artifact bytes changed",
                )));
            }
            if !progress.begin_finish() {
                return Err(ArtifactError::Stalled {
                    op: "export",
                    seconds: 0,
                });
            }
            place(&dir, &temp, name, overwrite, destination).map_err(|error| match error {
                Placed::Refused(error) => error,
                Placed::Io(error) => client("write")(error),
            })
        })();
        drop(output);
        // Gone already when the name was taken through a hard link or a rename.
        let _ = dir.remove_file(&temp);
        result.map(|()| artifact)
    }

    fn retain(&self, workspace_id: &str, id: &str, now: i64) -> Result<Artifact, ArtifactError> {
        let row = self.live_row(workspace_id, id, now)?;
        let expires_at = row.expires_at.max(now + self.limits.retained_ttl_ms);
        let row = self
            .store
            .set_retained(&row.id, expires_at)?
            .ok_or(ArtifactError::NotFound)?;
        Ok(self.artifact(row))
    }

    fn release(&self, workspace_id: &str, id: &str) -> Result<Artifact, ArtifactError> {
        self.store
            .get_artifact(workspace_id, id)?
            .ok_or(ArtifactError::NotFound)?;
        // Deleting the row first makes a concurrent second release see `NotFound`.
        let row = self
            .store
            .delete_artifact(id)?
            .ok_or(ArtifactError::NotFound)?;
        let artifact = self.artifact(row.clone());
        self.remove_bytes(&self.row_path(&row), row.file_name.is_some());
        self.unreserve(&row.workspace_id, &row.id);
        Ok(artifact)
    }

    fn sweep_expired(&self, now: i64) -> Result<usize, ArtifactError> {
        let mut removed = 0;
        for expired in self.store.expired_artifacts(now)? {
            if let Some(row) = self.store.delete_artifact(&expired.id)? {
                self.remove_bytes(&self.row_path(&row), row.file_name.is_some());
                self.unreserve(&row.workspace_id, &row.id);
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn purge_workspace(&self, workspace_id: &str) -> Result<(), ArtifactError> {
        self.ledger
            .lock()
            .expect("ledger lock")
            .workspaces
            .remove(workspace_id);
        match std::fs::remove_dir_all(self.workspace_dir(workspace_id)) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(storage("remove workspace artifacts")(error)),
        }
    }

    fn reserve(
        &self,
        workspace_id: &str,
        id: &str,
        len: u64,
        extras: Extras,
    ) -> Result<(), ArtifactError> {
        let mut ledger = self.ledger.lock().expect("ledger lock");
        let held = ledger
            .workspaces
            .entry(workspace_id.to_owned())
            .or_default();
        if held.artifacts.len() as u64 >= self.limits.max_artifacts_per_workspace {
            return Err(ArtifactError::QuotaExceeded {
                what: "artifacts per workspace",
                limit: self.limits.max_artifacts_per_workspace,
            });
        }
        if held.bytes + len > self.limits.workspace_quota_bytes {
            return Err(ArtifactError::QuotaExceeded {
                what: "artifact bytes per workspace",
                limit: self.limits.workspace_quota_bytes,
            });
        }
        held.bytes += len;
        held.artifacts.insert(id.to_owned(), (len, extras));
        Ok(())
    }

    fn unreserve(&self, workspace_id: &str, id: &str) {
        let mut ledger = self.ledger.lock().expect("ledger lock");
        if let Some(held) = ledger.workspaces.get_mut(workspace_id) {
            if let Some((len, _)) = held.artifacts.remove(id) {
                held.bytes -= len;
            }
            if held.artifacts.is_empty() {
                ledger.workspaces.remove(workspace_id);
            }
        }
    }
}

/// Download capture (docs/artifacts.md, "Downloads"): a file the browser finished downloading
/// for a controlled session is copied into that session's staging directory
/// (`<root>/staging/<session>/`, 0700; the copy 0600), the browser's own file is deleted, and
/// the staged copy is renamed into place as a Workspace-owned `download` Artifact.
impl Artifacts {
    /// The staging directory named `stem` (one per controlled CDP session); created on first
    /// use by [`Artifacts::capture_download`], never handed out.
    pub fn staging_dir(&self, stem: &str) -> PathBuf {
        self.inner
            .staging_root()
            .join(path_component(stem, IdKind::Download))
    }

    /// Creates the staging directory (0700) before any download lands in it.
    pub async fn prepare_staging(&self, staging: PathBuf) -> Result<(), ArtifactError> {
        self.blocking(move |inner| {
            inner.ensure_root()?;
            private_dir(&inner.staging_root())?;
            private_dir(&staging)
        })
        .await
    }

    /// Removes a staging directory and whatever is left in it.
    pub async fn remove_staging(&self, staging: PathBuf) {
        let _ = self
            .blocking(move |_| {
                match std::fs::remove_dir_all(&staging) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        tracing::warn!(%error, "cannot remove a download staging directory");
                    }
                    _ => {}
                }
                Ok(())
            })
            .await;
    }

    /// Copies `reported` (the browser's finished download, created by that download) into
    /// `staging`, deletes `reported` whatever happens next, and stores the staged copy as a
    /// `download` Artifact of `workspace_id` named after `file_name` (sanitized). The copy is
    /// bounded by the per-Artifact limit; the Workspace quota applies as for every Artifact.
    pub async fn capture_download(
        &self,
        workspace_id: &str,
        file_name: &str,
        reported: PathBuf,
        staging: PathBuf,
        now: i64,
    ) -> Result<Artifact, ArtifactError> {
        let (workspace_id, file_name) = (workspace_id.to_owned(), file_name.to_owned());
        self.blocking(move |inner| {
            let staged = inner.stage_download(&reported, &staging);
            if let Err(error) = std::fs::remove_file(&reported)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(%error, "cannot delete the browser's copy of a download");
            }
            let (staged, byte_len, sha256) = staged?;
            let file_name = files::sanitize_file_name(Path::new(&file_name));
            let mime_type = files::guess_mime(&file_name).to_owned();
            let id = new_id(IdKind::Artifact);
            let final_path = inner.artifact_path(&workspace_id, &id, &mime_type, Some(&file_name));
            if let Err(error) = inner.prepare_dirs(&final_path, &workspace_id) {
                let _ = std::fs::remove_file(&staged);
                return Err(error);
            }
            let mut new = NewArtifact::new(
                &workspace_id,
                ArtifactKind::Download,
                &mime_type,
                "browser_data",
            );
            new.file_name = Some(file_name);
            let written = Written {
                id,
                temp: staged,
                final_path,
                byte_len,
                sha256,
            };
            inner.commit(new, written, now)
        })
        .await
    }
}

impl Inner {
    fn staging_root(&self) -> PathBuf {
        self.root.join("staging")
    }

    /// The staged copy of `reported` in `staging`: its path, length and SHA-256.
    fn stage_download(
        &self,
        reported: &Path,
        staging: &Path,
    ) -> Result<(PathBuf, u64, String), ArtifactError> {
        self.ensure_root()?;
        private_dir(&self.staging_root())?;
        private_dir(staging)?;
        let browser_file = |source: std::io::Error| storage("read the downloaded file")(source);
        let mut input = os::open_read_nonblocking(reported).map_err(browser_file)?;
        let opened = input.metadata().map_err(browser_file)?;
        if !opened.is_file() {
            return Err(ArtifactError::PathNotAllowed {
                reason: "the download is not a regular file",
            });
        }
        self.check_size(opened.len())?;
        let staged = staging.join(path_component(&new_id(IdKind::Download), IdKind::Download));
        let copied = os::create_new_owner_only(&staged)
            .map_err(storage("create the staged download"))
            .and_then(|mut output| {
                files::copy_hashing(
                    &mut input,
                    &mut output,
                    self.limits.max_artifact_bytes,
                    |_| {},
                )
                .map_err(|error| match error {
                    CopyError::TooLarge => ArtifactError::TooLarge {
                        len: self.limits.max_artifact_bytes + 1,
                        limit: self.limits.max_artifact_bytes,
                    },
                    CopyError::Read(source) => browser_file(source),
                    CopyError::Write(source) => storage("write the staged download")(source),
                })
            });
        match copied {
            Ok((byte_len, sha256)) => Ok((staged, byte_len, sha256)),
            Err(error) => {
                let _ = std::fs::remove_file(&staged);
                Err(error)
            }
        }
    }
}

/// Creates an owner-only directory (and missing parents).
fn private_dir(dir: &Path) -> Result<(), ArtifactError> {
    ensure_private_dir(dir).map_err(|error| {
        let source = match error {
            crate::home::HomeError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        };
        storage("create a protected directory")(source)
    })
}

/// A file fully written to its temporary name, waiting for [`Inner::commit`].
struct Written {
    id: String,
    temp: PathBuf,
    final_path: PathBuf,
    byte_len: u64,
    sha256: String,
}

/// Why a finished temporary copy could not take its final name.
enum Placed {
    Refused(ArtifactError),
    Io(std::io::Error),
}

/// Import accepts a regular file only (a symlink to one is fine: `kind` is what it names).
fn check_import_kind(is_dir: bool, is_file: bool) -> Result<(), ArtifactError> {
    match (is_dir, is_file) {
        (true, _) => Err(ArtifactError::PathNotAllowed {
            reason: "the path is a directory",
        }),
        (false, false) => Err(ArtifactError::PathNotAllowed {
            reason: "the path is not a regular file",
        }),
        (false, true) => Ok(()),
    }
}

/// What may be at an export's final name: nothing; or, with `overwrite`, a regular file. A
/// symlink, FIFO, socket, device or directory there is refused, never written through.
fn check_destination(
    existing: Option<EntryKind>,
    overwrite: bool,
    destination: &Path,
) -> Result<(), ArtifactError> {
    match (existing, overwrite) {
        (None, _) => Ok(()),
        (Some(EntryKind::Directory), _) => Err(ArtifactError::PathNotAllowed {
            reason: "the path is a directory",
        }),
        (Some(_), false) => Err(ArtifactError::ExportExists(destination.to_owned())),
        (Some(EntryKind::File), true) => Ok(()),
        (Some(_), true) => Err(ArtifactError::PathNotAllowed {
            reason: "the destination is not a regular file",
        }),
    }
}

/// Attempts at a fresh temporary name before giving up (each name has 96 random bits, so a
/// second attempt only happens when someone planted exactly that name).
const EXPORT_TEMP_ATTEMPTS: usize = 8;

/// Creates the export's temporary file with `O_CREAT | O_EXCL | O_NOFOLLOW`, relative to the
/// opened directory, under a fresh unpredictable name.
fn create_export_temp(dir: &os::DirHandle) -> std::io::Result<(OsString, File)> {
    let mut last = None;
    for _ in 0..EXPORT_TEMP_ATTEMPTS {
        let name = files::export_temp_name();
        match dir.create_new_private(&name) {
            Ok(file) => return Ok((name, file)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => last = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

/// How often the final step looks again when the final name changes under it.
const PLACE_ATTEMPTS: usize = 4;

/// Gives the finished temporary file its final name. Without `overwrite` it never replaces
/// anything (exclusive rename, or a hard link); with `overwrite` it replaces only a regular
/// file. Renames replace the directory entry itself, so nothing is ever written through a
/// link, whatever appears at the name meanwhile.
fn place(
    dir: &os::DirHandle,
    temp: &OsStr,
    name: &OsStr,
    overwrite: bool,
    destination: &Path,
) -> Result<(), Placed> {
    let no_replace = |dir: &os::DirHandle| match dir.rename_no_replace(temp, name) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Err(Placed::Refused(
            ArtifactError::ExportExists(destination.to_owned()),
        )),
        Err(error) if error.kind() == std::io::ErrorKind::Unsupported => {
            Err(Placed::Refused(ArtifactError::PathNotAllowed {
                reason: "the file system cannot create a name without risking a replace",
            }))
        }
        Err(error) => Err(Placed::Io(error)),
    };
    if !overwrite {
        return no_replace(dir);
    }
    for _ in 0..PLACE_ATTEMPTS {
        let existing = dir.entry_kind(name).map_err(Placed::Io)?;
        check_destination(existing, true, destination).map_err(Placed::Refused)?;
        match existing {
            Some(_) => return dir.rename_replace(temp, name).map_err(Placed::Io),
            None => match no_replace(dir) {
                // Something took the name meanwhile: look at it again.
                Err(Placed::Refused(ArtifactError::ExportExists(_))) => continue,
                other => return other,
            },
        }
    }
    Err(Placed::Refused(ArtifactError::ExportExists(
        destination.to_owned(),
    )))
}

/// Maps an I/O failure on a client path: missing is `file_not_found`, denied is
/// `path_not_allowed` (`denied` says which), a path the OS cannot use is the client's mistake
/// (`BadPath`), the Broker's own exhaustion stays a retryable failure (`Client`), and any other
/// failure of the client's file is `path_not_allowed` with a reason.
fn client_error(
    op: &'static str,
    path: PathBuf,
    error: std::io::Error,
    denied: &'static str,
) -> ArtifactError {
    match error.kind() {
        std::io::ErrorKind::NotFound => return ArtifactError::FileNotFound(path),
        std::io::ErrorKind::PermissionDenied => {
            return ArtifactError::PathNotAllowed { reason: denied };
        }
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidFilename => {
            return ArtifactError::BadPath {
                reason: "the operating system cannot use this path",
            };
        }
        std::io::ErrorKind::NotADirectory => {
            return ArtifactError::PathNotAllowed {
                reason: "a component of the path is not a directory",
            };
        }
        std::io::ErrorKind::ReadOnlyFilesystem => {
            return ArtifactError::PathNotAllowed {
                reason: "the file system is read-only",
            };
        }
        std::io::ErrorKind::IsADirectory => {
            return ArtifactError::PathNotAllowed {
                reason: "the path is a directory",
            };
        }
        // A pseudo-file (say under /proc) that honours O_NONBLOCK: it would block a read.
        std::io::ErrorKind::WouldBlock => {
            return ArtifactError::PathNotAllowed {
                reason: "reading the file would block: it is not a plain file",
            };
        }
        std::io::ErrorKind::StorageFull => {
            return ArtifactError::PathNotAllowed {
                reason: "the file system is full",
            };
        }
        std::io::ErrorKind::FileTooLarge => {
            return ArtifactError::PathNotAllowed {
                reason: "the file system cannot hold a file this large",
            };
        }
        _ => {}
    }
    if os::is_symlink_loop(&error) {
        return ArtifactError::BadPath {
            reason: "the path has too many levels of symbolic links",
        };
    }
    // Out of descriptors or memory: the Broker's own condition, which may pass.
    if os::is_resource_exhaustion(&error) {
        return ArtifactError::Client {
            op,
            path,
            source: error,
        };
    }
    // Anything else (EIO from a failing disk, a pseudo-file that refuses reads) is about the
    // client's file: retrying unchanged would meet the same file.
    tracing::warn!(%error, op, "client file I/O failed");
    ArtifactError::PathNotAllowed {
        reason: "the file system reported an I/O error for this path",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{
        ConnectionKind, CreateWorkspace, NewConnection, NewWorkspace, PrincipalKey, StoreLimits,
    };

    const NOW: i64 = 1_000_000;

    struct Fixture {
        dir: tempfile::TempDir,
        home: Home,
        artifacts: Artifacts,
        outside: PathBuf,
    }

    fn fixture_with(limits: ArtifactLimits) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("home"));
        home.ensure().unwrap();
        let outside = dir.path().join("client");
        std::fs::create_dir_all(&outside).unwrap();
        let store = Store::open(StoreLimits::default()).unwrap();
        let principal = PrincipalKey {
            client_id: "client-a".into(),
            instance_id: "instance-a".into(),
        };
        store
            .open_connection(&NewConnection {
                id: "connection:1".into(),
                principal: principal.clone(),
                kind: ConnectionKind::Embedded,
                protocol_minor: 1,
                opened_at: 1,
            })
            .unwrap();
        for id in ["workspace:aa", "workspace:bb"] {
            let created = store
                .create_workspace(&NewWorkspace {
                    id: id.into(),
                    principal: principal.clone(),
                    browser_id: "browser:x".into(),
                    client_key: None,
                    options: Default::default(),
                    now: 1,
                })
                .unwrap();
            assert!(matches!(created, CreateWorkspace::Created(_)));
        }
        let artifacts = Artifacts::new(&home, store, limits);
        artifacts.purge_all().unwrap();
        Fixture {
            dir,
            home,
            artifacts,
            outside,
        }
    }

    fn fixture() -> Fixture {
        fixture_with(ArtifactLimits::default())
    }

    fn png(width: u32, height: u32, body: usize) -> Vec<u8> {
        let mut bytes = image::PNG_SIGNATURE.to_vec();
        bytes.extend_from_slice(&13u32.to_be_bytes());
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend(std::iter::repeat_n(0u8, body));
        bytes
    }

    fn screenshot(workspace: &str) -> NewArtifact {
        NewArtifact::new(
            workspace,
            ArtifactKind::Screenshot,
            "image/png",
            "browser_data",
        )
    }

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn create_get_and_descriptor() {
        let f = fixture();
        run(async {
            let bytes = png(640, 480, 100);
            let created = f
                .artifacts
                .create(screenshot("workspace:aa"), bytes.clone(), NOW)
                .await
                .unwrap();
            assert!(created.id.starts_with("artifact:"));
            assert_eq!((created.width, created.height), (Some(640), Some(480)));
            assert_eq!(created.expires_at, NOW + DEFAULT_TTL);
            assert_eq!(created.byte_len, bytes.len() as u64);
            assert_eq!(created.sha256, crate::hex::sha256(&bytes));
            let descriptor = created.to_json();
            assert_eq!(descriptor["kind"], "screenshot");
            assert_eq!(descriptor["width"], 640);
            assert!(descriptor.get("previewOf").is_none());
            assert!(
                !descriptor
                    .to_string()
                    .contains(f.home.root().to_str().unwrap())
            );

            let (got, path) = f
                .artifacts
                .get("workspace:aa", &created.id, NOW)
                .await
                .unwrap();
            assert_eq!(got, created);
            assert!(path.is_absolute() && path.starts_with(f.home.artifacts_dir()));
            assert_eq!(path.extension().unwrap(), "png");
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
            assert_eq!(mode(&f.home.artifacts_dir()), 0o700);

            assert!(matches!(
                f.artifacts.get("workspace:bb", &created.id, NOW).await,
                Err(ArtifactError::NotFound)
            ));
            let mut preview = screenshot("workspace:aa");
            preview.kind = ArtifactKind::Preview;
            preview.preview_of = Some(created.id.clone());
            let preview = f
                .artifacts
                .create(preview, png(10, 20, 0), NOW)
                .await
                .unwrap();
            let (got, _) = f
                .artifacts
                .get("workspace:aa", &preview.id, NOW)
                .await
                .unwrap();
            assert_eq!(got.to_json()["previewOf"], created.id.as_str());
            assert_eq!(got.to_json()["height"], 20);
        });
    }

    const DEFAULT_TTL: i64 = super::super::limits::DEFAULT_TTL_MS;

    #[test]
    fn base64_input_is_decoded_and_bounded() {
        let f = fixture_with(ArtifactLimits {
            max_artifact_bytes: 4,
            ..ArtifactLimits::default()
        });
        run(async {
            let made = f
                .artifacts
                .create_base64(screenshot("workspace:aa"), "Zm9v".into(), NOW)
                .await
                .unwrap();
            assert_eq!(made.byte_len, 3);
            assert!(matches!(
                f.artifacts
                    .create_base64(screenshot("workspace:aa"), "Zm9vYmFy".into(), NOW)
                    .await,
                Err(ArtifactError::TooLarge { len: 6, limit: 4 })
            ));
            assert!(matches!(
                f.artifacts
                    .create_base64(screenshot("workspace:aa"), "Zm9".into(), NOW)
                    .await,
                Err(ArtifactError::BadEncoding)
            ));
        });
    }

    #[test]
    fn quotas_per_workspace() {
        let f = fixture_with(ArtifactLimits {
            workspace_quota_bytes: 10,
            max_artifacts_per_workspace: 2,
            ..ArtifactLimits::default()
        });
        run(async {
            let a = f
                .artifacts
                .create(screenshot("workspace:aa"), vec![1; 6], NOW)
                .await
                .unwrap();
            assert!(matches!(
                f.artifacts
                    .create(screenshot("workspace:aa"), vec![1; 5], NOW)
                    .await,
                Err(ArtifactError::QuotaExceeded {
                    what: "artifact bytes per workspace",
                    limit: 10
                })
            ));
            f.artifacts
                .create(screenshot("workspace:bb"), vec![1; 5], NOW)
                .await
                .unwrap();
            f.artifacts
                .create(screenshot("workspace:aa"), vec![1; 4], NOW)
                .await
                .unwrap();
            assert!(matches!(
                f.artifacts
                    .create(screenshot("workspace:aa"), vec![], NOW)
                    .await,
                Err(ArtifactError::QuotaExceeded {
                    what: "artifacts per workspace",
                    limit: 2
                })
            ));
            f.artifacts.release("workspace:aa", &a.id).await.unwrap();
            f.artifacts
                .create(screenshot("workspace:aa"), vec![1; 6], NOW)
                .await
                .unwrap();
        });
    }

    #[test]
    fn unknown_workspace_leaves_nothing_behind() {
        let f = fixture();
        run(async {
            assert!(matches!(
                f.artifacts
                    .create(screenshot("workspace:cc"), vec![1; 6], NOW)
                    .await,
                Err(ArtifactError::WorkspaceNotFound)
            ));
            let leftovers: Vec<_> = std::fs::read_dir(f.home.artifacts_dir().join("cc"))
                .unwrap()
                .collect();
            assert!(leftovers.is_empty(), "{leftovers:?}");
            assert!(
                f.artifacts
                    .inner
                    .ledger
                    .lock()
                    .unwrap()
                    .workspaces
                    .is_empty()
            );
        });
    }

    #[test]
    fn release_retain_expiry_and_sweep() {
        let f = fixture();
        run(async {
            let a = f
                .artifacts
                .create(screenshot("workspace:aa"), vec![1; 6], NOW)
                .await
                .unwrap();
            let b = f
                .artifacts
                .create(screenshot("workspace:aa"), vec![2; 6], NOW)
                .await
                .unwrap();
            let (_, a_path) = f.artifacts.get("workspace:aa", &a.id, NOW).await.unwrap();
            let (_, b_path) = f.artifacts.get("workspace:aa", &b.id, NOW).await.unwrap();

            assert!(matches!(
                f.artifacts.release("workspace:bb", &a.id).await,
                Err(ArtifactError::NotFound)
            ));
            f.artifacts.release("workspace:aa", &a.id).await.unwrap();
            assert!(!a_path.exists());
            assert!(matches!(
                f.artifacts.release("workspace:aa", &a.id).await,
                Err(ArtifactError::NotFound)
            ));
            assert!(matches!(
                f.artifacts.get("workspace:aa", &a.id, NOW).await,
                Err(ArtifactError::NotFound)
            ));

            let later = NOW + 1_000;
            let retained = f
                .artifacts
                .retain("workspace:aa", &b.id, later)
                .await
                .unwrap();
            assert!(retained.retained);
            assert_eq!(retained.expires_at, later + RETAINED_TTL);

            let c = f
                .artifacts
                .create(screenshot("workspace:aa"), vec![3; 6], NOW)
                .await
                .unwrap();
            let (_, c_path) = f.artifacts.get("workspace:aa", &c.id, NOW).await.unwrap();
            let expired_at = NOW + DEFAULT_TTL;
            assert!(matches!(
                f.artifacts.get("workspace:aa", &c.id, expired_at).await,
                Err(ArtifactError::Expired { expired_at: at }) if at == expired_at
            ));
            assert!(matches!(
                f.artifacts.retain("workspace:aa", &c.id, expired_at).await,
                Err(ArtifactError::Expired { .. })
            ));
            assert_eq!(f.artifacts.sweep_expired(expired_at - 1).await.unwrap(), 0);
            assert_eq!(f.artifacts.sweep_expired(expired_at).await.unwrap(), 1);
            assert!(!c_path.exists());
            assert!(b_path.exists(), "retained survives the sweep");
            assert!(matches!(
                f.artifacts.get("workspace:aa", &c.id, NOW).await,
                Err(ArtifactError::NotFound)
            ));
        });
    }

    const RETAINED_TTL: i64 = super::super::limits::RETAINED_TTL_MS;

    #[test]
    fn client_errors_are_the_clients_where_they_can_be() {
        let check = |error: std::io::Error, expect: &str| {
            let got = match client_error("read", PathBuf::from("/c/f"), error, "denied") {
                ArtifactError::FileNotFound(_) => "file_not_found",
                ArtifactError::PathNotAllowed { reason } => reason,
                ArtifactError::BadPath { reason } => reason,
                ArtifactError::Client { .. } => "client",
                other => panic!("{other:?}"),
            };
            assert_eq!(got, expect);
        };
        let raw = std::io::Error::from_raw_os_error;
        check(raw(libc::ENOENT), "file_not_found");
        check(raw(libc::EACCES), "denied");
        check(
            raw(libc::ENAMETOOLONG),
            "the operating system cannot use this path",
        );
        check(
            raw(libc::ELOOP),
            "the path has too many levels of symbolic links",
        );
        check(
            raw(libc::ENOTDIR),
            "a component of the path is not a directory",
        );
        check(raw(libc::EISDIR), "the path is a directory");
        check(raw(libc::EROFS), "the file system is read-only");
        check(
            raw(libc::EAGAIN),
            "reading the file would block: it is not a plain file",
        );
        check(raw(libc::ENOSPC), "the file system is full");
        check(
            raw(libc::EFBIG),
            "the file system cannot hold a file this large",
        );
        check(
            raw(libc::EIO),
            "the file system reported an I/O error for this path",
        );
        // The Broker's own exhaustion stays retryable.
        check(raw(libc::EMFILE), "client");
        check(raw(libc::ENOMEM), "client");
    }

    #[test]
    fn export_rules() {
        let f = fixture();
        run(async {
            let bytes = b"%PDF-1.7 test".to_vec();
            let pdf = NewArtifact::new(
                "workspace:aa",
                ArtifactKind::Pdf,
                "application/pdf",
                "browser_data",
            );
            let a = f.artifacts.create(pdf, bytes.clone(), NOW).await.unwrap();
            let export = |path: PathBuf, overwrite: bool| {
                let artifacts = f.artifacts.clone();
                let id = a.id.clone();
                async move {
                    artifacts
                        .export("workspace:aa", &id, path, overwrite, NOW)
                        .await
                }
            };
            let target = f.outside.join("report.pdf");
            export(target.clone(), false).await.unwrap();
            assert_eq!(std::fs::read(&target).unwrap(), bytes);
            assert!(matches!(
                export(target.clone(), false).await,
                Err(ArtifactError::ExportExists(_))
            ));
            std::fs::write(&target, b"old").unwrap();
            export(target.clone(), true).await.unwrap();
            assert_eq!(std::fs::read(&target).unwrap(), bytes);
            let leftovers = std::fs::read_dir(&f.outside).unwrap().count();
            assert_eq!(leftovers, 1, "no temporary file stays behind");

            assert!(matches!(
                export(PathBuf::from("relative/report.pdf"), true).await,
                Err(ArtifactError::PathNotAllowed { .. })
            ));
            assert!(matches!(
                export(f.outside.clone(), true).await,
                Err(ArtifactError::PathNotAllowed {
                    reason: "the path is a directory"
                })
            ));
            assert!(matches!(
                export(f.outside.join("missing/report.pdf"), false).await,
                Err(ArtifactError::FileNotFound(_))
            ));
            assert!(matches!(
                export(f.home.root().join("broker-locator.json"), true).await,
                Err(ArtifactError::PathNotAllowed {
                    reason: "the path is inside the Broker home"
                })
            ));
            assert!(matches!(
                f.artifacts
                    .export("workspace:bb", &a.id, f.outside.join("x.pdf"), false, NOW)
                    .await,
                Err(ArtifactError::NotFound)
            ));
        });
    }

    #[test]
    fn import_rules() {
        let f = fixture();
        run(async {
            let source = f.outside.join("résumé.PDF");
            std::fs::write(&source, b"%PDF source").unwrap();
            let imported = f
                .artifacts
                .import("workspace:aa", source.clone(), None, NOW)
                .await
                .unwrap();
            assert_eq!(imported.kind, ArtifactKind::UploadInput);
            assert_eq!(imported.mime_type, "application/pdf");
            assert_eq!(imported.sensitivity, "user_file");
            assert_eq!(imported.file_name.as_deref(), Some("résumé.PDF"));
            assert_eq!(
                std::fs::read(&source).unwrap(),
                b"%PDF source",
                "source untouched"
            );
            let (_, path) = f
                .artifacts
                .upload_input("workspace:aa", &imported.id, NOW)
                .await
                .unwrap();
            assert_eq!(path.file_name().unwrap(), "résumé.PDF");
            assert_eq!(std::fs::read(&path).unwrap(), b"%PDF source");
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
            f.artifacts
                .release("workspace:aa", &imported.id)
                .await
                .unwrap();
            assert!(!path.parent().unwrap().exists());
            assert!(source.exists(), "release never touches the source");

            let with_mime = f
                .artifacts
                .import(
                    "workspace:aa",
                    source.clone(),
                    Some("text/plain".into()),
                    NOW,
                )
                .await
                .unwrap();
            assert_eq!(with_mime.mime_type, "text/plain");
            let import = |path: PathBuf| {
                let artifacts = f.artifacts.clone();
                async move { artifacts.import("workspace:aa", path, None, NOW).await }
            };
            assert!(matches!(
                import(f.outside.clone()).await,
                Err(ArtifactError::PathNotAllowed {
                    reason: "the path is a directory"
                })
            ));
            std::os::unix::fs::symlink(&f.outside, f.dir.path().join("dirlink")).unwrap();
            assert!(matches!(
                import(f.dir.path().join("dirlink")).await,
                Err(ArtifactError::PathNotAllowed {
                    reason: "the path is a directory"
                })
            ));
            std::os::unix::fs::symlink(&source, f.dir.path().join("filelink")).unwrap();
            import(f.dir.path().join("filelink")).await.unwrap();
            assert!(matches!(
                import(f.outside.join("missing.pdf")).await,
                Err(ArtifactError::FileNotFound(_))
            ));
            assert!(matches!(
                import(PathBuf::from("résumé.PDF")).await,
                Err(ArtifactError::PathNotAllowed { .. })
            ));
            std::fs::write(f.home.root().join("inside.txt"), b"x").unwrap();
            assert!(matches!(
                import(f.home.root().join("inside.txt")).await,
                Err(ArtifactError::PathNotAllowed {
                    reason: "the path is inside the Broker home"
                })
            ));
            assert!(matches!(
                f.artifacts
                    .import("workspace:aa", source.clone(), Some("pdf".into()), NOW)
                    .await,
                Err(ArtifactError::BadMimeType(_))
            ));

            let shot = f
                .artifacts
                .create(screenshot("workspace:aa"), vec![1], NOW)
                .await
                .unwrap();
            assert!(matches!(
                f.artifacts
                    .upload_input("workspace:aa", &shot.id, NOW)
                    .await,
                Err(ArtifactError::KindNotAllowed {
                    kind: "screenshot",
                    ..
                })
            ));
        });
        let small = fixture_with(ArtifactLimits {
            max_artifact_bytes: 4,
            ..ArtifactLimits::default()
        });
        run(async {
            let source = small.outside.join("big.bin");
            std::fs::write(&source, b"12345").unwrap();
            assert!(matches!(
                small
                    .artifacts
                    .import("workspace:aa", source, None, NOW)
                    .await,
                Err(ArtifactError::TooLarge { .. })
            ));
        });
    }

    #[test]
    fn purges_remove_bytes() {
        let f = fixture();
        run(async {
            let a = f
                .artifacts
                .create(screenshot("workspace:aa"), vec![1; 6], NOW)
                .await
                .unwrap();
            let b = f
                .artifacts
                .create(screenshot("workspace:bb"), vec![1; 6], NOW)
                .await
                .unwrap();
            let (_, a_path) = f.artifacts.get("workspace:aa", &a.id, NOW).await.unwrap();
            let (_, b_path) = f.artifacts.get("workspace:bb", &b.id, NOW).await.unwrap();
            f.artifacts.purge_workspace("workspace:aa").await.unwrap();
            assert!(!a_path.exists() && !a_path.parent().unwrap().exists());
            assert!(b_path.exists());
            f.artifacts.purge_all().unwrap();
            assert!(!b_path.exists());
            assert_eq!(
                std::fs::read_dir(f.home.artifacts_dir()).unwrap().count(),
                0
            );
            assert_eq!(mode(&f.home.artifacts_dir()), 0o700);
        });
    }
}
