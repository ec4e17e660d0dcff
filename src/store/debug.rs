//! The read-only debug query (`browser-pilot debug sql`): exactly one
//! statement, on the Store's dedicated keeper connection, which is locked
//! down three ways (`PRAGMA query_only`, an authorizer that refuses every
//! write, DDL, ATTACH/DETACH, transaction and value-setting PRAGMA, and
//! `Statement::readonly`). Owns that connection's policy; it never runs
//! typed store SQL and never formats output for humans. Command results read
//! as NULL (`HIDDEN_COLUMNS`): they may hold capability-gated data.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode};

use super::db::Store;
use super::error::StoreError;
use super::model::{QueryRows, SqlValue};

/// Rows returned at most; a debug look never needs the whole journal and
/// the result must fit one CLI response.
pub const DEBUG_QUERY_MAX_ROWS: usize = 10_000;

/// Wall-clock budget of one debug query. It holds a read lock that blocks
/// writers' commits, so it must stay well under `db::BUSY_TIMEOUT`.
pub const DEBUG_QUERY_TIME_BUDGET: Duration = Duration::from_secs(2);

/// SQLite virtual-machine steps between two budget checks: cheap enough to
/// be invisible, frequent enough to stop within about a millisecond.
const PROGRESS_CHECK_STEPS: i32 = 10_000;

/// PRAGMAs that only report state, allowed without an argument.
const READ_ONLY_PRAGMAS: &[&str] = &[
    "application_id",
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "foreign_key_check",
    "foreign_key_list",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "journal_mode",
    "module_list",
    "page_count",
    "page_size",
    "pragma_list",
    "query_only",
    "quick_check",
    "schema_version",
    "table_info",
    "table_list",
    "table_xinfo",
    "user_version",
];

/// PRAGMAs whose argument names what to report on rather than setting a
/// value (`PRAGMA table_info(events)`).
const PRAGMAS_WITH_READ_ARGUMENT: &[&str] = &[
    "foreign_key_check",
    "foreign_key_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "quick_check",
    "table_info",
    "table_list",
    "table_xinfo",
];

/// The keeper connection in its locked-down state.
pub(super) struct DebugConnection {
    connection: Connection,
    /// Why the authorizer last refused, for a precise error message.
    last_refusal: Arc<Mutex<Option<String>>>,
}

impl DebugConnection {
    /// Locks `connection` down for read-only use. Call after migrations.
    pub(super) fn new(connection: Connection) -> Result<DebugConnection, StoreError> {
        connection.pragma_update(None, "query_only", true)?;
        let last_refusal = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&last_refusal);
        connection.authorizer(Some(move |context: AuthContext<'_>| {
            match judge(context.action) {
                Ok(()) if hides(context.action) => Authorization::Ignore,
                Ok(()) => Authorization::Allow,
                Err(reason) => {
                    // Keep the first refusal: later ones follow from it.
                    lock(&slot).get_or_insert(reason);
                    Authorization::Deny
                }
            }
        }))?;
        Ok(DebugConnection {
            connection,
            last_refusal,
        })
    }

    fn query(&mut self, sql: &str) -> Result<QueryRows, StoreError> {
        *lock(&self.last_refusal) = None;
        let mut statement = match self.connection.prepare(sql) {
            Ok(statement) => statement,
            Err(rusqlite::Error::MultipleStatement) => {
                return Err(StoreError::ReadOnlyViolation(
                    "exactly one statement is allowed".to_owned(),
                ));
            }
            Err(error)
                if error.sqlite_error_code()
                    == Some(ErrorCode::AuthorizationForStatementDenied) =>
            {
                let reason = lock(&self.last_refusal)
                    .take()
                    .unwrap_or_else(|| "not authorized".to_owned());
                return Err(StoreError::ReadOnlyViolation(reason));
            }
            Err(error) => return Err(error.into()),
        };
        if !statement.readonly() {
            return Err(StoreError::ReadOnlyViolation(
                "the statement could write".to_owned(),
            ));
        }
        if statement.column_count() == 0 {
            return Err(StoreError::ReadOnlyViolation(
                "the statement returns no rows".to_owned(),
            ));
        }
        let columns: Vec<String> = statement
            .column_names()
            .into_iter()
            .map(str::to_owned)
            .collect();

        let deadline = Instant::now() + DEBUG_QUERY_TIME_BUDGET;
        self.connection.progress_handler(
            PROGRESS_CHECK_STEPS,
            Some(move || Instant::now() >= deadline),
        )?;
        let collected = collect_rows(&mut statement, columns.len());
        drop(statement);
        self.connection.progress_handler(0, None::<fn() -> bool>)?;

        let (rows, truncated) = match collected {
            Ok(collected) => collected,
            Err(error) if error.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) => {
                return Err(StoreError::DebugQueryTimeout);
            }
            Err(error) => return Err(error.into()),
        };
        Ok(QueryRows {
            columns,
            rows,
            truncated,
        })
    }
}

impl Store {
    /// Runs one read-only SQL statement for debugging and returns at most
    /// `DEBUG_QUERY_MAX_ROWS` rows. Anything that could change the database
    /// (or attach another) is refused with `ReadOnlyViolation`.
    pub fn query_readonly(&self, sql: &str) -> Result<QueryRows, StoreError> {
        lock(self.debug_connection()).query(sql)
    }
}

fn collect_rows(
    statement: &mut rusqlite::Statement<'_>,
    width: usize,
) -> rusqlite::Result<(Vec<Vec<SqlValue>>, bool)> {
    let mut rows = Vec::new();
    let mut cursor = statement.query([])?;
    while let Some(row) = cursor.next()? {
        if rows.len() == DEBUG_QUERY_MAX_ROWS {
            return Ok((rows, true));
        }
        let values = (0..width)
            .map(|index| row.get_ref(index).map(sql_value))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.push(values);
    }
    Ok((rows, false))
}

fn sql_value(value: ValueRef<'_>) -> SqlValue {
    match value {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(integer) => SqlValue::Integer(integer),
        ValueRef::Real(real) => SqlValue::Real(real),
        ValueRef::Text(text) => SqlValue::Text(String::from_utf8_lossy(text).into_owned()),
        ValueRef::Blob(blob) => SqlValue::Blob(blob.to_vec()),
    }
}

/// Columns a debug query reads as NULL: Command results can carry what only a capability
/// grants (cookie values, response bodies, eval values), and `debug sql` answers any process
/// of the user, whatever its capabilities. Status, times and errors stay readable.
const HIDDEN_COLUMNS: &[(&str, &str)] = &[("commands", "result_json")];

fn hides(action: AuthAction<'_>) -> bool {
    match action {
        AuthAction::Read {
            table_name,
            column_name,
        } => HIDDEN_COLUMNS.contains(&(table_name, column_name)),
        _ => false,
    }
}

/// The authorizer's policy: reads and functions only.
fn judge(action: AuthAction<'_>) -> Result<(), String> {
    match action {
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Recursive => Ok(()),
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => judge_pragma(pragma_name, pragma_value),
        AuthAction::Attach { .. } => Err("ATTACH is not allowed".to_owned()),
        AuthAction::Detach { .. } => Err("DETACH is not allowed".to_owned()),
        AuthAction::Insert { table_name }
        | AuthAction::Update { table_name, .. }
        | AuthAction::Delete { table_name }
            if table_name.starts_with("sqlite_") =>
        {
            Err("schema changes are not allowed".to_owned())
        }
        AuthAction::Insert { table_name } => {
            Err(format!("INSERT into {table_name} is not allowed"))
        }
        AuthAction::Update { table_name, .. } => {
            Err(format!("UPDATE of {table_name} is not allowed"))
        }
        AuthAction::Delete { table_name } => {
            Err(format!("DELETE from {table_name} is not allowed"))
        }
        other => Err(format!("only reads are allowed, not {other:?}")),
    }
}

fn judge_pragma(name: &str, value: Option<&str>) -> Result<(), String> {
    let name = name.to_ascii_lowercase();
    let allowed = match value {
        None => READ_ONLY_PRAGMAS.contains(&name.as_str()),
        Some(_) => PRAGMAS_WITH_READ_ARGUMENT.contains(&name.as_str()),
    };
    match (allowed, value) {
        (true, _) => Ok(()),
        (false, None) => Err(format!("PRAGMA {name} is not allowed")),
        (false, Some(value)) => Err(format!("PRAGMA {name} = {value} is not allowed")),
    }
}

/// Locks a mutex, recovering from poisoning: the guarded state (a
/// connection, a message slot) stays valid after a panic elsewhere.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{event, outcome, principal, store, workspace};
    use super::super::{QueryRows, SqlValue, Store};
    use super::DEBUG_QUERY_MAX_ROWS;

    fn render(rows: QueryRows) -> String {
        format!("{:?} {:?}", rows.columns, rows.rows)
    }

    fn check(store: &Store, sql: &str, expect: &str) {
        let actual = outcome(store.query_readonly(sql), render);
        assert_eq!(actual, expect, "{sql}");
    }

    fn fixture() -> Store {
        let store = store();
        workspace(&store, "workspace:1", &principal("a"));
        store.append_event(&event("workspace:1", 1)).unwrap();
        store
    }

    #[test]
    fn writes_and_escapes_are_refused() {
        let store = fixture();
        let cases = [
            (
                "INSERT INTO tombstones (workspace_id, principal_id, released_at) VALUES ('w', 1, 1)",
                "ReadOnlyViolation(\"INSERT into tombstones is not allowed\")",
            ),
            (
                "DELETE FROM events",
                "ReadOnlyViolation(\"DELETE from events is not allowed\")",
            ),
            (
                "UPDATE workspaces SET last_active_at = 0",
                "ReadOnlyViolation(\"UPDATE of workspaces is not allowed\")",
            ),
            (
                "ATTACH DATABASE ':memory:' AS other",
                "ReadOnlyViolation(\"ATTACH is not allowed\")",
            ),
            (
                "DETACH DATABASE main",
                "ReadOnlyViolation(\"DETACH is not allowed\")",
            ),
            (
                "PRAGMA user_version=5",
                "ReadOnlyViolation(\"PRAGMA user_version = 5 is not allowed\")",
            ),
            (
                "PRAGMA query_only = OFF",
                "ReadOnlyViolation(\"PRAGMA query_only = OFF is not allowed\")",
            ),
            (
                "PRAGMA optimize",
                "ReadOnlyViolation(\"PRAGMA optimize is not allowed\")",
            ),
            (
                "SELECT 1; SELECT 2",
                "ReadOnlyViolation(\"exactly one statement is allowed\")",
            ),
            (
                "SELECT 1; DELETE FROM events",
                "ReadOnlyViolation(\"DELETE from events is not allowed\")",
            ),
            (
                "CREATE TABLE t (x)",
                "ReadOnlyViolation(\"schema changes are not allowed\")",
            ),
            (
                "DROP TABLE events",
                "ReadOnlyViolation(\"schema changes are not allowed\")",
            ),
            (
                "BEGIN",
                "ReadOnlyViolation(\"only reads are allowed, not Transaction { operation: Begin }\")",
            ),
            ("", "ReadOnlyViolation(\"the statement returns no rows\")"),
        ];
        for (sql, expect) in cases {
            check(&store, sql, expect);
        }
        // Nothing changed, and typed calls still work.
        check(
            &store,
            "PRAGMA user_version",
            "[\"user_version\"] [[Integer(6)]]",
        );
        check(
            &store,
            "SELECT count(*) FROM events",
            "[\"count(*)\"] [[Integer(1)]]",
        );
        assert_eq!(
            store
                .append_event(&event("workspace:1", 2))
                .unwrap()
                .sequence,
            2
        );
    }

    #[test]
    fn reads_work() {
        let store = fixture();
        check(
            &store,
            "SELECT workspace_id, created_at, NULL AS empty, 1.5 AS real, x'0102' AS blob
             FROM workspaces",
            "[\"workspace_id\", \"created_at\", \"empty\", \"real\", \"blob\"] \
             [[Text(\"workspace:1\"), Integer(10), Null, Real(1.5), Blob([1, 2])]]",
        );
        check(
            &store,
            "SELECT event_type, payload_json FROM events -- trailing comment",
            "[\"event_type\", \"payload_json\"] [[Text(\"navigation\"), Text(\"{\\\"n\\\":1}\")]]",
        );
        let columns = store.query_readonly("PRAGMA table_info(events)").unwrap();
        assert_eq!(columns.rows.len(), 13);
        assert_eq!(
            columns.rows[0][1],
            SqlValue::Text("workspace_key".to_owned())
        );
    }

    #[test]
    fn rows_are_capped() {
        let store = store();
        let rows = store
            .query_readonly(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10005)
                 SELECT x FROM n",
            )
            .unwrap();
        assert_eq!(rows.rows.len(), DEBUG_QUERY_MAX_ROWS);
        assert!(rows.truncated);
        let few = store.query_readonly("SELECT 1").unwrap();
        assert!(!few.truncated);
    }

    #[test]
    fn runaway_queries_are_interrupted() {
        let store = store();
        let endless = store.query_readonly(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n",
        );
        assert_eq!(outcome(endless, render), "DebugQueryTimeout");
        check(&store, "SELECT 2", "[\"2\"] [[Integer(2)]]");
    }
}
