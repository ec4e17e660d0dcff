//! The MCP server's own file tools, which the Broker's manifest has no equivalent of because
//! only this front end holds host paths: `browser_file_import` (listed only with `--upload-dir`)
//! copies a regular file under an upload directory into protected storage for
//! `browser_upload`; `browser_download_export` saves one completed download the host names into
//! `--output-dir` under a name that cannot shadow a build or import file, within a per-session
//! count and byte budget.
//!
//! Owns the tools' `tools/list` entries, the path rules of an import, the session's book of
//! completed downloads with its export budget, and the exported name. It calls nothing: the
//! session (`host.rs`) runs `artifacts/import` and `artifacts/export` with what this decides.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::options::{DirProblem, check_private_dir};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

pub const IMPORT_TOOL: &str = "browser_file_import";
pub const EXPORT_TOOL: &str = "browser_download_export";

/// Downloads one session may export into `--output-dir`.
pub const MAX_DOWNLOAD_EXPORTS: usize = 20;
/// Bytes of downloads one session may export into `--output-dir`.
pub const MAX_DOWNLOAD_EXPORT_BYTES: u64 = 256 * 1024 * 1024;
/// Characters kept of the page's own name inside the exported one.
const MAX_NAME_CHARS: usize = 60;
/// Completed downloads remembered per session (the oldest is forgotten first).
const MAX_REMEMBERED: usize = 200;

/// The `tools/list` entry of the import tool.
pub fn import_tool() -> Value {
    json!({
        "name": IMPORT_TOOL,
        "title": "browser.file.import",
        "description": "Copy a file under an --upload-dir directory into protected storage; pass the returned artifact.id to browser_upload as artifactId.",
        "inputSchema": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 4096, "x-browser-pilot-sensitivity": ["user_file"], "description": "Absolute path of a file under an upload directory."},
                "mimeType": {"type": "string", "minLength": 1, "maxLength": 255, "description": "MIME type of the file; default guessed from its name."},
            },
            "required": ["path"],
        },
        "outputSchema": {"type": "object", "properties": {"artifact": {"type": "object"}}, "required": ["artifact"]},
        "annotations": {"title": "browser.file.import", "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false},
        "_meta": {"browser-pilot/sensitivity": {"input": ["user_file"], "output": ["user_file"]}},
    })
}

/// The `tools/list` entry of the download export tool.
pub fn export_tool() -> Value {
    json!({
        "name": EXPORT_TOOL,
        "title": "browser.download.export",
        "description": format!("Save a completed download (artifactId from a download notice) into the output directory; at most {MAX_DOWNLOAD_EXPORTS} files and {} MiB per session.", MAX_DOWNLOAD_EXPORT_BYTES / (1024 * 1024)),
        "inputSchema": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "artifactId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Artifact id of a completed download of this session."},
            },
            "required": ["artifactId"],
        },
        "outputSchema": {"type": "object", "properties": {"artifactId": {"type": "string"}, "fileName": {"type": "string"}, "byteLength": {"type": "integer"}}, "required": ["artifactId", "fileName"]},
        "annotations": {"title": "browser.download.export", "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false},
        "_meta": {"browser-pilot/sensitivity": {"input": [], "output": ["browser_data"]}},
    })
}

fn not_allowed(message: String) -> RpcError {
    RpcError::new(ErrorCode::PathNotAllowed, message)
}

/// The file an import may read: `path` is absolute and, with every symlink resolved, a regular
/// file inside one of `dirs` (themselves resolved when the server started). Anything else is
/// `path_not_allowed`; the resolved path is what the Broker is given.
pub fn importable(path: &str, dirs: &[PathBuf]) -> Result<PathBuf, RpcError> {
    let given = Path::new(path);
    if !given.is_absolute() {
        return Err(not_allowed(format!("{path}: the path must be absolute")));
    }
    let resolved = given
        .canonicalize()
        .map_err(|error| not_allowed(format!("{path}: cannot resolve the path: {error}")))?;
    if !dirs.iter().any(|dir| resolved.starts_with(dir)) {
        return Err(not_allowed(format!(
            "{path} is not under an --upload-dir directory (after resolving symlinks)"
        ))
        .with_remediation(
            RemediationAction::ChoosePath,
            "Put the file in a directory the MCP server was started with (--upload-dir DIR).",
        ));
    }
    match std::fs::metadata(&resolved) {
        Ok(metadata) if metadata.is_file() => Ok(resolved),
        Ok(_) => Err(not_allowed(format!("{path}: not a regular file"))),
        Err(error) => Err(not_allowed(format!("{path}: {error}"))),
    }
}

/// Makes sure `dir` can receive an export: created owner-only when missing (its parent must
/// exist), then the same rules as at startup (not a symlink, a directory of this user that
/// nobody else can write into), checked again right before each export.
pub fn prepare_output_dir(dir: &Path) -> Result<(), RpcError> {
    let refused = |problem: DirProblem| {
        not_allowed(format!("the output directory {}: {problem}", dir.display())).with_remediation(
            RemediationAction::ChoosePath,
            "Restart the MCP server with --output-dir naming a directory you own that others cannot write to.",
        )
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

/// The session's completed downloads and how much of the export budget is spent.
#[derive(Debug, Default)]
pub struct Downloads {
    seen: HashMap<String, Value>,
    order: Vec<String>,
    exported: usize,
    bytes: u64,
}

impl Downloads {
    /// Remembers a completed download's descriptor; returns the notice for the host.
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

    #[cfg(unix)]
    #[test]
    fn imports_stay_inside_the_upload_directories() {
        let scratch = tempfile::tempdir().unwrap();
        let uploads = scratch.path().join("uploads");
        std::fs::create_dir(&uploads).unwrap();
        std::fs::write(uploads.join("cv.txt"), "cv").unwrap();
        std::fs::write(scratch.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(scratch.path().join("secret.txt"), uploads.join("out.txt"))
            .unwrap();
        let dirs = [uploads.canonicalize().unwrap()];
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        assert!(importable(&path(&uploads.join("cv.txt")), &dirs).is_ok());
        for refused in [
            path(&scratch.path().join("secret.txt")),
            path(&uploads.join("out.txt")),
            path(&uploads.join("../secret.txt")),
            path(&uploads),
            "cv.txt".to_owned(),
        ] {
            let error = importable(&refused, &dirs).unwrap_err();
            assert_eq!(error.code, ErrorCode::PathNotAllowed, "{refused}");
        }
    }
}
