//! Command rows: idempotent insertion, lookup, the status transitions
//! (dispatch, cancel, completion) and pruning of old terminal Commands per
//! Principal. Owns the `commands` table; it does not hash arguments or decide
//! deadlines (the broker does) and never interprets result or error JSON.

use rusqlite::{Connection, OptionalExtension as _};

use super::db::{Store, column_u64, to_sql_u64};
use super::error::StoreError;
use super::limits::StoreLimits;
use super::model::{CommandRow, CommandStatus, InsertCommand, NewCommand, PrincipalKey};
use super::principals::{ensure_principal, find_principal};
use super::workspaces::{mark_active, owns_workspace};

/// Columns read by `command_from_row`, in order.
macro_rules! command_columns {
    () => {
        "command_id, workspace_id, connection_id, method, generation, idempotency_key,
         args_hash, status, accepted_at, deadline_at, dispatched_at, completed_at,
         mutating, cancellation_requested, result_json, error_json, result_dropped"
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
        result_dropped: row.get(16)?,
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
        .query_row([id], |row| Ok((row.get(17)?, command_from_row(row)?)))
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
            if let Some(workspace_id) = &command.workspace_id {
                mark_active(transaction, workspace_id, command.accepted_at)?;
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
        let retention = Retention::of(self.limits());
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
                    retention.prune(transaction, principal_id, None)?;
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
    /// `max_terminal_commands_per_principal` and drops the oldest results
    /// beyond `max_result_bytes_per_principal` (never this Command's).
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
        let retention = Retention::of(self.limits());
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
            retention.prune(transaction, principal_id, Some(id))?;
            Ok(completed)
        })
    }
}

/// The bounds on one Principal's terminal Commands, from `StoreLimits`.
#[derive(Clone, Copy)]
struct Retention {
    commands: i64,
    result_bytes: i64,
}

impl Retention {
    fn of(limits: &StoreLimits) -> Retention {
        Retention {
            commands: i64::from(limits.max_terminal_commands_per_principal),
            result_bytes: i64::try_from(limits.max_result_bytes_per_principal).unwrap_or(i64::MAX),
        }
    }

    /// Brings the Principal back within both bounds: deletes its oldest
    /// terminal Commands (by completion time, then acceptance order) while
    /// over the count, then drops its oldest results while over the bytes,
    /// stopping at `keep_result` (the Command just completed). The totals are
    /// kept by triggers (migration 0002), so each step is an index lookup;
    /// one completion usually takes one step of each kind.
    fn prune(
        self,
        transaction: &Connection,
        principal_id: i64,
        keep_result: Option<&str>,
    ) -> Result<(), StoreError> {
        loop {
            let (commands, result_bytes): (i64, i64) = transaction
                .prepare_cached(
                    "SELECT terminal_commands, result_bytes FROM principals
                     WHERE principal_id = ?1",
                )?
                .query_row([principal_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
            if commands > self.commands {
                let deleted = transaction
                    .prepare_cached(
                        "DELETE FROM commands WHERE rowid =
                           (SELECT rowid FROM commands
                             WHERE principal_id = ?1 AND completed_at IS NOT NULL
                             ORDER BY completed_at, rowid LIMIT 1)",
                    )?
                    .execute([principal_id])?;
                // Totals that disagreed with the rows must not spin the writer.
                if deleted == 0 {
                    tracing::error!(commands, "store: terminal Command total without rows");
                    return Ok(());
                }
            } else if result_bytes > self.result_bytes {
                let dropped = transaction
                    .prepare_cached(
                        "UPDATE commands SET result_json = NULL, result_dropped = 1 WHERE rowid =
                           (SELECT rowid FROM commands
                             WHERE principal_id = ?1 AND result_json IS NOT NULL
                             ORDER BY completed_at, rowid LIMIT 1)
                           AND command_id IS NOT ?2",
                    )?
                    .execute((principal_id, keep_result))?;
                if dropped == 0 {
                    return Ok(());
                }
            } else {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{outcome, principal, store, store_with, workspace};
    use super::super::{
        CommandRow, CommandStatus, InsertCommand, NewCommand, PrincipalKey, ReleaseReason, Store,
        StoreLimits,
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
        completed_for_b(&store, None);
        // Completed out of acceptance order: the completion time decides.
        for (n, completed_at) in [(1, 50), (2, 10), (3, 40), (4, 20), (5, 30)] {
            let id = format!("command:{n}");
            complete_new(&store, &new_command(&id, &a, None), None, completed_at);
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

    /// Completes a new Command `command` at `completed_at` with `result`.
    fn complete_new(
        store: &Store,
        command: &NewCommand,
        result: Option<String>,
        completed_at: i64,
    ) {
        store.insert_command(command).unwrap();
        store
            .complete_command(
                &command.id,
                CommandStatus::Completed,
                result,
                None,
                completed_at,
            )
            .unwrap();
    }

    /// Completes a new Command of `owner` in `workspace:1` with `result`.
    fn completed(store: &Store, id: &str, owner: &PrincipalKey, result: Option<String>) {
        complete_new(store, &new_command(id, owner, None), result, 20);
    }

    /// Completes `command:b` of Principal `b` in its own Workspace with `result`.
    fn completed_for_b(store: &Store, result: Option<String>) {
        let command = NewCommand {
            workspace_id: Some("workspace:b".to_owned()),
            ..new_command("command:b", &principal("b"), None)
        };
        complete_new(store, &command, result, 1);
    }

    /// The Principal's maintained totals beside a count and sum over its rows.
    fn totals(store: &Store, owner: &PrincipalKey) -> ((i64, i64), (i64, i64)) {
        store
            .read(|transaction| {
                let principal_id = super::find_principal(transaction, owner)?.unwrap();
                let kept = transaction.query_row(
                    "SELECT terminal_commands, result_bytes FROM principals
                     WHERE principal_id = ?1",
                    [principal_id],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )?;
                let counted = transaction.query_row(
                    "SELECT count(*), ifnull(sum(octet_length(result_json)), 0) FROM commands
                     WHERE principal_id = ?1 AND completed_at IS NOT NULL",
                    [principal_id],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )?;
                Ok((kept, counted))
            })
            .unwrap()
    }

    #[test]
    fn oldest_results_are_dropped_beyond_the_byte_budget_and_their_records_kept() {
        let store = fixture(StoreLimits {
            max_result_bytes_per_principal: 100,
            ..StoreLimits::default()
        });
        let (a, b) = (principal("a"), principal("b"));
        // 40 bytes each, "é" being two: the budget counts bytes, not characters.
        let result = format!("\"{}é\"", "x".repeat(36));
        assert_eq!(result.len(), 40);
        for n in 1..=5 {
            completed(&store, &format!("command:{n}"), &a, Some(result.clone()));
        }
        let failed = NewCommand {
            args_hash: [9; 32],
            ..new_command("command:failed", &a, None)
        };
        store.insert_command(&failed).unwrap();
        let error = Some(format!("{{\"message\":\"{}\"}}", "e".repeat(200)));
        store
            .complete_command(
                "command:failed",
                CommandStatus::Completed,
                None,
                error.clone(),
                20,
            )
            .unwrap();
        completed_for_b(&store, Some(result.clone()));
        let held = |id: &str| {
            let row = store.get_command(&a, id).unwrap().expect("record kept");
            (row.result_json.is_some(), row.result_dropped)
        };
        let states: Vec<_> = (1..=5).map(|n| held(&format!("command:{n}"))).collect();
        assert_eq!(
            states,
            [
                (false, true),
                (false, true),
                (false, true),
                (true, false),
                (true, false)
            ]
        );
        // Errors are neither counted nor dropped; other Principals are untouched.
        let failed = store.get_command(&a, "command:failed").unwrap().unwrap();
        assert_eq!((failed.error_json, failed.result_dropped), (error, false));
        assert!(
            store
                .get_command(&b, "command:b")
                .unwrap()
                .unwrap()
                .result_json
                .is_some()
        );
        assert_eq!(totals(&store, &a), ((6, 80), (6, 80)));

        // A result larger than the budget drops every older one but is kept itself.
        completed(
            &store,
            "command:huge",
            &a,
            Some(format!("\"{}\"", "h".repeat(498))),
        );
        assert_eq!(held("command:4"), (false, true));
        assert_eq!(held("command:5"), (false, true));
        assert_eq!(held("command:huge"), (true, false));
        assert_eq!(totals(&store, &a), ((7, 500), (7, 500)));

        // Releasing a Workspace deletes its Commands by cascade; the totals follow.
        completed(&store, "command:other", &a, Some("1".to_owned()));
        store
            .release_workspace(&a, "workspace:1", 30, ReleaseReason::Released)
            .unwrap();
        assert_eq!(totals(&store, &a), ((0, 0), (0, 0)));
    }

    /// Bytes of the database after two agents' 1,200 Commands, a few in flight each, completed
    /// out of acceptance order with results of 0.6-7 KB (none with `results` false) under a
    /// result budget of `budget` per Principal.
    fn database_after_commands(budget: u64, results: bool) -> i64 {
        let store = fixture(StoreLimits {
            max_result_bytes_per_principal: budget,
            ..StoreLimits::default()
        });
        let owners = [principal("a"), principal("b")];
        let sizes = [600, 4_500, 1_500, 7_000, 3_500, 5_000, 6_000];
        let mut in_flight = std::collections::VecDeque::new();
        for n in 0..1_200_usize {
            let workspace_id = if n % 2 == 0 {
                "workspace:1"
            } else {
                "workspace:b"
            };
            let command = NewCommand {
                workspace_id: Some(workspace_id.to_owned()),
                ..new_command(&format!("command:{n}"), &owners[n % 2], None)
            };
            store.insert_command(&command).unwrap();
            in_flight.push_back((command.id, n));
            if in_flight.len() > 5 {
                // Every third completion overtakes the oldest one in flight.
                let (id, accepted) = in_flight.remove(n % 3).unwrap();
                let result =
                    results.then(|| format!("\"{}\"", "r".repeat(sizes[accepted % sizes.len()])));
                store
                    .complete_command(&id, CommandStatus::Completed, result, None, 1)
                    .unwrap();
            }
        }
        let size = store
            .query_readonly(
                "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
            )
            .unwrap();
        match size.rows.first().and_then(|row| row.first()) {
            Some(crate::store::SqlValue::Integer(bytes)) => *bytes,
            other => panic!("no database size: {other:?}"),
        }
    }

    #[test]
    fn results_at_their_budget_keep_the_database_near_what_it_holds() {
        // The database is a buffer that never shrinks: rows that grow when their result is
        // recorded and shrink when it is dropped must not leave pages mostly empty behind them.
        let budget = 256 * 1024;
        let rows = database_after_commands(budget, false);
        let with_results = database_after_commands(budget, true);
        let results = 2 * i64::try_from(budget).unwrap();
        // 4 KiB pages took 5.7 times the results here, 1 KiB pages 2 times.
        assert!(
            with_results - rows <= results * 5 / 2,
            "{with_results} bytes with results, {rows} without, for {results} bytes of results"
        );
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
