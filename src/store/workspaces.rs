//! Workspace rows and their tombstones: create (idempotent by `clientKey`),
//! lookup, release, activity and the idle query. Owns the `workspaces` and
//! `tombstones` tables. Authorization is Principal ownership: another
//! Principal's Workspace is indistinguishable from a missing one.

use rusqlite::{Connection, OptionalExtension as _};

use super::artifacts::{artifact_columns, artifact_from_row};
use super::db::{Store, column_u64};
use super::error::StoreError;
use super::leases::{lease_columns, lease_from_row};
use super::model::{
    CreateWorkspace, NewWorkspace, PrincipalKey, ReleaseReason, ReleaseWorkspace, TombstoneRow,
    WorkspaceLookup, WorkspaceOptions, WorkspaceRow,
};
use super::principals::{ensure_principal, find_principal, forget_principal_if_unused};

/// Columns read by `workspace_from_row`, in order; needs `workspaces AS w`
/// joined with `principals AS p`.
/// The `isolation` column of a Workspace whose managed tabs live in a browser context of their
/// own; NULL is the shared profile.
const ISOLATION_CONTEXT: &str = "context";

macro_rules! workspace_columns {
    () => {
        "w.workspace_id, p.client_id, p.instance_id, w.browser_id, w.client_key,
         w.created_at, w.last_active_at,
         (SELECT ifnull(max(e.sequence), 0) FROM events AS e WHERE e.workspace_key = w.workspace_key),
         w.url_policy, w.isolation"
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
        options: WorkspaceOptions {
            url_policy: row.get(8)?,
            isolated: row.get::<_, Option<String>>(9)?.as_deref() == Some(ISOLATION_CONTEXT),
        },
    })
}

fn find_workspace(
    transaction: &Connection,
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

/// Records activity on a Workspace: every Command, Lease call and poll moves its idle clock,
/// in the transaction that already writes for it. Never moves the clock backwards.
pub(super) fn mark_active(
    transaction: &Connection,
    workspace_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    transaction
        .prepare_cached(
            "UPDATE workspaces SET last_active_at = ?2
             WHERE workspace_id = ?1 AND last_active_at < ?2",
        )?
        .execute((workspace_id, now))?;
    Ok(())
}

/// Whether `workspace_id` is active and owned by `principal_id`.
pub(super) fn owns_workspace(
    transaction: &Connection,
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
    /// already names on the same browser with the same options (`ClientKeyConflict` on
    /// another browser or with other options).
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
                    Some(row)
                        if row.browser_id == workspace.browser_id
                            && row.options == workspace.options =>
                    {
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
                       (workspace_id, principal_id, browser_id, client_key, created_at, last_active_at,
                        url_policy, isolation)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)",
                )?
                .execute((
                    &workspace.id,
                    principal_id,
                    &workspace.browser_id,
                    &workspace.client_key,
                    workspace.now,
                    &workspace.options.url_policy,
                    workspace.options.isolated.then_some(ISOLATION_CONTEXT),
                ))?;
            let created = find_workspace(transaction, principal_id, &workspace.id)?
                .ok_or(StoreError::WorkspaceNotFound)?;
            let expired = match &workspace.client_key {
                Some(client_key) => take_idle_predecessor(transaction, principal_id, client_key)?,
                None => None,
            };
            Ok(match expired {
                Some(expired) => CreateWorkspace::Replaced {
                    row: created,
                    expired,
                },
                None => CreateWorkspace::Created(created),
            })
        })
    }

    /// The browser of `principal`'s active Workspace named by `client_key`, if any: a retry of
    /// a create that gives the key but no `browserId` binds to the same browser as the first.
    pub fn client_key_browser(
        &self,
        principal: &PrincipalKey,
        client_key: &str,
    ) -> Result<Option<String>, StoreError> {
        self.read(|transaction| {
            let Some(principal_id) = find_principal(transaction, principal)? else {
                return Ok(None);
            };
            let browser_id = transaction
                .prepare_cached(
                    "SELECT browser_id FROM workspaces WHERE principal_id = ?1 AND client_key = ?2",
                )?
                .query_row((principal_id, client_key), |row| row.get(0))
                .optional()?;
            Ok(browser_id)
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
        reason: ReleaseReason,
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
            let client_key: Option<String> = transaction
                .prepare_cached("SELECT client_key FROM workspaces WHERE workspace_id = ?1")?
                .query_row([id], |row| row.get(0))?;
            // The journal has no foreign key (see the migration); Commands
            // go by ON DELETE CASCADE.
            transaction
                .prepare_cached(
                    "DELETE FROM events WHERE workspace_key =
                       (SELECT workspace_key FROM workspaces WHERE workspace_id = ?1)",
                )?
                .execute([id])?;
            transaction
                .prepare_cached("DELETE FROM workspaces WHERE workspace_id = ?1")?
                .execute([id])?;
            transaction
                .prepare_cached(
                    "INSERT OR REPLACE INTO tombstones
                       (workspace_id, principal_id, released_at, reason, client_key)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute((id, principal_id, now, reason.as_str(), client_key))?;
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

    /// Moves the idle clock of an active Workspace to `now` (never back), for activity that
    /// writes nothing else (a poll).
    pub fn touch_workspace(&self, id: &str, now: i64) -> Result<(), StoreError> {
        self.write(|transaction| {
            if transaction
                .prepare_cached("SELECT 1 FROM workspaces WHERE workspace_id = ?1")?
                .query_row([id], |_| Ok(()))
                .optional()?
                .is_none()
            {
                return Err(StoreError::WorkspaceNotFound);
            }
            mark_active(transaction, id, now)
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
                     ORDER BY w.last_active_at, w.workspace_id"
                ))?
                .query_map([idle_before], workspace_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}

fn find_tombstone(
    transaction: &Connection,
    principal_id: i64,
    workspace_id: &str,
) -> Result<Option<TombstoneRow>, StoreError> {
    let tombstone = transaction
        .prepare_cached(
            "SELECT workspace_id, released_at, reason FROM tombstones
             WHERE workspace_id = ?1 AND principal_id = ?2",
        )?
        .query_row((workspace_id, principal_id), tombstone_from_row)
        .optional()?;
    Ok(tombstone)
}

fn tombstone_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<TombstoneRow> {
    Ok(TombstoneRow {
        workspace_id: row.get(0)?,
        released_at: row.get(1)?,
        reason: TombstoneRow::reason_from_column(&row.get::<_, String>(2)?),
    })
}

/// The newest idle-reclaimed Workspace that had `client_key`, unlinked from the key so it is
/// reported once.
fn take_idle_predecessor(
    transaction: &Connection,
    principal_id: i64,
    client_key: &str,
) -> Result<Option<TombstoneRow>, StoreError> {
    let tombstone = transaction
        .prepare_cached(
            "SELECT workspace_id, released_at, reason FROM tombstones
             WHERE principal_id = ?1 AND client_key = ?2 AND reason = 'idle'
             ORDER BY rowid DESC LIMIT 1",
        )?
        .query_row((principal_id, client_key), tombstone_from_row)
        .optional()?;
    transaction
        .prepare_cached(
            "UPDATE tombstones SET client_key = NULL WHERE principal_id = ?1 AND client_key = ?2",
        )?
        .execute((principal_id, client_key))?;
    Ok(tombstone)
}

/// After tombstones were pruned, drops Principals nothing refers to any more.
fn forget_pruned_principals(transaction: &Connection) -> Result<(), StoreError> {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{
        connect, event, new_workspace, outcome, principal, store, store_with, workspace,
    };
    use super::super::{
        ArtifactRow, CreateWorkspace, InsertCommand, NewCommand, NewLease, ReleaseReason,
        ReleaseWorkspace, Store, StoreLimits, WorkspaceLookup,
    };

    fn render_create(created: CreateWorkspace) -> String {
        match created {
            CreateWorkspace::Created(row) => format!("created {}", row.id),
            CreateWorkspace::Existing(row) => format!("existing {}", row.id),
            CreateWorkspace::Replaced { row, expired } => format!(
                "created {} after {} ({:?} at {})",
                row.id, expired.workspace_id, expired.reason, expired.released_at
            ),
        }
    }

    fn render_release(released: ReleaseWorkspace) -> String {
        match released {
            ReleaseWorkspace::Released {
                released_leases,
                released_artifacts,
            } => format!(
                "released leases={} artifacts={}",
                released_leases.len(),
                released_artifacts.len()
            ),
            ReleaseWorkspace::AlreadyReleased { released_at } => {
                format!("already released at {released_at}")
            }
            ReleaseWorkspace::NotFound => "not found".to_owned(),
        }
    }

    fn render_lookup(lookup: WorkspaceLookup) -> String {
        match lookup {
            WorkspaceLookup::Active(row) => format!("active {}", row.id),
            WorkspaceLookup::Released(tombstone) => {
                format!(
                    "released {} at {} ({:?})",
                    tombstone.workspace_id, tombstone.released_at, tombstone.reason
                )
            }
            WorkspaceLookup::NotFound => "not found".to_owned(),
        }
    }

    fn check_release(store: &Store, name: &str, id: &str, now: i64, expect: &str) {
        let actual = outcome(
            store.release_workspace(&principal(name), id, now, ReleaseReason::Released),
            render_release,
        );
        assert_eq!(actual, expect, "release {id} by {name}");
    }

    fn check_get(store: &Store, name: &str, id: &str, expect: &str) {
        let actual = outcome(store.get_workspace(&principal(name), id), render_lookup);
        assert_eq!(actual, expect, "get {id} by {name}");
    }

    #[test]
    fn client_key_makes_creation_idempotent() {
        let store = store();
        let a = principal("a");
        let create = |id: &str, owner, key: Option<&str>, browser: &str| {
            let mut new = new_workspace(id, owner, key);
            new.browser_id = browser.to_owned();
            outcome(store.create_workspace(&new), render_create)
        };
        let b = principal("b");
        let cases = [
            (
                create("workspace:1", &a, Some("k"), "browser:a"),
                "created workspace:1",
            ),
            (
                create("workspace:2", &a, Some("k"), "browser:a"),
                "existing workspace:1",
            ),
            (
                create("workspace:3", &a, Some("k"), "browser:b"),
                "ClientKeyConflict",
            ),
            (
                create("workspace:4", &a, None, "browser:a"),
                "created workspace:4",
            ),
            (
                create("workspace:5", &b, Some("k"), "browser:b"),
                "created workspace:5",
            ),
        ];
        for (actual, expect) in cases {
            assert_eq!(actual, expect);
        }
        // A released Workspace frees its key.
        store
            .release_workspace(&a, "workspace:1", 20, ReleaseReason::Released)
            .unwrap();
        assert_eq!(
            create("workspace:6", &a, Some("k"), "browser:b"),
            "created workspace:6"
        );
    }

    #[test]
    fn a_repeated_client_key_must_repeat_the_options() {
        let store = store();
        let a = principal("a");
        let create = |id: &str, policy: Option<&str>| {
            let mut new = new_workspace(id, &a, Some("k"));
            new.options.url_policy = policy.map(str::to_owned);
            outcome(store.create_workspace(&new), render_create)
        };
        let policy = r#"{"allow":[],"block":["https://b.test"]}"#;
        assert_eq!(create("workspace:1", Some(policy)), "created workspace:1");
        assert_eq!(create("workspace:2", Some(policy)), "existing workspace:1");
        assert_eq!(create("workspace:3", None), "ClientKeyConflict");
        let other = r#"{"allow":[],"block":["https://c.test"]}"#;
        assert_eq!(create("workspace:4", Some(other)), "ClientKeyConflict");
        let lookup = store.get_workspace(&a, "workspace:1").unwrap();
        let WorkspaceLookup::Active(row) = lookup else {
            panic!("{lookup:?}");
        };
        assert_eq!(row.options.url_policy.as_deref(), Some(policy));
    }

    #[test]
    fn a_repeated_client_key_must_repeat_the_isolation() {
        let store = store();
        let a = principal("a");
        let create = |id: &str, isolated: bool| {
            let mut new = new_workspace(id, &a, Some("k"));
            new.options.isolated = isolated;
            outcome(store.create_workspace(&new), render_create)
        };
        assert_eq!(create("workspace:1", true), "created workspace:1");
        assert_eq!(create("workspace:2", true), "existing workspace:1");
        assert_eq!(create("workspace:3", false), "ClientKeyConflict");
        let lookup = store.get_workspace(&a, "workspace:1").unwrap();
        let WorkspaceLookup::Active(row) = lookup else {
            panic!("{lookup:?}");
        };
        assert!(row.options.isolated);
    }

    #[test]
    fn workspaces_per_principal_are_bounded() {
        let store = store_with(StoreLimits {
            max_workspaces_per_principal: 2,
            ..StoreLimits::default()
        });
        let a = principal("a");
        workspace(&store, "workspace:1", &a);
        workspace(&store, "workspace:2", &a);
        let third = store.create_workspace(&new_workspace("workspace:3", &a, None));
        assert_eq!(
            outcome(third, render_create),
            "LimitExceeded { what: \"workspaces_per_principal\", limit: 2 }"
        );
        workspace(&store, "workspace:4", &principal("b"));
        store
            .release_workspace(&a, "workspace:1", 20, ReleaseReason::Released)
            .unwrap();
        workspace(&store, "workspace:3", &a);
    }

    #[test]
    fn second_release_answers_already_released() {
        let store = store();
        workspace(&store, "workspace:1", &principal("a"));
        check_get(&store, "a", "workspace:1", "active workspace:1");
        check_release(
            &store,
            "a",
            "workspace:1",
            20,
            "released leases=0 artifacts=0",
        );
        check_release(&store, "a", "workspace:1", 30, "already released at 20");
        check_get(
            &store,
            "a",
            "workspace:1",
            "released workspace:1 at 20 (Released)",
        );
        // Another Principal learns nothing.
        check_release(&store, "b", "workspace:1", 30, "not found");
        check_get(&store, "b", "workspace:1", "not found");
        check_release(&store, "a", "workspace:none", 30, "not found");
    }

    #[test]
    fn tombstones_are_bounded_oldest_first() {
        let store = store_with(StoreLimits {
            max_tombstones: 2,
            ..StoreLimits::default()
        });
        for n in 1..=3 {
            let id = format!("workspace:{n}");
            workspace(&store, &id, &principal("a"));
            store
                .release_workspace(&principal("a"), &id, n, ReleaseReason::Released)
                .unwrap();
        }
        check_release(&store, "a", "workspace:1", 9, "not found");
        check_release(&store, "a", "workspace:2", 9, "already released at 2");
        check_release(&store, "a", "workspace:3", 9, "already released at 3");
        let count = store
            .query_readonly("SELECT count(*) FROM tombstones")
            .unwrap();
        assert_eq!(format!("{:?}", count.rows), "[[Integer(2)]]");
    }

    #[test]
    fn principals_are_isolated() {
        let store = store();
        let (a, b) = (principal("a"), principal("b"));
        workspace(&store, "workspace:a", &a);
        connect(&store, "connection:b", &b);
        check_get(&store, "b", "workspace:a", "not found");
        let lease = store.create_lease(&NewLease {
            id: "lease:b".to_owned(),
            workspace_id: "workspace:a".to_owned(),
            connection_id: "connection:b".to_owned(),
            principal: b.clone(),
            ttl_ms: 1_000,
            client_key: None,
            now: 10,
        });
        assert_eq!(
            outcome(lease, |row| row.id.to_string()),
            "WorkspaceNotFound"
        );
        let command = store.insert_command(&NewCommand {
            id: "command:b".to_owned(),
            principal: b.clone(),
            workspace_id: Some("workspace:a".to_owned()),
            connection_id: "connection:b".to_owned(),
            method: "browser.observe".to_owned(),
            generation: 1,
            idempotency_key: None,
            args_hash: [0; 32],
            accepted_at: 10,
            deadline_at: 100,
            mutating: false,
        });
        assert_eq!(
            outcome(command, |_| "inserted".to_owned()),
            "WorkspaceNotFound"
        );
        check_release(&store, "b", "workspace:a", 20, "not found");
        check_get(&store, "a", "workspace:a", "active workspace:a");
    }

    #[test]
    fn release_removes_everything_the_workspace_owns() {
        let store = store();
        let a = principal("a");
        workspace(&store, "workspace:1", &a);
        workspace(&store, "workspace:2", &a);
        connect(&store, "connection:1", &a);
        for (lease, workspace_id) in [("lease:1", "workspace:1"), ("lease:2", "workspace:2")] {
            store
                .create_lease(&NewLease {
                    id: lease.to_owned(),
                    workspace_id: workspace_id.to_owned(),
                    connection_id: "connection:1".to_owned(),
                    principal: a.clone(),
                    ttl_ms: 1_000,
                    client_key: None,
                    now: 10,
                })
                .unwrap();
        }
        store.append_event(&event("workspace:1", 1)).unwrap();
        let inserted = store
            .insert_command(&NewCommand {
                id: "command:1".to_owned(),
                principal: a.clone(),
                workspace_id: Some("workspace:1".to_owned()),
                connection_id: "connection:1".to_owned(),
                method: "browser.observe".to_owned(),
                generation: 1,
                idempotency_key: Some("key".to_owned()),
                args_hash: [1; 32],
                accepted_at: 10,
                deadline_at: 100,
                mutating: false,
            })
            .unwrap();
        assert!(matches!(inserted, InsertCommand::Inserted(_)));
        store
            .insert_artifact(&ArtifactRow {
                id: "artifact:1".to_owned(),
                workspace_id: "workspace:1".to_owned(),
                kind: "screenshot".to_owned(),
                mime_type: "image/png".to_owned(),
                byte_len: 3,
                sha256: "0".repeat(64),
                created_at: 10,
                expires_at: 1_000,
                retained: false,
                sensitivity: "browser_data".to_owned(),
                file_name: None,
            })
            .unwrap();

        let released = store
            .release_workspace(&a, "workspace:1", 20, ReleaseReason::Released)
            .unwrap();
        let ReleaseWorkspace::Released {
            released_leases,
            released_artifacts,
        } = released
        else {
            panic!("expected Released, got {released:?}");
        };
        assert_eq!(released_leases.len(), 1);
        assert_eq!(released_leases[0].id, "lease:1");
        assert_eq!(released_artifacts[0].id, "artifact:1");
        assert_eq!(
            outcome(store.poll_events("workspace:1", 0, 10, true), |_| "page"
                .to_owned()),
            "WorkspaceNotFound"
        );
        assert_eq!(store.get_command(&a, "command:1").unwrap(), None);
        assert_eq!(
            store.get_artifact("workspace:1", "artifact:1").unwrap(),
            None
        );
        let left = store
            .query_readonly(
                "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM commands),
                        (SELECT group_concat(lease_id) FROM leases)",
            )
            .unwrap();
        assert_eq!(
            format!("{:?}", left.rows),
            "[[Integer(0), Integer(0), Text(\"lease:2\")]]"
        );
    }

    #[test]
    fn inactive_workspaces_have_no_lease_and_no_connection() {
        let store = store();
        let (a, b, c) = (principal("a"), principal("b"), principal("c"));
        workspace(&store, "workspace:idle", &a);
        workspace(&store, "workspace:touched", &a);
        workspace(&store, "workspace:leased", &b);
        workspace(&store, "workspace:connected", &c);
        connect(&store, "connection:b", &b);
        connect(&store, "connection:c", &c);
        store
            .create_lease(&NewLease {
                id: "lease:b".to_owned(),
                workspace_id: "workspace:leased".to_owned(),
                connection_id: "connection:b".to_owned(),
                principal: b.clone(),
                ttl_ms: 1_000,
                client_key: None,
                now: 10,
            })
            .unwrap();
        store.touch_workspace("workspace:touched", 50).unwrap();
        let idle = |before| -> Vec<String> {
            let rows = store.inactive_workspaces(before).unwrap();
            rows.into_iter().map(|row| row.id).collect()
        };
        assert_eq!(idle(40), ["workspace:idle"]);
        assert_eq!(idle(51), ["workspace:idle", "workspace:touched"]);
        store.close_connection("connection:b", 60).unwrap();
        assert_eq!(idle(40), ["workspace:idle", "workspace:leased"]);
        assert_eq!(
            outcome(store.touch_workspace("workspace:none", 50), |()| "ok"
                .to_owned()),
            "WorkspaceNotFound"
        );
    }

    #[test]
    fn activity_moves_the_idle_clock_forward_only() {
        let store = store();
        let a = principal("a");
        workspace(&store, "workspace:1", &a);
        connect(&store, "connection:a", &a);
        let last_active = |store: &Store| match store.get_workspace(&a, "workspace:1").unwrap() {
            WorkspaceLookup::Active(row) => row.last_active_at,
            other => panic!("{other:?}"),
        };
        let lease = store
            .create_lease(&NewLease {
                id: "lease:1".to_owned(),
                workspace_id: "workspace:1".to_owned(),
                connection_id: "connection:a".to_owned(),
                principal: a.clone(),
                ttl_ms: 1_000,
                client_key: None,
                now: 20,
            })
            .unwrap();
        assert_eq!(last_active(&store), 20);
        store
            .heartbeat_lease(
                &"connection:a".into(),
                &"workspace:1".into(),
                &lease.id,
                30,
                30,
            )
            .unwrap();
        assert_eq!(last_active(&store), 30);
        store
            .insert_command(&NewCommand {
                id: "command:1".to_owned(),
                principal: a.clone(),
                workspace_id: Some("workspace:1".to_owned()),
                connection_id: "connection:a".to_owned(),
                method: "browser.observe".to_owned(),
                generation: 1,
                idempotency_key: None,
                args_hash: [0; 32],
                accepted_at: 40,
                deadline_at: 100,
                mutating: false,
            })
            .unwrap();
        assert_eq!(last_active(&store), 40);
        store.touch_workspace("workspace:1", 35).unwrap();
        assert_eq!(last_active(&store), 40);
        store
            .release_lease(
                &"connection:a".into(),
                &"workspace:1".into(),
                &lease.id,
                50,
                50,
            )
            .unwrap();
        assert_eq!(last_active(&store), 50);
    }

    #[test]
    fn an_idle_reclaim_is_told_once_to_its_client_key_and_by_id() {
        let store = store();
        let a = principal("a");
        let create = |id: &str| {
            outcome(
                store.create_workspace(&new_workspace(id, &a, Some("bp:x"))),
                render_create,
            )
        };
        assert_eq!(create("workspace:1"), "created workspace:1");
        store
            .release_workspace(&a, "workspace:1", 20, ReleaseReason::Idle)
            .unwrap();
        check_get(
            &store,
            "a",
            "workspace:1",
            "released workspace:1 at 20 (Idle)",
        );
        assert_eq!(
            create("workspace:2"),
            "created workspace:2 after workspace:1 (Idle at 20)"
        );
        assert_eq!(create("workspace:3"), "existing workspace:2");
        store
            .release_workspace(&a, "workspace:2", 30, ReleaseReason::Released)
            .unwrap();
        check_get(
            &store,
            "a",
            "workspace:2",
            "released workspace:2 at 30 (Released)",
        );
        assert_eq!(create("workspace:4"), "created workspace:4");
    }

    #[test]
    fn client_key_browser_names_the_first_calls_browser() {
        let store = store();
        let a = principal("a");
        assert_eq!(store.client_key_browser(&a, "k").unwrap(), None);
        store
            .create_workspace(&new_workspace("workspace:1", &a, Some("k")))
            .unwrap();
        assert_eq!(
            store.client_key_browser(&a, "k").unwrap().as_deref(),
            Some("browser:a")
        );
        assert_eq!(
            store.client_key_browser(&principal("b"), "k").unwrap(),
            None
        );
    }
}
