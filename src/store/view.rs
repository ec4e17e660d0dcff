//! The live view's read-only snapshot (docs/view.md): every active Workspace with its
//! Principal, its Leases and its newest Commands, the newest journal rows of one Workspace, and
//! the Commands and a tab's rows since a recording started.
//! Reads only, on the reader threads (`Store::call_read`), so the view never holds the writer
//! that the request path commits through. Payloads pass through as the text the store keeps
//! (already masked and redacted by whoever wrote them).

use super::db::Store;
use super::error::StoreError;

/// Newest Commands per Workspace in a snapshot.
pub const VIEW_COMMANDS_PER_WORKSPACE: usize = 20;

/// Newest journal rows in one `view_events` page.
pub const VIEW_EVENTS_PAGE: usize = 50;

/// Most Commands and most journal rows a recording's timeline keeps (the first ones).
pub const RECORDING_TIMELINE_ROWS: usize = 2_000;

/// One active Workspace as the view shows it.
#[derive(Debug, Clone)]
pub struct ViewWorkspace {
    pub workspace_id: String,
    pub client_id: String,
    pub instance_id: String,
    pub browser_id: String,
    pub created_at: i64,
    pub leases: Vec<ViewLease>,
    pub commands: Vec<ViewCommand>,
}

#[derive(Debug, Clone)]
pub struct ViewLease {
    pub lease_id: String,
    pub expires_at: i64,
}

#[derive(Debug, Clone)]
pub struct ViewCommand {
    pub command_id: String,
    pub method: String,
    pub status: String,
    pub accepted_at: i64,
    pub result_json: Option<String>,
    pub error_json: Option<String>,
}

/// One journal row.
#[derive(Debug, Clone)]
pub struct ViewEvent {
    pub sequence: i64,
    pub timestamp: i64,
    pub event_type: String,
    pub target_id: Option<String>,
    pub payload_json: String,
}

impl Store {
    /// Every active Workspace, oldest first, with its Leases and newest Commands.
    pub fn view_workspaces(&self) -> Result<Vec<ViewWorkspace>, StoreError> {
        self.read(|transaction| {
            let mut workspaces: Vec<ViewWorkspace> = transaction
                .prepare_cached(
                    "SELECT w.workspace_id, p.client_id, p.instance_id, w.browser_id, w.created_at
                     FROM workspaces w JOIN principals p ON p.principal_id = w.principal_id
                     ORDER BY w.workspace_key",
                )?
                .query_map([], |row| {
                    Ok(ViewWorkspace {
                        workspace_id: row.get(0)?,
                        client_id: row.get(1)?,
                        instance_id: row.get(2)?,
                        browser_id: row.get(3)?,
                        created_at: row.get(4)?,
                        leases: Vec::new(),
                        commands: Vec::new(),
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let mut leases = transaction.prepare_cached(
                "SELECT lease_id, expires_at FROM leases WHERE workspace_id = ?1
                 ORDER BY created_at",
            )?;
            let mut commands = transaction.prepare_cached(
                "SELECT command_id, method, status, accepted_at, result_json, error_json
                 FROM commands WHERE workspace_id = ?1 ORDER BY rowid DESC LIMIT ?2",
            )?;
            for workspace in &mut workspaces {
                workspace.leases = leases
                    .query_map([&workspace.workspace_id], |row| {
                        Ok(ViewLease {
                            lease_id: row.get(0)?,
                            expires_at: row.get(1)?,
                        })
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                let limit = VIEW_COMMANDS_PER_WORKSPACE as i64;
                workspace.commands = commands
                    .query_map((&workspace.workspace_id, limit), command_row)?
                    .collect::<rusqlite::Result<_>>()?;
            }
            Ok(workspaces)
        })
    }

    /// A Workspace's Commands accepted at or after `since` (ms), oldest first, for a
    /// recording's timeline.
    pub fn view_commands_since(
        &self,
        workspace_id: &str,
        since: i64,
    ) -> Result<Vec<ViewCommand>, StoreError> {
        self.read(|transaction| {
            let rows = transaction
                .prepare_cached(
                    "SELECT command_id, method, status, accepted_at, result_json, error_json
                     FROM commands WHERE workspace_id = ?1 AND accepted_at >= ?2
                     ORDER BY rowid LIMIT ?3",
                )?
                .query_map(
                    (workspace_id, since, RECORDING_TIMELINE_ROWS as i64),
                    command_row,
                )?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }

    /// A tab's journal rows in a Workspace at or after `since` (ms), oldest first, for a
    /// recording's timeline.
    pub fn view_events_since(
        &self,
        workspace_id: &str,
        target_id: &str,
        since: i64,
    ) -> Result<Vec<ViewEvent>, StoreError> {
        self.read(|transaction| {
            let rows = transaction
                .prepare_cached(
                    "SELECT e.sequence, e.timestamp, e.event_type, e.target_id, e.payload_json
                     FROM events e JOIN workspaces w ON w.workspace_key = e.workspace_key
                     WHERE w.workspace_id = ?1 AND e.target_id = ?2 AND e.timestamp >= ?3
                     ORDER BY e.sequence LIMIT ?4",
                )?
                .query_map(
                    (
                        workspace_id,
                        target_id,
                        since,
                        RECORDING_TIMELINE_ROWS as i64,
                    ),
                    event_row,
                )?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }

    /// The newest journal rows of a Workspace (of one tab when `target_id` is given), newest
    /// first. An unknown Workspace has none.
    pub fn view_events(
        &self,
        workspace_id: &str,
        target_id: Option<&str>,
    ) -> Result<Vec<ViewEvent>, StoreError> {
        self.read(|transaction| {
            let rows = transaction
                .prepare_cached(
                    "SELECT e.sequence, e.timestamp, e.event_type, e.target_id, e.payload_json
                     FROM events e JOIN workspaces w ON w.workspace_key = e.workspace_key
                     WHERE w.workspace_id = ?1 AND (?2 IS NULL OR e.target_id = ?2)
                     ORDER BY e.sequence DESC LIMIT ?3",
                )?
                .query_map(
                    (workspace_id, target_id, VIEW_EVENTS_PAGE as i64),
                    event_row,
                )?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }
}

/// A `ViewCommand` from a row of `command_id, method, status, accepted_at, result_json,
/// error_json`.
fn command_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ViewCommand> {
    Ok(ViewCommand {
        command_id: row.get(0)?,
        method: row.get(1)?,
        status: row.get(2)?,
        accepted_at: row.get(3)?,
        result_json: row.get(4)?,
        error_json: row.get(5)?,
    })
}

/// A `ViewEvent` from a row of `sequence, timestamp, event_type, target_id, payload_json`.
fn event_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ViewEvent> {
    Ok(ViewEvent {
        sequence: row.get(0)?,
        timestamp: row.get(1)?,
        event_type: row.get(2)?,
        target_id: row.get(3)?,
        payload_json: row.get(4)?,
    })
}
