//! Artifact metadata rows: insert, lookup within a Workspace, delete, the
//! expiry query and retention. Owns the `artifacts` table only; the bytes,
//! their paths and hashing belong to `artifacts/`, which deletes the bytes
//! after reading what expired.

use rusqlite::OptionalExtension as _;

use super::db::{Store, column_u64, to_sql_u64};
use super::error::StoreError;
use super::model::ArtifactRow;

/// Columns read by `artifact_from_row`, in order.
macro_rules! artifact_columns {
    () => {
        "artifact_id, workspace_id, kind, mime_type, byte_len, sha256, created_at,
         expires_at, retained, sensitivity, file_name"
    };
}
pub(super) use artifact_columns;

/// Maps a row selected with `artifact_columns!()`.
pub(super) fn artifact_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ArtifactRow> {
    Ok(ArtifactRow {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        kind: row.get(2)?,
        mime_type: row.get(3)?,
        byte_len: column_u64(row, 4)?,
        sha256: row.get(5)?,
        created_at: row.get(6)?,
        expires_at: row.get(7)?,
        retained: row.get(8)?,
        sensitivity: row.get(9)?,
        file_name: row.get(10)?,
    })
}

impl Store {
    /// Records an Artifact's metadata. `WorkspaceNotFound` if its Workspace
    /// is not active.
    pub fn insert_artifact(&self, artifact: &ArtifactRow) -> Result<(), StoreError> {
        let byte_len = to_sql_u64(artifact.byte_len, "artifact byte length")?;
        self.write(|transaction| {
            let active: Option<i64> = transaction
                .prepare_cached("SELECT 1 FROM workspaces WHERE workspace_id = ?1")?
                .query_row([&artifact.workspace_id], |row| row.get(0))
                .optional()?;
            if active.is_none() {
                return Err(StoreError::WorkspaceNotFound);
            }
            transaction
                .prepare_cached(
                    "INSERT INTO artifacts (artifact_id, workspace_id, kind, mime_type, byte_len,
                                            sha256, created_at, expires_at, retained,
                                            sensitivity, file_name)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )?
                .execute((
                    &artifact.id,
                    &artifact.workspace_id,
                    &artifact.kind,
                    &artifact.mime_type,
                    byte_len,
                    &artifact.sha256,
                    artifact.created_at,
                    artifact.expires_at,
                    artifact.retained,
                    &artifact.sensitivity,
                    &artifact.file_name,
                ))?;
            Ok(())
        })
    }

    /// The Artifact if it belongs to `workspace_id`.
    pub fn get_artifact(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> Result<Option<ArtifactRow>, StoreError> {
        self.read(|transaction| {
            let artifact = transaction
                .prepare_cached(concat!(
                    "SELECT ",
                    artifact_columns!(),
                    " FROM artifacts WHERE artifact_id = ?1 AND workspace_id = ?2"
                ))?
                .query_row([id, workspace_id], artifact_from_row)
                .optional()?;
            Ok(artifact)
        })
    }

    /// Deletes an Artifact's metadata and returns it (`None` if unknown).
    pub fn delete_artifact(&self, id: &str) -> Result<Option<ArtifactRow>, StoreError> {
        self.write(|transaction| {
            let artifact = transaction
                .prepare_cached(concat!(
                    "DELETE FROM artifacts WHERE artifact_id = ?1 RETURNING ",
                    artifact_columns!()
                ))?
                .query_row([id], artifact_from_row)
                .optional()?;
            Ok(artifact)
        })
    }

    /// Artifacts with `expires_at <= now`, oldest expiry first. Rows stay
    /// until `delete_artifact`, so bytes are removed before their metadata.
    pub fn expired_artifacts(&self, now: i64) -> Result<Vec<ArtifactRow>, StoreError> {
        self.read(|transaction| {
            let expired = transaction
                .prepare_cached(concat!(
                    "SELECT ",
                    artifact_columns!(),
                    " FROM artifacts WHERE expires_at <= ?1 ORDER BY expires_at"
                ))?
                .query_map([now], artifact_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(expired)
        })
    }

    /// Marks an Artifact retained with a new expiry and returns it (`None`
    /// if unknown).
    pub fn set_retained(
        &self,
        id: &str,
        expires_at: i64,
    ) -> Result<Option<ArtifactRow>, StoreError> {
        self.write(|transaction| {
            let artifact = transaction
                .prepare_cached(concat!(
                    "UPDATE artifacts SET retained = 1, expires_at = ?2
                     WHERE artifact_id = ?1 RETURNING ",
                    artifact_columns!()
                ))?
                .query_row((id, expires_at), artifact_from_row)
                .optional()?;
            Ok(artifact)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{principal, store, workspace};
    use super::super::{ArtifactRow, StoreError};

    fn artifact(id: &str, workspace_id: &str, expires_at: i64) -> ArtifactRow {
        ArtifactRow {
            id: id.to_owned(),
            workspace_id: workspace_id.to_owned(),
            kind: "pdf".to_owned(),
            mime_type: "application/pdf".to_owned(),
            byte_len: 1_234,
            sha256: "ab".repeat(32),
            created_at: 10,
            expires_at,
            retained: false,
            sensitivity: "browser_data".to_owned(),
            file_name: Some("report.pdf".to_owned()),
        }
    }

    #[test]
    fn metadata_lifecycle() {
        let store = store();
        workspace(&store, "workspace:1", &principal("a"));
        workspace(&store, "workspace:2", &principal("a"));
        store
            .insert_artifact(&artifact("artifact:1", "workspace:1", 100))
            .unwrap();
        store
            .insert_artifact(&artifact("artifact:2", "workspace:1", 200))
            .unwrap();
        assert!(matches!(
            store.insert_artifact(&artifact("artifact:3", "workspace:none", 100)),
            Err(StoreError::WorkspaceNotFound)
        ));

        assert_eq!(
            store.get_artifact("workspace:1", "artifact:1").unwrap(),
            Some(artifact("artifact:1", "workspace:1", 100))
        );
        assert_eq!(
            store.get_artifact("workspace:2", "artifact:1").unwrap(),
            None
        );

        let expired = |now| -> Vec<String> {
            let rows = store.expired_artifacts(now).unwrap();
            rows.into_iter().map(|row| row.id).collect()
        };
        assert_eq!(expired(99), Vec::<String>::new());
        assert_eq!(expired(200), ["artifact:1", "artifact:2"]);

        let retained = store.set_retained("artifact:1", 5_000).unwrap().unwrap();
        assert!(retained.retained);
        assert_eq!(retained.expires_at, 5_000);
        assert_eq!(expired(200), ["artifact:2"]);
        assert_eq!(store.set_retained("artifact:none", 5_000).unwrap(), None);

        let deleted = store
            .delete_artifact("artifact:2")
            .unwrap()
            .map(|row| row.id);
        assert_eq!(deleted.as_deref(), Some("artifact:2"));
        assert_eq!(store.delete_artifact("artifact:2").unwrap(), None);
        assert_eq!(expired(200), Vec::<String>::new());
    }
}
