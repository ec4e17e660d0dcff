//! What an Artifact is to the outside: its kind and the descriptor hosts receive. A descriptor
//! never carries a path.

use serde_json::{Value, json};

use crate::store::ArtifactRow;

/// The kinds of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactKind {
    Screenshot,
    Pdf,
    Download,
    /// A client file copied in by `artifacts/import`, for `browser.upload`.
    UploadInput,
    /// A scaled-down screenshot sized for a model.
    Preview,
    /// A Workspace's cookies and web storage, written by `browser.storage.save` (sensitivity
    /// `credential`; the versioned JSON of docs/artifacts.md, "Storage state").
    StorageState,
    /// A live view recording of a tab: one self-contained HTML file (docs/view.md).
    Recording,
}

impl ArtifactKind {
    pub const ALL: &'static [ArtifactKind] = &[
        ArtifactKind::Screenshot,
        ArtifactKind::Pdf,
        ArtifactKind::Download,
        ArtifactKind::UploadInput,
        ArtifactKind::Preview,
        ArtifactKind::StorageState,
        ArtifactKind::Recording,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Screenshot => "screenshot",
            ArtifactKind::Pdf => "pdf",
            ArtifactKind::Download => "download",
            ArtifactKind::UploadInput => "upload_input",
            ArtifactKind::Preview => "preview",
            ArtifactKind::StorageState => "storage_state",
            ArtifactKind::Recording => "recording",
        }
    }

    pub fn parse(text: &str) -> Option<ArtifactKind> {
        ArtifactKind::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == text)
    }
}

/// What a producer (a tool, an import) knows about Artifact bytes it hands over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact {
    pub workspace_id: String,
    pub kind: ArtifactKind,
    pub mime_type: String,
    /// Sensitivity class: `browser_data` for page captures, `user_file` for client files.
    pub sensitivity: &'static str,
    /// For a preview: the original it was scaled from, when that original is kept.
    pub preview_of: Option<String>,
    /// Pixel size of an image; filled from the image header when left `None`.
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// The name the bytes carry on disk (an upload's original file name), if any.
    pub file_name: Option<String>,
}

impl NewArtifact {
    pub fn new(
        workspace_id: &str,
        kind: ArtifactKind,
        mime_type: &str,
        sensitivity: &'static str,
    ) -> NewArtifact {
        NewArtifact {
            workspace_id: workspace_id.to_owned(),
            kind,
            mime_type: mime_type.to_owned(),
            sensitivity,
            preview_of: None,
            width: None,
            height: None,
            file_name: None,
        }
    }
}

/// Facts about an Artifact that the metadata row has no column for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Extras {
    pub preview_of: Option<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// One stored Artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub id: String,
    pub workspace_id: String,
    pub kind: ArtifactKind,
    pub mime_type: String,
    pub byte_len: u64,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub retained: bool,
    pub sensitivity: String,
    pub preview_of: Option<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub file_name: Option<String>,
}

impl Artifact {
    pub(super) fn from_row(row: ArtifactRow, extras: Option<&Extras>) -> Artifact {
        let extras = extras.cloned().unwrap_or_default();
        Artifact {
            kind: ArtifactKind::parse(&row.kind).unwrap_or(ArtifactKind::Download),
            id: row.id,
            workspace_id: row.workspace_id,
            mime_type: row.mime_type,
            byte_len: row.byte_len,
            sha256: row.sha256,
            created_at: row.created_at,
            expires_at: row.expires_at,
            retained: row.retained,
            sensitivity: row.sensitivity,
            preview_of: extras.preview_of,
            width: extras.width,
            height: extras.height,
            file_name: row.file_name,
        }
    }

    /// The descriptor hosts receive (`result.artifact`). Optional members appear only when set.
    pub fn to_json(&self) -> Value {
        let mut descriptor = json!({
            "id": self.id,
            "kind": self.kind.as_str(),
            "mimeType": self.mime_type,
            "byteLength": self.byte_len,
            "sha256": self.sha256,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
            "retained": self.retained,
            "sensitivity": self.sensitivity,
            "workspaceId": self.workspace_id,
        });
        if let Some(original) = &self.preview_of {
            descriptor["previewOf"] = json!(original);
        }
        if let Some(width) = self.width {
            descriptor["width"] = json!(width);
        }
        if let Some(height) = self.height {
            descriptor["height"] = json!(height);
        }
        if let Some(name) = &self.file_name {
            descriptor["fileName"] = json!(name);
        }
        descriptor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for kind in ArtifactKind::ALL {
            assert_eq!(ArtifactKind::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(ArtifactKind::parse("upload"), None);
    }
}
