//! Artifacts turned into host content: images read from the protected path, other files
//! exported into a host-owned directory; both released from protected storage afterwards.
//!
//! Owns the host side of `artifacts/get|export|release` only. It never keeps bytes or paths
//! beyond the call that asked for them, never writes inside the Broker home, and never
//! overwrites a host file (an existing name gets a numbered sibling instead).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::lease::Lease;
use super::workspace::Workspace;
use crate::protocol::errors::{ErrorCode, RpcError};

/// Numbered siblings tried before an export gives up on finding a free name.
const MAX_NAME_ATTEMPTS: u32 = 100;

/// Longest file-name stem taken from a descriptor.
const MAX_STEM_CHARS: usize = 80;

/// An image's bytes, ready for the host's native image content.
#[derive(Debug, Clone)]
pub struct ImageData {
    pub bytes: Vec<u8>,
    pub mime_type: String,
    pub descriptor: Value,
}

/// A file now owned by the host.
#[derive(Debug, Clone)]
pub struct ExportedFile {
    pub path: PathBuf,
    pub mime_type: String,
    pub byte_length: u64,
    pub descriptor: Value,
}

impl Workspace {
    fn artifact_params(&self, lease: &Lease, artifact_id: &str) -> Value {
        json!({"workspaceId": self.id(), "leaseId": lease.id(), "artifactId": artifact_id})
    }

    /// `artifacts/release`.
    pub async fn release_artifact(&self, lease: &Lease, artifact_id: &str) -> Result<(), RpcError> {
        self.check_open()?;
        self.session
            .request(
                "artifacts/release",
                self.artifact_params(lease, artifact_id),
            )
            .await
            .map(|_| ())
    }

    /// Reads an image Artifact from its protected path, then releases it (also when the read
    /// failed: the bytes are not needed twice).
    pub async fn read_image(
        &self,
        lease: &Lease,
        descriptor: &Value,
    ) -> Result<ImageData, RpcError> {
        self.check_open()?;
        let artifact_id = descriptor_id(descriptor)?;
        let got = self
            .session
            .request("artifacts/get", self.artifact_params(lease, artifact_id))
            .await?;
        let path = got["path"].as_str().unwrap_or_default().to_owned();
        let bytes = tokio::fs::read(&path).await;
        if let Err(error) = self.release_artifact(lease, artifact_id).await {
            tracing::warn!(%error, "artifact release after read failed");
        }
        let bytes = bytes.map_err(|error| {
            RpcError::new(
                ErrorCode::ArtifactNotFound,
                format!("the protected Artifact file could not be read: {error}"),
            )
        })?;
        Ok(ImageData {
            bytes,
            mime_type: got["artifact"]["mimeType"]
                .as_str()
                .or(descriptor["mimeType"].as_str())
                .unwrap_or("application/octet-stream")
                .to_owned(),
            descriptor: got["artifact"].clone(),
        })
    }

    /// Exports a file Artifact into the absolute host-owned `dir` (created owner-only when
    /// missing) under a free name, then releases the protected copy.
    pub async fn export_file(
        &self,
        lease: &Lease,
        descriptor: &Value,
        dir: &Path,
    ) -> Result<ExportedFile, RpcError> {
        self.check_open()?;
        let artifact_id = descriptor_id(descriptor)?;
        if !dir.is_absolute() {
            return Err(RpcError::invalid_params(format!(
                "the output directory must be absolute, not {}",
                dir.display()
            )));
        }
        create_private_dir(dir)?;
        let (stem, extension) = file_name_parts(descriptor);
        let mut exported = None;
        for attempt in 1..=MAX_NAME_ATTEMPTS {
            let name = match attempt {
                1 => format!("{stem}.{extension}"),
                n => format!("{stem}-{n}.{extension}"),
            };
            let path = dir.join(name);
            let mut params = self.artifact_params(lease, artifact_id);
            params["path"] = json!(path.to_string_lossy());
            match self.session.request("artifacts/export", params).await {
                Ok(result) => {
                    exported = Some((path, result));
                    break;
                }
                Err(error) if error.code == ErrorCode::ExportExists => continue,
                Err(error) => return Err(error),
            }
        }
        let Some((path, result)) = exported else {
            return Err(RpcError::new(
                ErrorCode::ExportExists,
                format!("no free file name for {stem}.{extension} in the output directory"),
            ));
        };
        if let Err(error) = self.release_artifact(lease, artifact_id).await {
            tracing::warn!(%error, "artifact release after export failed");
        }
        Ok(ExportedFile {
            path,
            mime_type: descriptor["mimeType"]
                .as_str()
                .unwrap_or("application/octet-stream")
                .to_owned(),
            byte_length: result["byteLength"]
                .as_u64()
                .or(descriptor["byteLength"].as_u64())
                .unwrap_or(0),
            descriptor: descriptor.clone(),
        })
    }
}

fn descriptor_id(descriptor: &Value) -> Result<&str, RpcError> {
    descriptor["id"]
        .as_str()
        .ok_or_else(|| RpcError::invalid_params("the Artifact descriptor has no id"))
}

fn create_private_dir(dir: &Path) -> Result<(), RpcError> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)
        .and_then(|()| crate::os::set_owner_only(dir, true))
        .map_err(|error| {
            RpcError::new(
                ErrorCode::PathNotAllowed,
                format!(
                    "cannot create the output directory {}: {error}",
                    dir.display()
                ),
            )
        })
}

/// A safe file-name stem and extension: the descriptor's `fileName` when it has one (letters,
/// digits, `.`, `-`, `_` kept), else `kind-<id prefix>`; the extension from the MIME type.
pub fn file_name_parts(descriptor: &Value) -> (String, String) {
    let mime = descriptor["mimeType"].as_str().unwrap_or("");
    let by_mime = match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "text/html" => "html",
        "application/json" => "json",
        _ => "bin",
    };
    let safe = |text: &str| -> String {
        text.chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    true => c,
                    false => '_',
                },
            )
            .take(MAX_STEM_CHARS)
            .collect::<String>()
            .trim_start_matches('.')
            .to_owned()
    };
    let named = descriptor["fileName"]
        .as_str()
        .or(descriptor["suggestedFilename"].as_str())
        .map(safe)
        .filter(|name| !name.is_empty());
    if let Some(name) = named {
        return match name.rsplit_once('.') {
            Some((stem, extension)) if !stem.is_empty() && !extension.is_empty() => {
                (stem.to_owned(), extension.to_owned())
            }
            _ => (name, by_mime.to_owned()),
        };
    }
    let kind = safe(descriptor["kind"].as_str().unwrap_or("artifact"));
    let id = descriptor["id"].as_str().unwrap_or("");
    let short: String = id
        .rsplit(':')
        .next()
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect();
    (format!("{kind}-{short}"), by_mime.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe() {
        let check = |descriptor: Value, stem: &str, extension: &str| {
            assert_eq!(
                file_name_parts(&descriptor),
                (stem.to_owned(), extension.to_owned()),
                "{descriptor}"
            );
        };
        check(
            json!({"id": "artifact:0123456789abcdef99", "kind": "pdf", "mimeType": "application/pdf"}),
            "pdf-0123456789ab",
            "pdf",
        );
        check(
            json!({"id": "artifact:1", "kind": "download", "mimeType": "text/csv", "fileName": "../../etc/report 1.csv"}),
            "_.._etc_report_1",
            "csv",
        );
        check(
            json!({"id": "artifact:1", "kind": "download", "fileName": "..."}),
            "download-1",
            "bin",
        );
        check(
            json!({"id": "artifact:1", "kind": "screenshot", "mimeType": "image/jpeg"}),
            "screenshot-1",
            "jpg",
        );
    }
}
