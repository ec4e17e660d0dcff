//! Lease rows: create (idempotent by `clientKey`), heartbeat, release, check
//! and the expiry sweep. Owns the `leases` table and its row mapper; it does
//! not decide TTL ranges (the broker clamps) or what expiry means for tabs.

use rusqlite::{Connection, OptionalExtension as _};

use super::db::Store;
use super::error::StoreError;
use super::ids::{ConnectionId, LeaseId, WorkspaceId};
use super::model::{LeaseRow, NewLease};
use super::workspaces::mark_active;

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
    /// Creates a Lease on an active Workspace owned by `lease.principal`,
    /// for a live Connection of that same Principal (`ConnectionNotFound`
    /// otherwise).
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
                .prepare_cached(
                    "SELECT 1 FROM connections AS c JOIN principals AS p USING (principal_id)
                     WHERE c.connection_id = ?1 AND c.lost_at IS NULL
                       AND p.client_id = ?2 AND p.instance_id = ?3",
                )?
                .query_row(
                    (
                        &lease.connection_id,
                        &lease.principal.client_id,
                        &lease.principal.instance_id,
                    ),
                    |row| row.get(0),
                )
                .optional()?;
            if live.is_none() {
                return Err(StoreError::ConnectionNotFound);
            }
            mark_active(transaction, &lease.workspace_id, lease.now)?;
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

    /// Extends the Lease to `now + ttl_ms`. Whether it had expired is judged at `sent_at`, when
    /// the heartbeat reached the host's bridge (at most `now`), so a heartbeat sent on time
    /// keeps its Lease even when the Broker was stalled. An expired Lease is deleted and
    /// answered with `LeaseEnded`.
    pub fn heartbeat_lease(
        &self,
        connection_id: &ConnectionId,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        sent_at: i64,
        now: i64,
    ) -> Result<LeaseRow, StoreError> {
        let sent_at = sent_at.min(now);
        self.write_then(|transaction| {
            let lease =
                match owned_lease(transaction, connection_id, workspace_id, lease_id, sent_at)? {
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
            mark_active(transaction, workspace_id.as_str(), now)?;
            Ok(Ok(renewed))
        })
    }

    /// Deletes the Lease and returns it. An expired Lease (judged at `sent_at`, as for
    /// heartbeats) is deleted too but answered with `LeaseEnded`.
    pub fn release_lease(
        &self,
        connection_id: &ConnectionId,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        sent_at: i64,
        now: i64,
    ) -> Result<LeaseRow, StoreError> {
        let sent_at = sent_at.min(now);
        self.write_then(|transaction| {
            let lease =
                match owned_lease(transaction, connection_id, workspace_id, lease_id, sent_at)? {
                    Ok(lease) => lease,
                    Err(fault) => return Ok(Err(fault)),
                };
            transaction
                .prepare_cached("DELETE FROM leases WHERE lease_id = ?1")?
                .execute([&lease.id])?;
            // The idle clock starts when the last Lease goes, not when it was taken.
            mark_active(transaction, workspace_id.as_str(), now)?;
            Ok(Ok(lease))
        })
    }

    /// Whether a Lease with this id exists in this Workspace and has not expired.
    pub fn lease_alive(
        &self,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        now: i64,
    ) -> Result<bool, StoreError> {
        self.read(|transaction| {
            Ok(find_lease(transaction, workspace_id, lease_id)?
                .is_some_and(|lease| lease.expires_at > now))
        })
    }

    /// Answers whether the Connection holds this live Lease, changing
    /// nothing (an expired Lease is left for the sweep).
    pub fn check_lease(
        &self,
        connection_id: &ConnectionId,
        workspace_id: &WorkspaceId,
        lease_id: &LeaseId,
        now: i64,
    ) -> Result<LeaseRow, StoreError> {
        self.read(|transaction| {
            let lease = find_lease(transaction, workspace_id, lease_id)?
                .ok_or(StoreError::LeaseNotFound)?;
            if lease.connection_id != connection_id.as_str() {
                return match same_principal(transaction, connection_id, &lease.connection_id)? {
                    true => Err(StoreError::LeaseNotOwned),
                    false => Err(StoreError::LeaseNotFound),
                };
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
    transaction: &Connection,
    workspace_id: &WorkspaceId,
    lease_id: &LeaseId,
) -> Result<Option<LeaseRow>, StoreError> {
    let lease = transaction
        .prepare_cached(concat!(
            "SELECT ",
            lease_columns!(),
            " FROM leases WHERE lease_id = ?1 AND workspace_id = ?2"
        ))?
        .query_row((lease_id, workspace_id), lease_from_row)
        .optional()?;
    Ok(lease)
}

/// The Lease if this Connection owns it and it is live. The outer error is
/// infrastructure; the inner one the domain answer, after deleting the
/// Lease if it expired (the caller commits that deletion).
fn owned_lease(
    transaction: &Connection,
    connection_id: &ConnectionId,
    workspace_id: &WorkspaceId,
    lease_id: &LeaseId,
    now: i64,
) -> Result<Result<LeaseRow, StoreError>, StoreError> {
    let Some(lease) = find_lease(transaction, workspace_id, lease_id)? else {
        return Ok(Err(StoreError::LeaseNotFound));
    };
    if lease.connection_id != connection_id.as_str() {
        // Another Principal's Lease is answered exactly like an unknown one; only the same
        // Principal learns that another of its Connections holds it.
        return match same_principal(transaction, connection_id, &lease.connection_id)? {
            true => Ok(Err(StoreError::LeaseNotOwned)),
            false => Ok(Err(StoreError::LeaseNotFound)),
        };
    }
    if lease.expires_at <= now {
        transaction
            .prepare_cached("DELETE FROM leases WHERE lease_id = ?1")?
            .execute([&lease.id])?;
        return Ok(Err(StoreError::LeaseEnded(Box::new(lease))));
    }
    Ok(Ok(lease))
}

/// Whether two Connections belong to one Principal.
fn same_principal(
    transaction: &Connection,
    one: &ConnectionId,
    other: &str,
) -> Result<bool, StoreError> {
    let same = transaction
        .prepare_cached(
            "SELECT a.principal_id = b.principal_id FROM connections a, connections b \
             WHERE a.connection_id = ?1 AND b.connection_id = ?2",
        )?
        .query_row((one, other), |row| row.get::<_, bool>(0))
        .optional()?;
    Ok(same.unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{connect, outcome, principal, store_with, workspace};
    use super::super::{
        ConnectionKind, LeaseRow, NewConnection, NewLease, Store, StoreError, StoreLimits,
    };

    fn new_lease(id: &str, connection_id: &str, client_key: Option<&str>, now: i64) -> NewLease {
        NewLease {
            id: id.to_owned(),
            workspace_id: "workspace:1".to_owned(),
            connection_id: connection_id.to_owned(),
            principal: principal("a"),
            ttl_ms: 1_000,
            client_key: client_key.map(str::to_owned),
            now,
        }
    }

    fn render(lease: LeaseRow) -> String {
        format!("{} expires {}", lease.id, lease.expires_at)
    }

    /// Like `outcome`, naming an ended Lease instead of dumping its row.
    fn ended(result: Result<LeaseRow, StoreError>) -> String {
        match result {
            Err(StoreError::LeaseEnded(lease)) => format!("LeaseEnded {}", lease.id),
            other => outcome(other, render),
        }
    }

    /// A Store with Principal a, its workspace:1 and connections 1 and 2.
    fn fixture(limits: StoreLimits) -> Store {
        let store = store_with(limits);
        workspace(&store, "workspace:1", &principal("a"));
        connect(&store, "connection:1", &principal("a"));
        connect(&store, "connection:2", &principal("a"));
        store
    }

    #[test]
    fn client_key_renews_the_same_lease() {
        let store = fixture(StoreLimits::default());
        let first = store.create_lease(&new_lease("lease:1", "connection:1", Some("k"), 10));
        assert_eq!(outcome(first, render), "lease:1 expires 1010");
        let mut again = new_lease("lease:2", "connection:1", Some("k"), 500);
        again.ttl_ms = 2_000;
        let renewed = store.create_lease(&again).unwrap();
        assert_eq!(
            (
                renewed.id.as_str(),
                renewed.ttl_ms,
                renewed.expires_at,
                renewed.created_at
            ),
            ("lease:1", 2_000, 2_500, 10)
        );
        // The key is scoped to the Connection.
        let other = store.create_lease(&new_lease("lease:3", "connection:2", Some("k"), 500));
        assert_eq!(outcome(other, render), "lease:3 expires 1500");
        // Without a key every call creates a Lease.
        let plain = store.create_lease(&new_lease("lease:4", "connection:1", None, 500));
        assert_eq!(outcome(plain, render), "lease:4 expires 1500");
    }

    #[test]
    fn leases_per_connection_are_bounded() {
        let store = fixture(StoreLimits {
            max_leases_per_connection: 2,
            ..StoreLimits::default()
        });
        store
            .create_lease(&new_lease("lease:1", "connection:1", Some("k"), 10))
            .unwrap();
        store
            .create_lease(&new_lease("lease:2", "connection:1", None, 10))
            .unwrap();
        let third = store.create_lease(&new_lease("lease:3", "connection:1", None, 10));
        assert_eq!(
            outcome(third, render),
            "LimitExceeded { what: \"leases_per_connection\", limit: 2 }"
        );
        // Renewing by key is not a new Lease; another Connection has room.
        let renewed = store.create_lease(&new_lease("lease:4", "connection:1", Some("k"), 20));
        assert_eq!(outcome(renewed, render), "lease:1 expires 1020");
        let other = store.create_lease(&new_lease("lease:5", "connection:2", None, 20));
        assert_eq!(outcome(other, render), "lease:5 expires 1020");
    }

    #[test]
    fn create_needs_a_live_connection_of_the_owner() {
        let store = fixture(StoreLimits::default());
        connect(&store, "connection:b", &principal("b"));
        let cases = [
            (
                new_lease("lease:1", "connection:none", None, 10),
                "ConnectionNotFound",
            ),
            (
                new_lease("lease:2", "connection:b", None, 10),
                "ConnectionNotFound",
            ),
            (
                NewLease {
                    workspace_id: "workspace:none".to_owned(),
                    ..new_lease("lease:3", "connection:1", None, 10)
                },
                "WorkspaceNotFound",
            ),
        ];
        for (lease, expect) in cases {
            assert_eq!(
                outcome(store.create_lease(&lease), render),
                expect,
                "{lease:?}"
            );
        }
    }

    #[test]
    fn ownership_and_expiry_errors() {
        let store = fixture(StoreLimits::default());
        workspace(&store, "workspace:2", &principal("a"));
        store
            .create_lease(&new_lease("lease:1", "connection:1", None, 10))
            .unwrap();
        // (connection, workspace, lease, now) -> check, heartbeat
        let cases = [
            (
                ("connection:1", "workspace:1", "lease:1", 500),
                "lease:1 expires 1010",
                "lease:1 expires 1500",
            ),
            (
                ("connection:2", "workspace:1", "lease:1", 600),
                "LeaseNotOwned",
                "LeaseNotOwned",
            ),
            (
                ("connection:1", "workspace:2", "lease:1", 600),
                "LeaseNotFound",
                "LeaseNotFound",
            ),
            (
                ("connection:1", "workspace:1", "lease:none", 600),
                "LeaseNotFound",
                "LeaseNotFound",
            ),
            (
                ("connection:1", "workspace:1", "lease:1", 1_499),
                "lease:1 expires 1500",
                "lease:1 expires 2499",
            ),
            // Expired: check reports it and leaves the row, heartbeat deletes it.
            (
                ("connection:1", "workspace:1", "lease:1", 2_499),
                "LeaseExpired",
                "LeaseEnded lease:1",
            ),
            (
                ("connection:1", "workspace:1", "lease:1", 2_499),
                "LeaseNotFound",
                "LeaseNotFound",
            ),
        ];
        for ((connection_id, workspace_id, lease_id, now), check, heartbeat) in cases {
            let checked = store.check_lease(
                &connection_id.into(),
                &workspace_id.into(),
                &lease_id.into(),
                now,
            );
            assert_eq!(outcome(checked, render), check, "check {lease_id} at {now}");
            let beat = store.heartbeat_lease(
                &connection_id.into(),
                &workspace_id.into(),
                &lease_id.into(),
                now,
                now,
            );
            assert_eq!(ended(beat), heartbeat, "heartbeat {lease_id} at {now}");
        }
    }

    #[test]
    fn expiry_is_judged_when_the_heartbeat_was_sent() {
        let store = fixture(StoreLimits::default());
        store
            .create_lease(&new_lease("lease:1", "connection:1", None, 10))
            .unwrap();
        // Sent at 900, before expiry at 1010, processed at 5000 after a stall: renewed from the
        // Broker's own clock.
        let beat = store.heartbeat_lease(
            &"connection:1".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            900,
            5_000,
        );
        assert_eq!(ended(beat), "lease:1 expires 6000");
        // A stamp from the future is bounded by the Broker's clock.
        let beat = store.heartbeat_lease(
            &"connection:1".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            9_999,
            5_500,
        );
        assert_eq!(ended(beat), "lease:1 expires 6500");
        // Sent after expiry: ended, whatever the processing time.
        let beat = store.heartbeat_lease(
            &"connection:1".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            6_500,
            6_500,
        );
        assert_eq!(ended(beat), "LeaseEnded lease:1");
    }

    #[test]
    fn another_principals_lease_is_answered_like_an_unknown_one() {
        let store = fixture(StoreLimits::default());
        connect(&store, "connection:b", &principal("b"));
        store
            .create_lease(&new_lease("lease:1", "connection:1", None, 10))
            .unwrap();
        let by_b = store.heartbeat_lease(
            &"connection:b".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            20,
            20,
        );
        assert_eq!(ended(by_b), "LeaseNotFound");
        let by_b = store.check_lease(
            &"connection:b".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            20,
        );
        assert_eq!(outcome(by_b, render), "LeaseNotFound");
        let by_b = store.release_lease(
            &"connection:b".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            20,
            20,
        );
        assert_eq!(ended(by_b), "LeaseNotFound");
        let by_sibling = store.heartbeat_lease(
            &"connection:2".into(),
            &"workspace:1".into(),
            &"lease:1".into(),
            20,
            20,
        );
        assert_eq!(ended(by_sibling), "LeaseNotOwned");
    }

    #[test]
    fn release_checks_ownership_then_deletes() {
        let store = fixture(StoreLimits::default());
        store
            .create_lease(&new_lease("lease:1", "connection:1", None, 10))
            .unwrap();
        store
            .create_lease(&new_lease("lease:2", "connection:1", None, 10))
            .unwrap();
        let cases = [
            (("connection:2", "lease:1", 20), "LeaseNotOwned"),
            (("connection:1", "lease:1", 20), "lease:1 expires 1010"),
            (("connection:1", "lease:1", 20), "LeaseNotFound"),
            (("connection:1", "lease:2", 1_010), "LeaseEnded lease:2"),
            (("connection:1", "lease:2", 1_010), "LeaseNotFound"),
        ];
        for ((connection_id, lease_id, now), expect) in cases {
            let released = store.release_lease(
                &connection_id.into(),
                &"workspace:1".into(),
                &lease_id.into(),
                now,
                now,
            );
            assert_eq!(
                ended(released),
                expect,
                "release {lease_id} by {connection_id}"
            );
        }
    }

    #[test]
    fn expire_leases_takes_exactly_the_expired() {
        let store = fixture(StoreLimits::default());
        for (id, now) in [("lease:1", 0), ("lease:2", 10), ("lease:3", 20)] {
            store
                .create_lease(&new_lease(id, "connection:1", None, now))
                .unwrap();
        }
        let expired: Vec<String> = store
            .expire_leases(1_010)
            .unwrap()
            .into_iter()
            .map(|l| l.id.to_string())
            .collect();
        assert_eq!(expired, ["lease:1", "lease:2"]);
        assert_eq!(store.expire_leases(1_010).unwrap(), []);
        let left = store.check_lease(
            &"connection:1".into(),
            &"workspace:1".into(),
            &"lease:3".into(),
            1_010,
        );
        assert_eq!(outcome(left, render), "lease:3 expires 1020");
    }

    #[test]
    fn close_connection_releases_its_leases() {
        let store = fixture(StoreLimits::default());
        store
            .open_connection(&NewConnection {
                id: "connection:cli".to_owned(),
                principal: principal("a"),
                kind: ConnectionKind::Cli,
                protocol_minor: 1,
                opened_at: 1,
            })
            .unwrap();
        store
            .create_lease(&new_lease("lease:1", "connection:1", None, 10))
            .unwrap();
        store
            .create_lease(&new_lease("lease:2", "connection:1", Some("k"), 10))
            .unwrap();
        store
            .create_lease(&new_lease("lease:3", "connection:2", None, 10))
            .unwrap();
        assert_eq!(
            store.count_connections(ConnectionKind::Embedded).unwrap(),
            2
        );
        assert_eq!(store.count_connections(ConnectionKind::Cli).unwrap(), 1);

        let mut released: Vec<String> = store
            .close_connection("connection:1", 20)
            .unwrap()
            .into_iter()
            .map(|l| l.id.to_string())
            .collect();
        released.sort();
        assert_eq!(released, ["lease:1", "lease:2"]);
        assert_eq!(store.close_connection("connection:1", 21).unwrap(), []);
        assert_eq!(store.close_connection("connection:none", 21).unwrap(), []);
        assert_eq!(
            store.count_connections(ConnectionKind::Embedded).unwrap(),
            1
        );
        let kept = store.check_lease(
            &"connection:2".into(),
            &"workspace:1".into(),
            &"lease:3".into(),
            20,
        );
        assert_eq!(outcome(kept, render), "lease:3 expires 1010");
        // A closed Connection can no longer take Leases.
        let late = store.create_lease(&new_lease("lease:4", "connection:1", None, 30));
        assert_eq!(outcome(late, render), "ConnectionNotFound");
    }
}
