//! Lease rows: create (idempotent by `clientKey`), heartbeat, release, check
//! and the expiry sweep. Owns the `leases` table and its row mapper; it does
//! not decide TTL ranges (the broker clamps) or what expiry means for tabs.

use rusqlite::{OptionalExtension as _, Transaction};

use super::db::Store;
use super::error::StoreError;
use super::model::{LeaseRow, NewLease};

/// Columns read by `lease_from_row`, in order.
macro_rules! lease_columns {
    () => {
        "lease_id, workspace_id, connection_id, client_key, ttl_ms, expires_at, created_at"
    };
}
pub(super) use lease_columns;

/// Maps a row selected with `lease_columns!()`.
pub(super) fn lease_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseRow> {
    Ok(LeaseRow {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        connection_id: row.get(2)?,
        client_key: row.get(3)?,
        ttl_ms: row.get(4)?,
        expires_at: row.get(5)?,
        created_at: row.get(6)?,
    })
}

impl Store {
    /// Creates a Lease on an active Workspace owned by `lease.principal`.
    ///
    /// With a `client_key` already used by this Connection on this Workspace,
    /// renews that Lease instead (same id, `expires_at = now + ttl_ms`, new
    /// `ttl_ms`), even if it expired but was not yet swept: nobody has been
    /// told of its expiry, so renewing it is indistinguishable from a timely
    /// heartbeat.
    pub fn create_lease(&self, lease: &NewLease) -> Result<LeaseRow, StoreError> {
        self.write(|transaction| {
            let owned: Option<i64> = transaction
                .prepare_cached(
                    "SELECT 1 FROM workspaces AS w JOIN principals AS p USING (principal_id)
                     WHERE w.workspace_id = ?1 AND p.client_id = ?2 AND p.instance_id = ?3",
                )?
                .query_row(
                    (
                        &lease.workspace_id,
                        &lease.principal.client_id,
                        &lease.principal.instance_id,
                    ),
                    |row| row.get(0),
                )
                .optional()?;
            if owned.is_none() {
                return Err(StoreError::WorkspaceNotFound);
            }
            let live: Option<i64> = transaction
                .prepare_cached("SELECT 1 FROM connections WHERE connection_id = ?1 AND lost_at IS NULL")?
                .query_row([&lease.connection_id], |row| row.get(0))
                .optional()?;
            if live.is_none() {
                return Err(StoreError::ConnectionNotFound);
            }
            let expires_at = lease.now.saturating_add(lease.ttl_ms);
            if let Some(client_key) = &lease.client_key {
                let renewed = transaction
                    .prepare_cached(concat!(
                        "UPDATE leases SET expires_at = ?4, ttl_ms = ?5
                         WHERE connection_id = ?1 AND workspace_id = ?2 AND client_key = ?3
                         RETURNING ",
                        lease_columns!()
                    ))?
                    .query_row(
                        (
                            &lease.connection_id,
                            &lease.workspace_id,
                            client_key,
                            expires_at,
                            lease.ttl_ms,
                        ),
                        lease_from_row,
                    )
                    .optional()?;
                if let Some(renewed) = renewed {
                    return Ok(renewed);
                }
            }
            let held: i64 = transaction
                .prepare_cached("SELECT count(*) FROM leases WHERE connection_id = ?1")?
                .query_row([&lease.connection_id], |row| row.get(0))?;
            let limit = self.limits().max_leases_per_connection;
            if held >= i64::from(limit) {
                return Err(StoreError::LimitExceeded {
                    what: "leases_per_connection",
                    limit,
                });
            }
            let created = transaction
                .prepare_cached(concat!(
                    "INSERT INTO leases
                       (lease_id, workspace_id, connection_id, client_key, ttl_ms, expires_at, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     RETURNING ",
                    lease_columns!()
                ))?
                .query_row(
                    (
                        &lease.id,
                        &lease.workspace_id,
                        &lease.connection_id,
                        &lease.client_key,
                        lease.ttl_ms,
                        expires_at,
                        lease.now,
                    ),
                    lease_from_row,
                )?;
            Ok(created)
        })
    }

    /// Extends the Lease to `now + ttl_ms`. An expired Lease is deleted and
    /// answered with `LeaseExpired`.
    pub fn heartbeat_lease(
        &self,
        connection_id: &str,
        workspace_id: &str,
        lease_id: &str,
        now: i64,
    ) -> Result<LeaseRow, StoreError> {
        self.write_then(|transaction| {
            let lease = match owned_lease(transaction, connection_id, workspace_id, lease_id, now)?
            {
                Ok(lease) => lease,
                Err(fault) => return Ok(Err(fault)),
            };
            let renewed = transaction
                .prepare_cached(concat!(
                    "UPDATE leases SET expires_at = ?2 WHERE lease_id = ?1 RETURNING ",
                    lease_columns!()
                ))?
                .query_row(
                    (&lease.id, now.saturating_add(lease.ttl_ms)),
                    lease_from_row,
                )?;
            Ok(Ok(renewed))
        })
    }

    /// Deletes the Lease and returns it. An expired Lease is deleted too but
    /// answered with `LeaseExpired`.
    pub fn release_lease(
        &self,
        connection_id: &str,
        workspace_id: &str,
        lease_id: &str,
        now: i64,
    ) -> Result<LeaseRow, StoreError> {
        self.write_then(|transaction| {
            let lease = match owned_lease(transaction, connection_id, workspace_id, lease_id, now)?
            {
                Ok(lease) => lease,
                Err(fault) => return Ok(Err(fault)),
            };
            transaction
                .prepare_cached("DELETE FROM leases WHERE lease_id = ?1")?
                .execute([&lease.id])?;
            Ok(Ok(lease))
        })
    }

    /// Whether a Lease with this id exists in this Workspace and has not expired.
    pub fn lease_alive(&self, workspace_id: &str, lease_id: &str, now: i64) -> Result<bool, StoreError> {
        self.read(|transaction| Ok(find_lease(transaction, workspace_id, lease_id)?.is_some_and(|lease| lease.expires_at > now)))
    }

    /// Answers whether the Connection holds this live Lease, changing
    /// nothing (an expired Lease is left for the sweep).
    pub fn check_lease(
        &self,
        connection_id: &str,
        workspace_id: &str,
        lease_id: &str,
        now: i64,
    ) -> Result<LeaseRow, StoreError> {
        self.read(|transaction| {
            let lease = find_lease(transaction, workspace_id, lease_id)?
                .ok_or(StoreError::LeaseNotFound)?;
            if lease.connection_id != connection_id {
                return Err(StoreError::LeaseNotOwned);
            }
            if lease.expires_at <= now {
                return Err(StoreError::LeaseExpired);
            }
            Ok(lease)
        })
    }

    /// Deletes and returns every Lease with `expires_at <= now`.
    pub fn expire_leases(&self, now: i64) -> Result<Vec<LeaseRow>, StoreError> {
        self.write(|transaction| {
            let expired = transaction
                .prepare_cached(concat!(
                    "DELETE FROM leases WHERE expires_at <= ?1 RETURNING ",
                    lease_columns!()
                ))?
                .query_map([now], lease_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(expired)
        })
    }
}

fn find_lease(
    transaction: &Transaction<'_>,
    workspace_id: &str,
    lease_id: &str,
) -> Result<Option<LeaseRow>, StoreError> {
    let lease = transaction
        .prepare_cached(concat!(
            "SELECT ",
            lease_columns!(),
            " FROM leases WHERE lease_id = ?1 AND workspace_id = ?2"
        ))?
        .query_row([lease_id, workspace_id], lease_from_row)
        .optional()?;
    Ok(lease)
}

/// The Lease if this Connection owns it and it is live. The outer error is
/// infrastructure; the inner one the domain answer, after deleting the
/// Lease if it expired (the caller commits that deletion).
fn owned_lease(
    transaction: &Transaction<'_>,
    connection_id: &str,
    workspace_id: &str,
    lease_id: &str,
    now: i64,
) -> Result<Result<LeaseRow, StoreError>, StoreError> {
    let Some(lease) = find_lease(transaction, workspace_id, lease_id)? else {
        return Ok(Err(StoreError::LeaseNotFound));
    };
    if lease.connection_id != connection_id {
        return Ok(Err(StoreError::LeaseNotOwned));
    }
    if lease.expires_at <= now {
        transaction
            .prepare_cached("DELETE FROM leases WHERE lease_id = ?1")?
            .execute([&lease.id])?;
        return Ok(Err(StoreError::LeaseExpired));
    }
    Ok(Ok(lease))
}
