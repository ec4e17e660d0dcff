//! The MCP server's own file tools, which the Broker's manifest has no equivalent of because
//! only this front end holds host paths: `browser_file_import` (listed only with `--upload-dir`)
//! copies a regular file under an upload directory into protected storage for
//! `browser_upload`; `browser_download_export` saves one completed download the host names into
//! `--output-dir` under a name that cannot shadow a build or import file, within a per-session
//! count and byte budget.
//!
//! Owns the tools' `tools/list` entries and the path rules of an import; the download export
//! rules (safe name, budget, checked directory) are the adapter's (`crate::adapter::exports`,
//! shared with `bp downloads --save`). It calls nothing: the session (`host.rs`) runs
//! `artifacts/import` and the export with what this decides.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub use crate::adapter::exports::{Downloads, MAX_DOWNLOAD_EXPORT_BYTES, MAX_DOWNLOAD_EXPORTS};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

pub const IMPORT_TOOL: &str = "browser_file_import";
pub const EXPORT_TOOL: &str = "browser_download_export";

/// What a refused `--output-dir` tells the user to do.
pub const OUTPUT_DIR_REMEDIATION: &str = "Restart the MCP server with --output-dir naming a directory you own that others cannot write to.";

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

/// Makes sure `--output-dir` can receive an export (`crate::adapter::exports`).
pub fn prepare_output_dir(dir: &Path) -> Result<(), RpcError> {
    crate::adapter::exports::prepare_output_dir(dir, OUTPUT_DIR_REMEDIATION)
}

#[cfg(test)]
mod tests {
    use super::*;

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
