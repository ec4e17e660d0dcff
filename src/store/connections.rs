//! Connection rows: open, close (releasing every Lease the Connection owns)
//! and count. Owns the `connections` table; Lease rows are read through
//! `leases.rs`'s row mapper. Knows nothing of sockets or the wire.

use rusqlite::OptionalExtension as _;

use super::db::Store;
use super::error::StoreError;
use super::leases::{lease_columns, lease_from_row};
use super::model::{ConnectionKind, LeaseRow, NewConnection};
use super::principals::{ensure_principal, forget_principal_if_unused};

impl Store {
    /// Records a live Connection (and its Principal on first sight).
    pub fn open_connection(&self, connection: &NewConnection) -> Result<(), StoreError> {
        self.write(|transaction| {
            let principal_id = ensure_principal(transaction, &connection.principal)?;
            transaction
                .prepare_cached(
                    "INSERT INTO connections (connection_id, principal_id, kind, protocol_minor, opened_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute((
                    &connection.id,
                    principal_id,
                    connection.kind.as_str(),
                    connection.protocol_minor,
                    connection.opened_at,
                ))?;
            Ok(())
        })
    }

    /// Deletes the Connection and every Lease it owns in one transaction and
    /// returns those Leases. Closing an unknown id returns an empty `Vec`.
    /// `_now` is not stored today; it keeps the signature uniform with the
    /// other lifecycle calls.
    pub fn close_connection(&self, id: &str, _now: i64) -> Result<Vec<LeaseRow>, StoreError> {
        self.write(|transaction| {
            let principal_id: Option<i64> = transaction
                .prepare_cached("SELECT principal_id FROM connections WHERE connection_id = ?1")?
                .query_row([id], |row| row.get(0))
                .optional()?;
            let Some(principal_id) = principal_id else {
                return Ok(Vec::new());
            };
            let released = transaction
                .prepare_cached(concat!(
                    "DELETE FROM leases WHERE connection_id = ?1 RETURNING ",
                    lease_columns!()
                ))?
                .query_map([id], lease_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            transaction
                .prepare_cached("DELETE FROM connections WHERE connection_id = ?1")?
                .execute([id])?;
            forget_principal_if_unused(transaction, principal_id)?;
            Ok(released)
        })
    }

    /// Marks a Connection whose peer vanished without closing (a killed bridge). Its Leases stay
    /// and expire by TTL, as the contract says for killed bridges; it no longer counts as live.
    pub fn mark_connection_lost(&self, id: &str, now: i64) -> Result<(), StoreError> {
        self.write(|transaction| {
            transaction
                .prepare_cached("UPDATE connections SET lost_at = ?2 WHERE connection_id = ?1 AND lost_at IS NULL")?
                .execute(rusqlite::params![id, now])?;
            Ok(())
        })
    }

    /// Deletes lost Connections that no longer own a Lease; returns how many.
    pub fn reclaim_lost_connections(&self) -> Result<u64, StoreError> {
        self.write(|transaction| {
            let lost: Vec<(String, i64)> = transaction
                .prepare_cached(
                    "SELECT c.connection_id, c.principal_id FROM connections AS c
                     WHERE c.lost_at IS NOT NULL
                       AND NOT EXISTS (SELECT 1 FROM leases AS l WHERE l.connection_id = c.connection_id)",
                )?
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            for (id, principal_id) in &lost {
                transaction.prepare_cached("DELETE FROM connections WHERE connection_id = ?1")?.execute([id])?;
                forget_principal_if_unused(transaction, *principal_id)?;
            }
            Ok(lost.len() as u64)
        })
    }

    /// Number of live Connections of any kind except `except` (the caller's own, if any): what
    /// a shutdown request must wait for, whatever role each peer claimed in its handshake.
    pub fn count_other_connections(&self, except: Option<&str>) -> Result<u64, StoreError> {
        self.read(|transaction| {
            let count: i64 = transaction
                .prepare_cached(
                    "SELECT count(*) FROM connections \
                     WHERE lost_at IS NULL AND connection_id IS NOT ?1",
                )?
                .query_row([except], |row| row.get(0))?;
            Ok(count.unsigned_abs())
        })
    }

    /// Number of live Connections of one kind.
    pub fn count_connections(&self, kind: ConnectionKind) -> Result<u64, StoreError> {
        self.read(|transaction| {
            let count: i64 = transaction
                .prepare_cached(
                    "SELECT count(*) FROM connections WHERE kind = ?1 AND lost_at IS NULL",
                )?
                .query_row([kind.as_str()], |row| row.get(0))?;
            Ok(count.unsigned_abs())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{connect, outcome, principal, store, workspace};
    use super::super::{ConnectionKind, NewLease};

    #[test]
    fn other_connections_count_every_kind_but_the_caller() {
        let store = store();
        connect(&store, "connection:1", &principal("a"));
        connect(&store, "connection:2", &principal("b"));
        assert_eq!(store.count_other_connections(None).unwrap(), 2);
        assert_eq!(
            store.count_other_connections(Some("connection:1")).unwrap(),
            1
        );
        assert_eq!(
            store
                .count_other_connections(Some("connection:none"))
                .unwrap(),
            2
        );
    }

    #[test]
    fn lost_connections_keep_leases_until_expiry_then_go() {
        let store = store();
        let a = principal("a");
        workspace(&store, "workspace:1", &a);
        connect(&store, "connection:1", &a);
        let lease = |id: &str| NewLease {
            id: id.to_owned(),
            workspace_id: "workspace:1".to_owned(),
            connection_id: "connection:1".to_owned(),
            principal: a.clone(),
            ttl_ms: 1_000,
            client_key: None,
            now: 10,
        };
        store.create_lease(&lease("lease:1")).unwrap();
        assert_eq!(
            store.count_connections(ConnectionKind::Embedded).unwrap(),
            1
        );

        store.mark_connection_lost("connection:1", 20).unwrap();
        assert_eq!(
            store.count_connections(ConnectionKind::Embedded).unwrap(),
            0
        );
        // No new Lease on a lost Connection; the old one still checks out.
        let refused = store.create_lease(&lease("lease:2"));
        assert_eq!(
            outcome(refused, |row| row.id.to_string()),
            "ConnectionNotFound"
        );
        let kept = store.check_lease(
            &"connection:1".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            500,
        );
        assert_eq!(outcome(kept, |row| row.id.to_string()), "lease:1");
        // Not reclaimed while it owns a Lease, and the leased Workspace is not idle.
        assert_eq!(store.reclaim_lost_connections().unwrap(), 0);
        let idle: Vec<String> = store
            .inactive_workspaces(100)
            .unwrap()
            .into_iter()
            .map(|row| row.id)
            .collect();
        assert_eq!(idle, Vec::<String>::new());

        store.expire_leases(1_010).unwrap();
        assert_eq!(store.reclaim_lost_connections().unwrap(), 1);
        assert_eq!(store.reclaim_lost_connections().unwrap(), 0);
        assert_eq!(store.close_connection("connection:1", 1_020).unwrap(), []);
        let idle: Vec<String> = store
            .inactive_workspaces(100)
            .unwrap()
            .into_iter()
            .map(|row| row.id)
            .collect();
        assert_eq!(idle, ["workspace:1"]);
    }
}
