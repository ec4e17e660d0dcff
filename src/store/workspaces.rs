//! Workspace rows and their tombstones: create (idempotent by `clientKey`),
//! lookup, release, activity and the idle query. Owns the `workspaces` and
//! `tombstones` tables. Authorization is Principal ownership: another
//! Principal's Workspace is indistinguishable from a missing one.

use rusqlite::{OptionalExtension as _, Transaction};

use super::artifacts::{artifact_columns, artifact_from_row};
use super::db::{Store, column_u64};
use super::error::StoreError;
use super::leases::{lease_columns, lease_from_row};
use super::model::{
    CreateWorkspace, NewWorkspace, PrincipalKey, ReleaseWorkspace, TombstoneRow, WorkspaceLookup,
    WorkspaceRow,
};
use super::principals::{ensure_principal, find_principal, forget_principal_if_unused};

/// Columns read by `workspace_from_row`, in order; needs `workspaces AS w`
/// joined with `principals AS p`.
macro_rules! workspace_columns {
    () => {
        "w.workspace_id, p.client_id, p.instance_id, w.browser_id, w.client_key,
         w.created_at, w.last_active_at, w.latest_sequence"
    };
}

fn workspace_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<WorkspaceRow> {
    Ok(WorkspaceRow {
        id: row.get(0)?,
        principal: PrincipalKey {
            client_id: row.get(1)?,
            instance_id: row.get(2)?,
        },
        browser_id: row.get(3)?,
        client_key: row.get(4)?,
        created_at: row.get(5)?,
        last_active_at: row.get(6)?,
        latest_sequence: column_u64(row, 7)?,
    })
}

fn find_workspace(
    transaction: &Transaction<'_>,
    principal_id: i64,
    workspace_id: &str,
) -> Result<Option<WorkspaceRow>, StoreError> {
    let workspace = transaction
        .prepare_cached(concat!(
            "SELECT ",
            workspace_columns!(),
            " FROM workspaces AS w JOIN principals AS p USING (principal_id)
             WHERE w.workspace_id = ?1 AND w.principal_id = ?2"
        ))?
        .query_row((workspace_id, principal_id), workspace_from_row)
        .optional()?;
    Ok(workspace)
}

/// Whether `workspace_id` is active and owned by `principal_id`.
pub(super) fn owns_workspace(
    transaction: &Transaction<'_>,
    principal_id: i64,
    workspace_id: &str,
) -> Result<bool, StoreError> {
    let found: Option<i64> = transaction
        .prepare_cached("SELECT 1 FROM workspaces WHERE workspace_id = ?1 AND principal_id = ?2")?
        .query_row((workspace_id, principal_id), |row| row.get(0))
        .optional()?;
    Ok(found.is_some())
}

impl Store {
    /// Creates a Workspace, or returns the active one its `client_key`
    /// already names on the same browser (`ClientKeyConflict` on another).
    pub fn create_workspace(
        &self,
        workspace: &NewWorkspace,
    ) -> Result<CreateWorkspace, StoreError> {
        self.write(|transaction| {
            let principal_id = ensure_principal(transaction, &workspace.principal)?;
            if let Some(client_key) = &workspace.client_key {
                let existing = transaction
                    .prepare_cached(concat!(
                        "SELECT ",
                        workspace_columns!(),
                        " FROM workspaces AS w JOIN principals AS p USING (principal_id)
                         WHERE w.principal_id = ?1 AND w.client_key = ?2"
                    ))?
                    .query_row((principal_id, client_key), workspace_from_row)
                    .optional()?;
                match existing {
                    Some(row) if row.browser_id == workspace.browser_id => {
                        return Ok(CreateWorkspace::Existing(row));
                    }
                    Some(_) => return Err(StoreError::ClientKeyConflict),
                    None => {}
                }
            }
            let active: i64 = transaction
                .prepare_cached("SELECT count(*) FROM workspaces WHERE principal_id = ?1")?
                .query_row([principal_id], |row| row.get(0))?;
            let limit = self.limits().max_workspaces_per_principal;
            if active >= i64::from(limit) {
                return Err(StoreError::LimitExceeded {
                    what: "workspaces_per_principal",
                    limit,
                });
            }
            transaction
                .prepare_cached(
                    "INSERT INTO workspaces
                       (workspace_id, principal_id, browser_id, client_key, created_at, last_active_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                )?
                .execute((
                    &workspace.id,
                    principal_id,
                    &workspace.browser_id,
                    &workspace.client_key,
                    workspace.now,
                ))?;
            let created = find_workspace(transaction, principal_id, &workspace.id)?
                .ok_or(StoreError::WorkspaceNotFound)?;
            Ok(CreateWorkspace::Created(created))
        })
    }

    /// Ids of the active Workspaces bound to a browser.
    pub fn workspaces_for_browser(&self, browser_id: &str) -> Result<Vec<String>, StoreError> {
        self.read(|transaction| {
            let ids = transaction
                .prepare_cached("SELECT workspace_id FROM workspaces WHERE browser_id = ?1 ORDER BY workspace_id")?
                .query_map([browser_id], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(ids)
        })
    }

    /// Looks up a Workspace of `principal`: active, released (tombstone) or
    /// not found.
    pub fn get_workspace(
        &self,
        principal: &PrincipalKey,
        id: &str,
    ) -> Result<WorkspaceLookup, StoreError> {
        self.read(|transaction| {
            let Some(principal_id) = find_principal(transaction, principal)? else {
                return Ok(WorkspaceLookup::NotFound);
            };
            if let Some(workspace) = find_workspace(transaction, principal_id, id)? {
                return Ok(WorkspaceLookup::Active(workspace));
            }
            let lookup = match find_tombstone(transaction, principal_id, id)? {
                Some(tombstone) => WorkspaceLookup::Released(tombstone),
                None => WorkspaceLookup::NotFound,
            };
            Ok(lookup)
        })
    }

    /// Releases a Workspace: deletes it with its Leases, events, Commands and
    /// Artifact metadata, and leaves a tombstone (oldest pruned beyond
    /// `max_tombstones`). A repeated release answers `AlreadyReleased` while
    /// the tombstone lasts.
    pub fn release_workspace(
        &self,
        principal: &PrincipalKey,
        id: &str,
        now: i64,
    ) -> Result<ReleaseWorkspace, StoreError> {
        self.write(|transaction| {
            let Some(principal_id) = find_principal(transaction, principal)? else {
                return Ok(ReleaseWorkspace::NotFound);
            };
            if !owns_workspace(transaction, principal_id, id)? {
                let outcome = match find_tombstone(transaction, principal_id, id)? {
                    Some(tombstone) => ReleaseWorkspace::AlreadyReleased {
                        released_at: tombstone.released_at,
                    },
                    None => ReleaseWorkspace::NotFound,
                };
                return Ok(outcome);
            }
            let released_leases = transaction
                .prepare_cached(concat!(
                    "DELETE FROM leases WHERE workspace_id = ?1 RETURNING ",
                    lease_columns!()
                ))?
                .query_map([id], lease_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            let released_artifacts = transaction
                .prepare_cached(concat!(
                    "DELETE FROM artifacts WHERE workspace_id = ?1 RETURNING ",
                    artifact_columns!()
                ))?
                .query_map([id], artifact_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            // Events and Commands go by ON DELETE CASCADE.
            transaction
                .prepare_cached("DELETE FROM workspaces WHERE workspace_id = ?1")?
                .execute([id])?;
            transaction
                .prepare_cached(
                    "INSERT OR REPLACE INTO tombstones (workspace_id, principal_id, released_at)
                     VALUES (?1, ?2, ?3)",
                )?
                .execute((id, principal_id, now))?;
            let pruned = transaction
                .prepare_cached(
                    "DELETE FROM tombstones WHERE rowid <=
                       (SELECT rowid FROM tombstones ORDER BY rowid DESC LIMIT 1 OFFSET ?1)",
                )?
                .execute([self.limits().max_tombstones])?;
            if pruned > 0 {
                forget_pruned_principals(transaction)?;
            }
            Ok(ReleaseWorkspace::Released {
                released_leases,
                released_artifacts,
            })
        })
    }

    /// Sets `last_active_at` of an active Workspace.
    pub fn touch_workspace(&self, id: &str, now: i64) -> Result<(), StoreError> {
        self.write(|transaction| {
            let changed = transaction
                .prepare_cached(
                    "UPDATE workspaces SET last_active_at = ?2 WHERE workspace_id = ?1",
                )?
                .execute((id, now))?;
            match changed {
                0 => Err(StoreError::WorkspaceNotFound),
                _ => Ok(()),
            }
        })
    }

    /// Active Workspaces idle since before `idle_before` that no Lease holds
    /// and whose Principal has no live Connection: candidates for the sweep.
    pub fn inactive_workspaces(&self, idle_before: i64) -> Result<Vec<WorkspaceRow>, StoreError> {
        self.read(|transaction| {
            let rows = transaction
                .prepare_cached(concat!(
                    "SELECT ",
                    workspace_columns!(),
                    " FROM workspaces AS w JOIN principals AS p USING (principal_id)
                     WHERE w.last_active_at < ?1
                       AND NOT EXISTS (SELECT 1 FROM leases AS l WHERE l.workspace_id = w.workspace_id)
                       AND NOT EXISTS (SELECT 1 FROM connections AS c WHERE c.principal_id = w.principal_id AND c.lost_at IS NULL)
                     ORDER BY w.last_active_at"
                ))?
                .query_map([idle_before], workspace_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}

fn find_tombstone(
    transaction: &Transaction<'_>,
    principal_id: i64,
    workspace_id: &str,
) -> Result<Option<TombstoneRow>, StoreError> {
    let tombstone = transaction
        .prepare_cached(
            "SELECT workspace_id, released_at FROM tombstones
             WHERE workspace_id = ?1 AND principal_id = ?2",
        )?
        .query_row((workspace_id, principal_id), |row| {
            Ok(TombstoneRow {
                workspace_id: row.get(0)?,
                released_at: row.get(1)?,
            })
        })
        .optional()?;
    Ok(tombstone)
}

/// After tombstones were pruned, drops Principals nothing refers to any more.
fn forget_pruned_principals(transaction: &Transaction<'_>) -> Result<(), StoreError> {
    let candidates = transaction
        .prepare_cached(
            "SELECT principal_id FROM principals AS p
             WHERE NOT EXISTS (SELECT 1 FROM connections AS c WHERE c.principal_id = p.principal_id)
               AND NOT EXISTS (SELECT 1 FROM workspaces AS w WHERE w.principal_id = p.principal_id)",
        )?
        .query_map([], |row| row.get::<_, i64>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    for principal_id in candidates {
        forget_principal_if_unused(transaction, principal_id)?;
    }
    Ok(())
}
