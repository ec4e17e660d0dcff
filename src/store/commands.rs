//! Command rows: idempotent insertion, lookup, the status transitions
//! (dispatch, cancel, completion) and pruning of old terminal Commands per
//! Principal. Owns the `commands` table; it does not hash arguments or decide
//! deadlines (the broker does) and never interprets result or error JSON.

use rusqlite::{Connection, OptionalExtension as _};

use super::db::{Store, column_u64, to_sql_u64};
use super::error::StoreError;
use super::model::{CommandRow, CommandStatus, InsertCommand, NewCommand, PrincipalKey};
use super::principals::{ensure_principal, find_principal};
use super::workspaces::owns_workspace;

/// Columns read by `command_from_row`, in order.
macro_rules! command_columns {
    () => {
        "command_id, workspace_id, connection_id, method, generation, idempotency_key,
         args_hash, status, accepted_at, deadline_at, dispatched_at, completed_at,
         mutating, cancellation_requested, result_json, error_json"
    };
}

fn command_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<CommandRow> {
    let status_text: String = row.get(7)?;
    let status = CommandStatus::parse(&status_text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            7,
            rusqlite::types::Type::Text,
            format!("unknown command status {status_text:?}").into(),
        )
    })?;
    Ok(CommandRow {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        connection_id: row.get(2)?,
        method: row.get(3)?,
        generation: column_u64(row, 4)?,
        idempotency_key: row.get(5)?,
        args_hash: row.get(6)?,
        status,
        accepted_at: row.get(8)?,
        deadline_at: row.get(9)?,
        dispatched_at: row.get(10)?,
        completed_at: row.get(11)?,
        mutating: row.get(12)?,
        cancellation_requested: row.get(13)?,
        result_json: row.get(14)?,
        error_json: row.get(15)?,
    })
}

/// A Command row with the id of its owning Principal.
fn find_command(
    transaction: &Connection,
    id: &str,
) -> Result<Option<(i64, CommandRow)>, StoreError> {
    let found = transaction
        .prepare_cached(concat!(
            "SELECT ",
            command_columns!(),
            ", principal_id FROM commands WHERE command_id = ?1"
        ))?
        .query_row([id], |row| Ok((row.get(16)?, command_from_row(row)?)))
        .optional()?;
    Ok(found)
}

/// Whether a stored Command is the same request as `command`.
fn same_request(existing: &CommandRow, command: &NewCommand) -> bool {
    existing.method == command.method
        && existing.args_hash == command.args_hash
        && existing.workspace_id == command.workspace_id
}

impl Store {
    /// Records a new Command with status `accepted`, or recognizes a retry.
    ///
    /// A retry reuses the command id (within the Principal) or the
    /// `(Principal, Workspace, idempotency_key)` triple. The same method,
    /// arguments hash and Workspace give `Duplicate` with the current row;
    /// anything else is `IdempotencyConflict`, as is a command id owned by
    /// another Principal (never revealed). A Workspace that is not the
    /// Principal's active one gives `WorkspaceNotFound`.
    pub fn insert_command(&self, command: &NewCommand) -> Result<InsertCommand, StoreError> {
        let generation = to_sql_u64(command.generation, "command generation")?;
        self.write(|transaction| {
            let principal_id = ensure_principal(transaction, &command.principal)?;
            if let Some(workspace_id) = &command.workspace_id
                && !owns_workspace(transaction, principal_id, workspace_id)?
            {
                return Err(StoreError::WorkspaceNotFound);
            }
            if let Some((owner, existing)) = find_command(transaction, &command.id)? {
                if owner != principal_id || !same_request(&existing, command) {
                    return Err(StoreError::IdempotencyConflict);
                }
                return Ok(InsertCommand::Duplicate(existing));
            }
            if let Some(key) = &command.idempotency_key {
                let existing = transaction
                    .prepare_cached(concat!(
                        "SELECT ",
                        command_columns!(),
                        " FROM commands
                         WHERE principal_id = ?1 AND ifnull(workspace_id, '') = ifnull(?2, '')
                           AND idempotency_key = ?3"
                    ))?
                    .query_row((principal_id, &command.workspace_id, key), command_from_row)
                    .optional()?;
                match existing {
                    Some(existing) if same_request(&existing, command) => {
                        return Ok(InsertCommand::Duplicate(existing));
                    }
                    Some(_) => return Err(StoreError::IdempotencyConflict),
                    None => {}
                }
            }
            let inserted = transaction
                .prepare_cached(concat!(
                    "INSERT INTO commands (command_id, principal_id, workspace_id, connection_id,
                                           method, generation, idempotency_key, args_hash, status,
                                           accepted_at, deadline_at, mutating)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'accepted', ?9, ?10, ?11)
                     RETURNING ",
                    command_columns!()
                ))?
                .query_row(
                    (
                        &command.id,
                        principal_id,
                        &command.workspace_id,
                        &command.connection_id,
                        &command.method,
                        generation,
                        &command.idempotency_key,
                        command.args_hash,
                        command.accepted_at,
                        command.deadline_at,
                        command.mutating,
                    ),
                    command_from_row,
                )?;
            Ok(InsertCommand::Inserted(inserted))
        })
    }

    /// The Command if it exists and belongs to `principal`.
    pub fn get_command(
        &self,
        principal: &PrincipalKey,
        id: &str,
    ) -> Result<Option<CommandRow>, StoreError> {
        self.read(|transaction| {
            let Some(principal_id) = find_principal(transaction, principal)? else {
                return Ok(None);
            };
            let command = match find_command(transaction, id)? {
                Some((owner, command)) if owner == principal_id => Some(command),
                Some(_) | None => None,
            };
            Ok(command)
        })
    }

    /// Moves an `accepted` Command to `dispatched`; any other status is left
    /// unchanged and the current row returned (a cancel may have won).
    pub fn mark_dispatched(&self, id: &str, now: i64) -> Result<CommandRow, StoreError> {
        self.write(|transaction| {
            transaction
                .prepare_cached(
                    "UPDATE commands SET status = 'dispatched', dispatched_at = ?2
                     WHERE command_id = ?1 AND status = 'accepted'",
                )?
                .execute((id, now))?;
            let (_, command) = find_command(transaction, id)?.ok_or(StoreError::CommandNotFound)?;
            Ok(command)
        })
    }

    /// `commands/cancel`: an `accepted` Command becomes `cancelled` (it will
    /// never be dispatched); a `dispatched` one gets `cancellation_requested`;
    /// a terminal one is unchanged. `None` if the Principal has no such
    /// Command.
    pub fn request_cancel(
        &self,
        principal: &PrincipalKey,
        id: &str,
        now: i64,
    ) -> Result<Option<CommandRow>, StoreError> {
        let terminal_limit = self.limits().max_terminal_commands_per_principal;
        self.write(|transaction| {
            let Some(principal_id) = find_principal(transaction, principal)? else {
                return Ok(None);
            };
            let command = match find_command(transaction, id)? {
                Some((owner, command)) if owner == principal_id => command,
                Some(_) | None => return Ok(None),
            };
            match command.status {
                CommandStatus::Accepted => {
                    transaction
                        .prepare_cached(
                            "UPDATE commands SET status = 'cancelled', completed_at = ?2,
                                                 cancellation_requested = 1
                             WHERE command_id = ?1",
                        )?
                        .execute((id, now))?;
                    prune_terminal(transaction, principal_id, terminal_limit)?;
                }
                CommandStatus::Dispatched => {
                    transaction
                        .prepare_cached(
                            "UPDATE commands SET cancellation_requested = 1 WHERE command_id = ?1",
                        )?
                        .execute([id])?;
                }
                CommandStatus::Completed
                | CommandStatus::Cancelled
                | CommandStatus::UnknownOutcome => {}
            }
            let command = find_command(transaction, id)?.map(|(_, command)| command);
            Ok(command)
        })
    }

    /// Makes a Command terminal with `status` and its recorded result or
    /// error, unless it already is (then the row is returned unchanged).
    /// Then prunes the Principal's oldest terminal Commands beyond
    /// `max_terminal_commands_per_principal`.
    pub fn complete_command(
        &self,
        id: &str,
        status: CommandStatus,
        result_json: Option<String>,
        error_json: Option<String>,
        now: i64,
    ) -> Result<CommandRow, StoreError> {
        if !status.is_terminal() {
            return Err(StoreError::StatusNotTerminal {
                status: status.as_str(),
            });
        }
        let terminal_limit = self.limits().max_terminal_commands_per_principal;
        self.write(|transaction| {
            let (principal_id, command) =
                find_command(transaction, id)?.ok_or(StoreError::CommandNotFound)?;
            if command.status.is_terminal() {
                return Ok(command);
            }
            let completed = transaction
                .prepare_cached(concat!(
                    "UPDATE commands SET status = ?2, result_json = ?3, error_json = ?4,
                                         completed_at = ?5
                     WHERE command_id = ?1 RETURNING ",
                    command_columns!()
                ))?
                .query_row(
                    (id, status.as_str(), result_json, error_json, now),
                    command_from_row,
                )?;
            prune_terminal(transaction, principal_id, terminal_limit)?;
            Ok(completed)
        })
    }
}

/// Deletes the Principal's terminal Commands beyond the newest `keep`
/// (ordered by completion time, then acceptance order).
fn prune_terminal(
    transaction: &Connection,
    principal_id: i64,
    keep: u32,
) -> Result<(), StoreError> {
    let cutoff: Option<(i64, i64)> = transaction
        .prepare_cached(
            "SELECT completed_at, rowid FROM commands
             WHERE principal_id = ?1 AND completed_at IS NOT NULL
             ORDER BY completed_at DESC, rowid DESC LIMIT 1 OFFSET ?2",
        )?
        .query_row((principal_id, keep), |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if let Some((completed_at, rowid)) = cutoff {
        transaction
            .prepare_cached(
                "DELETE FROM commands
                 WHERE principal_id = ?1 AND completed_at IS NOT NULL
                   AND (completed_at, rowid) <= (?2, ?3)",
            )?
            .execute((principal_id, completed_at, rowid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{outcome, principal, store, store_with, workspace};
    use super::super::{
        CommandRow, CommandStatus, InsertCommand, NewCommand, PrincipalKey, Store, StoreLimits,
    };

    fn new_command(id: &str, owner: &PrincipalKey, key: Option<&str>) -> NewCommand {
        NewCommand {
            id: id.to_owned(),
            principal: owner.clone(),
            workspace_id: Some("workspace:1".to_owned()),
            connection_id: "connection:1".to_owned(),
            method: "browser.click".to_owned(),
            generation: 3,
            idempotency_key: key.map(str::to_owned),
            args_hash: [7; 32],
            accepted_at: 10,
            deadline_at: 30_010,
            mutating: true,
        }
    }

    fn render_insert(inserted: InsertCommand) -> String {
        match inserted {
            InsertCommand::Inserted(row) => format!("inserted {}", row.id),
            InsertCommand::Duplicate(row) => format!("duplicate of {}", row.id),
        }
    }

    fn render(row: CommandRow) -> String {
        let cancel = match row.cancellation_requested {
            true => " cancel-requested",
            false => "",
        };
        format!(
            "{} {} dispatched={:?} completed={:?}{cancel}",
            row.id,
            row.status.as_str(),
            row.dispatched_at,
            row.completed_at
        )
    }

    fn fixture(limits: StoreLimits) -> Store {
        let store = store_with(limits);
        workspace(&store, "workspace:1", &principal("a"));
        workspace(&store, "workspace:2", &principal("a"));
        workspace(&store, "workspace:b", &principal("b"));
        store
    }

    #[test]
    fn retries_are_recognized_and_conflicts_refused() {
        let store = fixture(StoreLimits::default());
        let (a, b) = (principal("a"), principal("b"));
        let other_hash = NewCommand {
            args_hash: [8; 32],
            ..new_command("command:1", &a, Some("k1"))
        };
        let other_method = NewCommand {
            method: "browser.type".to_owned(),
            ..new_command("command:3", &a, Some("k1"))
        };
        let other_workspace = NewCommand {
            workspace_id: Some("workspace:2".to_owned()),
            ..new_command("command:4", &a, Some("k1"))
        };
        let connection_tool = NewCommand {
            workspace_id: None,
            ..new_command("command:5", &a, Some("k1"))
        };
        let connection_tool_retry = NewCommand {
            workspace_id: None,
            ..new_command("command:6", &a, Some("k1"))
        };
        let b_same_key = NewCommand {
            workspace_id: Some("workspace:b".to_owned()),
            ..new_command("command:7", &b, Some("k1"))
        };
        let b_same_id = NewCommand {
            workspace_id: Some("workspace:b".to_owned()),
            ..new_command("command:1", &b, Some("k9"))
        };
        let cases = [
            (
                new_command("command:1", &a, Some("k1")),
                "inserted command:1",
            ),
            (
                new_command("command:1", &a, Some("k1")),
                "duplicate of command:1",
            ),
            (new_command("command:1", &a, None), "duplicate of command:1"),
            (other_hash, "IdempotencyConflict"),
            (
                new_command("command:2", &a, Some("k1")),
                "duplicate of command:1",
            ),
            (other_method, "IdempotencyConflict"),
            (other_workspace, "inserted command:4"),
            (connection_tool, "inserted command:5"),
            (connection_tool_retry, "duplicate of command:5"),
            (b_same_key, "inserted command:7"),
            (b_same_id, "IdempotencyConflict"),
            (new_command("command:8", &a, None), "inserted command:8"),
        ];
        for (command, expect) in cases {
            let actual = outcome(store.insert_command(&command), render_insert);
            assert_eq!(actual, expect, "{command:?}");
        }
        // Another Principal never sees the row.
        assert_eq!(store.get_command(&b, "command:1").unwrap(), None);
        let own = store.get_command(&a, "command:1").unwrap().map(render);
        assert_eq!(
            own.as_deref(),
            Some("command:1 accepted dispatched=None completed=None")
        );
    }

    #[test]
    fn cancel_before_dispatch_prevents_it() {
        let store = fixture(StoreLimits::default());
        let a = principal("a");
        store
            .insert_command(&new_command("command:1", &a, None))
            .unwrap();
        let cancelled = store
            .request_cancel(&a, "command:1", 20)
            .unwrap()
            .map(render);
        let expect = "command:1 cancelled dispatched=None completed=Some(20) cancel-requested";
        assert_eq!(cancelled.as_deref(), Some(expect));
        assert_eq!(
            outcome(store.mark_dispatched("command:1", 30), render),
            expect
        );
        let completed = store.complete_command(
            "command:1",
            CommandStatus::Completed,
            Some("{}".to_owned()),
            None,
            40,
        );
        assert_eq!(outcome(completed, render), expect);
        let again = store
            .request_cancel(&a, "command:1", 50)
            .unwrap()
            .map(render);
        assert_eq!(again.as_deref(), Some(expect));
    }

    #[test]
    fn cancel_after_dispatch_only_requests() {
        let store = fixture(StoreLimits::default());
        let a = principal("a");
        store
            .insert_command(&new_command("command:1", &a, None))
            .unwrap();
        let dispatched = store.mark_dispatched("command:1", 15);
        assert_eq!(
            outcome(dispatched, render),
            "command:1 dispatched dispatched=Some(15) completed=None"
        );
        assert_eq!(
            store
                .request_cancel(&principal("b"), "command:1", 20)
                .unwrap(),
            None
        );
        let requested = store
            .request_cancel(&a, "command:1", 20)
            .unwrap()
            .map(render);
        assert_eq!(
            requested.as_deref(),
            Some("command:1 dispatched dispatched=Some(15) completed=None cancel-requested")
        );
        let completed = store
            .complete_command(
                "command:1",
                CommandStatus::UnknownOutcome,
                None,
                Some("{\"code\":-32000}".to_owned()),
                40,
            )
            .unwrap();
        assert_eq!(
            render(completed.clone()),
            "command:1 unknown_outcome dispatched=Some(15) completed=Some(40) cancel-requested"
        );
        assert_eq!(completed.error_json.as_deref(), Some("{\"code\":-32000}"));
        assert_eq!(completed.result_json, None);
    }

    #[test]
    fn status_errors() {
        let store = fixture(StoreLimits::default());
        store
            .insert_command(&new_command("command:1", &principal("a"), None))
            .unwrap();
        let cases = [
            (
                outcome(
                    store.complete_command("command:1", CommandStatus::Dispatched, None, None, 1),
                    render,
                ),
                "StatusNotTerminal { status: \"dispatched\" }",
            ),
            (
                outcome(
                    store.complete_command("command:none", CommandStatus::Completed, None, None, 1),
                    render,
                ),
                "CommandNotFound",
            ),
            (
                outcome(store.mark_dispatched("command:none", 1), render),
                "CommandNotFound",
            ),
        ];
        for (actual, expect) in cases {
            assert_eq!(actual, expect);
        }
    }

    #[test]
    fn oldest_terminal_commands_are_pruned_per_principal() {
        let store = fixture(StoreLimits {
            max_terminal_commands_per_principal: 3,
            ..StoreLimits::default()
        });
        let (a, b) = (principal("a"), principal("b"));
        store
            .insert_command(&new_command("command:open", &a, None))
            .unwrap();
        let b_command = NewCommand {
            workspace_id: Some("workspace:b".to_owned()),
            ..new_command("command:b", &b, None)
        };
        store.insert_command(&b_command).unwrap();
        store
            .complete_command("command:b", CommandStatus::Completed, None, None, 1)
            .unwrap();
        // Completed out of acceptance order: the completion time decides.
        for (n, completed_at) in [(1, 50), (2, 10), (3, 40), (4, 20), (5, 30)] {
            let id = format!("command:{n}");
            store.insert_command(&new_command(&id, &a, None)).unwrap();
            store
                .complete_command(&id, CommandStatus::Completed, None, None, completed_at)
                .unwrap();
        }
        let kept: Vec<bool> = [
            "command:1",
            "command:2",
            "command:3",
            "command:4",
            "command:5",
        ]
        .iter()
        .map(|id| store.get_command(&a, id).unwrap().is_some())
        .collect();
        assert_eq!(kept, [true, false, true, false, true]);
        // Non-terminal Commands and other Principals' are untouched.
        assert!(store.get_command(&a, "command:open").unwrap().is_some());
        assert!(store.get_command(&b, "command:b").unwrap().is_some());
    }

    #[test]
    fn unknown_principal_sees_nothing() {
        let store = store();
        assert_eq!(
            store.get_command(&principal("x"), "command:1").unwrap(),
            None
        );
        assert_eq!(
            store
                .request_cancel(&principal("x"), "command:1", 1)
                .unwrap(),
            None
        );
    }
}
