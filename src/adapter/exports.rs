//! The host's rules for saving files a page made the browser download, shared by every front
//! end that writes them into a directory of the user's (`browser-pilot mcp --output-dir`,
//! `bp downloads --save DIR`): the destination is checked as `artifacts/export` checks its own
//! (not a symlink, a directory of this user that nobody else can write into), the file gets a
//! name no page can choose to shadow a build or import file, and one session exports at most
//! [`MAX_DOWNLOAD_EXPORTS`] files and [`MAX_DOWNLOAD_EXPORT_BYTES`] bytes.
//!
//! Owns those three rules and the export of one download under them
//! ([`Workspace::export_download`]). It never exports a download nobody asked for and never
//! keeps a path beyond the call.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use super::artifacts::ExportedFile;
use super::lease::Lease;
use super::workspace::Workspace;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// Downloads one session may export.
pub const MAX_DOWNLOAD_EXPORTS: usize = 20;
/// Bytes of downloads one session may export.
pub const MAX_DOWNLOAD_EXPORT_BYTES: u64 = 256 * 1024 * 1024;
/// Characters kept of the page's own name inside the exported one.
const MAX_NAME_CHARS: usize = 60;
/// Completed downloads remembered per session (the oldest is forgotten first).
const MAX_REMEMBERED: usize = 200;

/// Why a directory given for the host's files is refused.
#[derive(Debug)]
pub enum DirProblem {
    Missing,
    Symlink,
    NotADirectory,
    ForeignOwner,
    OpenToOthers,
    Unreadable(std::io::Error),
}

impl std::fmt::Display for DirProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirProblem::Missing => f.write_str("the directory does not exist"),
            DirProblem::Symlink => f.write_str("the directory is a symlink; give its real path"),
            DirProblem::NotADirectory => f.write_str("not a directory"),
            DirProblem::ForeignOwner => f.write_str("the directory is owned by another user"),
            DirProblem::OpenToOthers => {
                f.write_str("the directory is writable by other users (chmod go-w)")
            }
            DirProblem::Unreadable(error) => write!(f, "cannot inspect the directory: {error}"),
        }
    }
}

/// The rules `artifacts/export` applies to its destination, for a directory that receives or
/// hands out the host's files: the name itself is not a symlink (never followed), it is a
/// directory, this user owns it, and neither group nor others may write into it (so nobody
/// else can plant a name there).
pub fn check_private_dir(dir: &Path) -> Result<(), DirProblem> {
    let facts = match crate::os::file_facts(dir, false) {
        Ok(facts) => facts,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(DirProblem::Missing);
        }
        Err(error) => return Err(DirProblem::Unreadable(error)),
    };
    match facts.kind {
        crate::os::EntryKind::Directory => {}
        crate::os::EntryKind::Symlink => return Err(DirProblem::Symlink),
        _ => return Err(DirProblem::NotADirectory),
    }
    if cfg!(unix) && facts.uid != crate::os::effective_uid() {
        return Err(DirProblem::ForeignOwner);
    }
    if facts.mode & 0o022 != 0 {
        return Err(DirProblem::OpenToOthers);
    }
    Ok(())
}

/// Makes sure `dir` can receive an export: created owner-only when missing (its parent must
/// exist), then [`check_private_dir`], checked again right before each export. A refusal is
/// `path_not_allowed` with `remediation` (the front end's own words for choosing another).
pub fn prepare_output_dir(dir: &Path, remediation: &str) -> Result<(), RpcError> {
    let refused = |problem: DirProblem| {
        RpcError::new(
            ErrorCode::PathNotAllowed,
            format!("the output directory {}: {problem}", dir.display()),
        )
        .with_remediation(RemediationAction::ChoosePath, remediation)
    };
    match check_private_dir(dir) {
        Ok(()) => Ok(()),
        Err(DirProblem::Missing) => {
            if let Err(error) = crate::os::create_private_dir(dir)
                && error.kind() != std::io::ErrorKind::AlreadyExists
            {
                return Err(refused(DirProblem::Unreadable(error)));
            }
            check_private_dir(dir).map_err(refused)
        }
        Err(problem) => Err(refused(problem)),
    }
}

/// The name an exported download gets: `download-<8 characters of its id>-<the page's name>`,
/// letters, digits, `.`, `-` and `_` only. The fixed prefix means no page can name a file the
/// host's tools pick up by its name (`conftest.py`, `setup.py`, `sitecustomize.py`,
/// `Makefile`, `.envrc`, `package.json`), and the `-` keeps it from being an importable module
/// name.
pub fn download_name(descriptor: &Value) -> String {
    let id: String = descriptor["id"]
        .as_str()
        .unwrap_or("")
        .rsplit(':')
        .next()
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    let page: String = descriptor["fileName"]
        .as_str()
        .or(descriptor["suggestedFilename"].as_str())
        .unwrap_or("file")
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                true => c,
                false => '_',
            },
        )
        .take(MAX_NAME_CHARS)
        .collect();
    let page = page.trim_matches('.');
    let page = match page.is_empty() {
        true => "file",
        false => page,
    };
    format!("download-{id}-{page}")
}

/// A session's completed downloads and how much of the export budget is spent.
#[derive(Debug, Default)]
pub struct Downloads {
    seen: HashMap<String, Value>,
    order: Vec<String>,
    exported: usize,
    bytes: u64,
}

impl Downloads {
    /// Remembers a completed download's descriptor; returns its notice for the host
    /// (`{artifactId, fileName, mimeType, byteLength}`).
    pub fn record(&mut self, descriptor: &Value) -> Option<Value> {
        let id = descriptor["id"].as_str()?.to_owned();
        if !self.seen.contains_key(&id) {
            self.order.push(id.clone());
        }
        self.seen.insert(id.clone(), descriptor.clone());
        if self.order.len() > MAX_REMEMBERED {
            let oldest = self.order.remove(0);
            self.seen.remove(&oldest);
        }
        Some(json!({
            "artifactId": id,
            "fileName": descriptor["fileName"].as_str().or(descriptor["suggestedFilename"].as_str()),
            "mimeType": descriptor["mimeType"],
            "byteLength": descriptor["byteLength"],
        }))
    }

    /// Takes a remembered download for export within the budget, reserving its share; the
    /// descriptor comes back with its safe `fileName`. [`Downloads::refund`] undoes it.
    pub fn take(&mut self, artifact_id: &str) -> Result<Value, RpcError> {
        let Some(descriptor) = self.seen.get(artifact_id) else {
            return Err(RpcError::new(
                ErrorCode::ArtifactNotFound,
                format!(
                    "{artifact_id:?} is not a completed download of this session that is still unexported"
                ),
            ));
        };
        let size = descriptor["byteLength"].as_u64().unwrap_or(0);
        if self.exported >= MAX_DOWNLOAD_EXPORTS || self.bytes + size > MAX_DOWNLOAD_EXPORT_BYTES {
            return Err(RpcError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "the session's download export budget ({MAX_DOWNLOAD_EXPORTS} files, {MAX_DOWNLOAD_EXPORT_BYTES} bytes) would be exceeded"
                ),
            )
            .with_context("exported", json!(self.exported))
            .with_context("exportedBytes", json!(self.bytes)));
        }
        let mut descriptor = self.seen.remove(artifact_id).unwrap_or_default();
        self.order.retain(|id| id != artifact_id);
        self.exported += 1;
        self.bytes += size;
        descriptor["fileName"] = json!(download_name(&descriptor));
        Ok(descriptor)
    }

    /// Gives back the budget of an export that failed (the download stays exportable).
    pub fn refund(&mut self, descriptor: &Value, original: Value) {
        self.exported = self.exported.saturating_sub(1);
        self.bytes = self
            .bytes
            .saturating_sub(descriptor["byteLength"].as_u64().unwrap_or(0));
        if let Some(id) = original["id"].as_str() {
            self.order.push(id.to_owned());
            self.seen.insert(id.to_owned(), original);
        }
    }

    /// The descriptor as the page gave it, for a refund.
    pub fn peek(&self, artifact_id: &str) -> Option<Value> {
        self.seen.get(artifact_id).cloned()
    }
}

impl Workspace {
    /// Exports one completed download of `book` into `dir` under its safe name, within the
    /// book's budget, after checking `dir` ([`prepare_output_dir`] with `remediation`); the
    /// protected copy is released. A failed export gives its share of the budget back and the
    /// download stays exportable.
    pub async fn export_download(
        &self,
        lease: &Lease,
        book: &std::sync::Mutex<Downloads>,
        artifact_id: &str,
        dir: &Path,
        remediation: &str,
    ) -> Result<ExportedFile, RpcError> {
        let (original, descriptor) = {
            let mut book = book.lock().expect("downloads lock");
            let original = book.peek(artifact_id);
            (original, book.take(artifact_id)?)
        };
        let exported = match prepare_output_dir(dir, remediation) {
            Ok(()) => self.export_file(lease, &descriptor, dir).await,
            Err(error) => Err(error),
        };
        if exported.is_err()
            && let Some(original) = original
        {
            book.lock()
                .expect("downloads lock")
                .refund(&descriptor, original);
        }
        exported
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exported_names_cannot_shadow_project_files() {
        for (page, want) in [
            ("conftest.py", "download-0123abcd-conftest.py"),
            ("setup.py", "download-0123abcd-setup.py"),
            ("Makefile", "download-0123abcd-Makefile"),
            (".envrc", "download-0123abcd-envrc"),
            ("../../etc/passwd", "download-0123abcd-_.._etc_passwd"),
            ("", "download-0123abcd-file"),
        ] {
            let descriptor = json!({"id": "artifact:0123abcd99", "fileName": page});
            assert_eq!(download_name(&descriptor), want, "{page}");
        }
    }

    #[test]
    fn the_budget_counts_files_and_bytes() {
        let mut book = Downloads::default();
        for n in 0..=MAX_DOWNLOAD_EXPORTS {
            book.record(
                &json!({"id": format!("artifact:{n}"), "fileName": "a.txt", "byteLength": 10}),
            );
        }
        for n in 0..MAX_DOWNLOAD_EXPORTS {
            let taken = book.take(&format!("artifact:{n}")).unwrap();
            assert!(taken["fileName"].as_str().unwrap().starts_with("download-"));
        }
        let over = book
            .take(&format!("artifact:{MAX_DOWNLOAD_EXPORTS}"))
            .unwrap_err();
        assert_eq!(over.code, ErrorCode::LimitExceeded);
        assert_eq!(
            book.take("artifact:0").unwrap_err().code,
            ErrorCode::ArtifactNotFound
        );
        let mut big = Downloads::default();
        big.record(&json!({"id": "artifact:big", "byteLength": MAX_DOWNLOAD_EXPORT_BYTES + 1}));
        assert_eq!(
            big.take("artifact:big").unwrap_err().code,
            ErrorCode::LimitExceeded
        );
    }
}
