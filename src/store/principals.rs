//! Principal rows: the private integer id behind each `PrincipalKey`, created
//! on first use and dropped once nothing refers to it. Owns only the
//! `principals` table; callers pass an open transaction.

use rusqlite::{Connection, OptionalExtension as _};

use super::error::StoreError;
use super::model::PrincipalKey;

/// Returns the Principal's id, inserting its row if needed.
pub(super) fn ensure_principal(
    transaction: &Connection,
    principal: &PrincipalKey,
) -> Result<i64, StoreError> {
    transaction
        .prepare_cached(
            "INSERT INTO principals (client_id, instance_id) VALUES (?1, ?2)
             ON CONFLICT (client_id, instance_id) DO NOTHING",
        )?
        .execute((&principal.client_id, &principal.instance_id))?;
    let principal_id = transaction
        .prepare_cached(
            "SELECT principal_id FROM principals WHERE client_id = ?1 AND instance_id = ?2",
        )?
        .query_row((&principal.client_id, &principal.instance_id), |row| {
            row.get(0)
        })?;
    Ok(principal_id)
}

/// Returns the Principal's id, or `None` if it never appeared.
pub(super) fn find_principal(
    transaction: &Connection,
    principal: &PrincipalKey,
) -> Result<Option<i64>, StoreError> {
    let principal_id = transaction
        .prepare_cached(
            "SELECT principal_id FROM principals WHERE client_id = ?1 AND instance_id = ?2",
        )?
        .query_row((&principal.client_id, &principal.instance_id), |row| {
            row.get(0)
        })
        .optional()?;
    Ok(principal_id)
}

/// Deletes the Principal's row once no Connection, Workspace, Command or
/// tombstone refers to it, so Principals do not accumulate.
pub(super) fn forget_principal_if_unused(
    transaction: &Connection,
    principal_id: i64,
) -> Result<(), StoreError> {
    transaction
        .prepare_cached(
            "DELETE FROM principals WHERE principal_id = ?1
               AND NOT EXISTS (SELECT 1 FROM connections WHERE principal_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM workspaces WHERE principal_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM commands WHERE principal_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM tombstones WHERE principal_id = ?1)",
        )?
        .execute([principal_id])?;
    Ok(())
}
