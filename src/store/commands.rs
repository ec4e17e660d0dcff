//! Command rows: idempotent insertion, lookup, the status transitions
//! (dispatch, cancel, completion) and pruning of old terminal Commands per
//! Principal. Owns the `commands` table; it does not hash arguments or decide
//! deadlines (the broker does) and never interprets result or error JSON.

use rusqlite::{OptionalExtension as _, Transaction};

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
    transaction: &Transaction<'_>,
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
    transaction: &Transaction<'_>,
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
