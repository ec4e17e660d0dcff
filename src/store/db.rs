//! The `Store` handle: opening the shared in-memory database, the connection
//! pool, migrations and the transaction helpers every other store file uses.
//! Owns connection setup and lifetime; holds no domain SQL (that lives in the
//! per-table files) and never sees protocol or CDP types.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use ring::rand::{SecureRandom as _, SystemRandom};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::actor::{self, Queue, Writer};
use super::debug::DebugConnection;
use super::error::StoreError;
use super::limits::StoreLimits;

/// Pooled connections, used by the reader threads and by synchronous callers
/// on other threads. Store calls are short; 8 lets readers overlap the writer
/// on a small machine without keeping many idle page caches.
pub const POOL_MAX_CONNECTIONS: u32 = 8;

/// How long a caller waits for a free pooled connection before `Pool` error.
/// Matches the busy budget: a store call never legitimately waits longer.
pub const POOL_CHECKOUT_TIMEOUT: Duration = Duration::from_secs(5);

/// Total time one statement waits for a lock held by another connection
/// before `SQLITE_BUSY` would surface. Transactions last microseconds, so
/// reaching this means something is badly wrong, not ordinary contention.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Busy retries that only yield the thread: a competing transaction usually
/// finishes within a few microseconds, far below a sleep's granularity.
const BUSY_YIELD_ATTEMPTS: i32 = 16;

/// Busy retries (after the yields) that sleep `BUSY_SHORT_SLEEP` each.
const BUSY_SHORT_SLEEP_ATTEMPTS: i32 = 200;

/// Sleep between early busy retries: short, because SQLite's built-in
/// handler would sleep 1 ms and more, hundreds of times a transaction's length.
const BUSY_SHORT_SLEEP: Duration = Duration::from_micros(50);

/// Sleep between late busy retries, once contention is clearly not brief.
const BUSY_LONG_SLEEP: Duration = Duration::from_millis(1);

/// Prepared statements cached per connection; above the number of distinct
/// statements in `src/store/` so hot statements are never evicted.
const STATEMENT_CACHE_CAPACITY: usize = 96;

/// Bytes of one database page. The database is one heap buffer that grows to its high-water
/// mark and never shrinks, so a page left half empty costs memory for the Broker's lifetime. A
/// Command row grows when its result is recorded and shrinks when the result is dropped under the
/// byte budget; with 4 KiB pages that left the `commands` leaves 60% empty (15 MiB for four agents'
/// 3,844 Commands). 1 KiB pages keep the slack per page small (docs/performance.md, "Memory").
const PAGE_SIZE_BYTES: i64 = 1024;

/// Page cache of each connection, in KiB (SQLite's negative `cache_size`). The database is in
/// memory, so a miss is a copy from its buffer; a large cache per connection (SQLite's default is
/// 2,000 KiB, for ten connections) would only hold second copies of the same pages.
const PAGE_CACHE_KIB: i64 = 256;

/// Random bytes in the memdb name, so two Stores in one process (tests,
/// benches) never share a database.
const DATABASE_NAME_RANDOM_BYTES: usize = 16;

/// The embedded migrations, applied in order; `PRAGMA user_version` is the
/// number already applied. Append only.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_command_retention.sql"),
    include_str!("../../migrations/0003_workspace_expiry.sql"),
    include_str!("../../migrations/0004_journal_classes.sql"),
    include_str!("../../migrations/0005_workspace_url_policy.sql"),
    include_str!("../../migrations/0006_workspace_isolation.sql"),
];

/// Numbers Stores within the process, so a writer thread knows whose units it runs.
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// Cheap, cloneable handle to the Broker's in-memory database.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    /// This Store's number in the process (see `NEXT_STORE_ID`).
    id: u64,
    /// The write side (`actor.rs`): the writer thread's queue and the write connection.
    writer: Writer,
    /// The reader threads' queue.
    readers: Queue,
    /// Connections used by the reader threads and synchronous callers.
    pool: r2d2::Pool<SqliteConnectionManager>,
    /// Kept open for the Store's lifetime: a memdb database lives while any
    /// connection to it is open, and the pool may close idle connections.
    /// It doubles as the read-only debug connection (authorizer installed).
    debug_connection: Mutex<DebugConnection>,
    /// The bounds enforced in SQL.
    limits: StoreLimits,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Creates a fresh, empty database with every migration applied.
    /// An `event_journal_size` of 0 is raised to 1: the newest event records
    /// the journal head.
    pub fn open(mut limits: StoreLimits) -> Result<Store, StoreError> {
        limits.event_journal_size = limits.event_journal_size.max(1);
        let uri = format!("file:/browser-pilot-{}?vfs=memdb", random_hex()?);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;

        let mut keeper = Connection::open_with_flags(&uri, flags)?;
        // Before the first table: the page size is fixed once the database has content.
        keeper.pragma_update(None, "page_size", PAGE_SIZE_BYTES)?;
        configure_connection(&keeper)?;
        apply_migrations(&mut keeper)?;
        let debug_connection = DebugConnection::new(keeper)?;
        let write_connection = Connection::open_with_flags(&uri, flags)?;
        configure_connection(&write_connection)?;
        let id = NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed);
        let writer = actor::spawn_writer(id, write_connection)?;
        let readers = actor::spawn_readers()?;

        let manager = SqliteConnectionManager::file(&uri)
            .with_flags(flags)
            .with_init(|connection| configure_connection(connection));
        let pool = r2d2::Pool::builder()
            .max_size(POOL_MAX_CONNECTIONS)
            .connection_timeout(POOL_CHECKOUT_TIMEOUT)
            .test_on_check_out(false)
            // Keep connections (and their statement and page caches) for the
            // Store's lifetime: they are in-process and cost no descriptors.
            .idle_timeout(None)
            .max_lifetime(None)
            .build(manager)?;

        Ok(Store {
            inner: Arc::new(StoreInner {
                id,
                writer,
                readers,
                pool,
                debug_connection: Mutex::new(debug_connection),
                limits,
            }),
        })
    }

    /// The bounds this Store enforces.
    pub fn limits(&self) -> &StoreLimits {
        &self.inner.limits
    }

    /// The write side, for `calls.rs`.
    pub(super) fn writer(&self) -> &Writer {
        &self.inner.writer
    }

    /// The reader threads' queue, for `calls.rs`.
    pub(super) fn readers(&self) -> &Queue {
        &self.inner.readers
    }

    /// Runs `body` as one atomic write: kept if it returns `Ok`, undone if it
    /// returns `Err` or panics. `body` gets the connection inside the open
    /// transaction. On the writer thread that is a savepoint inside the
    /// group transaction (so a failing unit never undoes the others);
    /// elsewhere a `BEGIN IMMEDIATE` transaction on a pooled connection.
    /// Taking the write lock up front means a transaction never has to
    /// upgrade a read lock, which SQLite reports as `SQLITE_BUSY` without
    /// consulting the busy handler.
    pub(super) fn write<T>(
        &self,
        body: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let body =
            match actor::on_writer(self.inner.id, |connection| in_savepoint(connection, body)) {
                Ok(result) => return result,
                Err(unused) => unused,
            };
        let connection = self.inner.pool.get()?;
        let transaction = OpenTransaction::begin(&connection, "BEGIN IMMEDIATE")?;
        let value = body(&connection)?;
        transaction.commit()?;
        Ok(value)
    }

    /// Like `write`, but commits also when `body` reports a domain error, so
    /// a call can both change rows and fail (e.g. delete an expired Lease
    /// and answer `LeaseExpired`).
    pub(super) fn write_then<T>(
        &self,
        body: impl FnOnce(&Connection) -> Result<Result<T, StoreError>, StoreError>,
    ) -> Result<T, StoreError> {
        self.write(body)?
    }

    /// Runs `body` in a deferred (read) transaction, so several statements
    /// see one snapshot. On the writer thread it reads inside the group
    /// transaction, which no other connection can change.
    pub(super) fn read<T>(
        &self,
        body: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let body = match actor::on_writer(self.inner.id, body) {
            Ok(result) => return result,
            Err(unused) => unused,
        };
        let connection = self.inner.pool.get()?;
        let transaction = OpenTransaction::begin(&connection, "BEGIN DEFERRED")?;
        let value = body(&connection)?;
        transaction.commit()?;
        Ok(value)
    }

    /// The debug connection, for `debug.rs` only.
    pub(super) fn debug_connection(&self) -> &Mutex<DebugConnection> {
        &self.inner.debug_connection
    }
}

/// A transaction opened with cached `BEGIN`/`COMMIT` statements (rusqlite's
/// `Transaction` re-parses them on every call, a measurable share of a
/// one-event append). Rolls back on drop unless committed, including when
/// the body returned an error or panicked, so a pooled connection never goes
/// back to the pool inside a transaction.
struct OpenTransaction<'c> {
    connection: &'c Connection,
    committed: bool,
}

impl<'c> OpenTransaction<'c> {
    fn begin(connection: &'c Connection, begin: &str) -> Result<Self, rusqlite::Error> {
        connection.prepare_cached(begin)?.execute([])?;
        Ok(OpenTransaction {
            connection,
            committed: false,
        })
    }

    fn commit(mut self) -> Result<(), rusqlite::Error> {
        self.connection.prepare_cached("COMMIT")?.execute([])?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        if self.committed || self.connection.is_autocommit() {
            return;
        }
        if let Err(error) = self.connection.execute_batch("ROLLBACK") {
            tracing::error!(%error, "store: rollback failed");
        }
    }
}

/// Runs `body` inside a savepoint of the open transaction: released if it
/// returns `Ok`, rolled back to (and released) if it returns `Err` or panics.
pub(super) fn in_savepoint<T>(
    connection: &Connection,
    body: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let savepoint = Savepoint::begin(connection)?;
    let value = body(connection)?;
    savepoint.release()?;
    Ok(value)
}

/// An open savepoint with cached statements; undone on drop unless released.
pub(super) struct Savepoint<'c> {
    connection: &'c Connection,
    released: bool,
}

impl<'c> Savepoint<'c> {
    pub(super) fn begin(connection: &'c Connection) -> Result<Self, rusqlite::Error> {
        connection.prepare_cached("SAVEPOINT unit")?.execute([])?;
        Ok(Savepoint {
            connection,
            released: false,
        })
    }

    pub(super) fn release(mut self) -> Result<(), rusqlite::Error> {
        self.connection
            .prepare_cached("RELEASE unit")?
            .execute([])?;
        self.released = true;
        Ok(())
    }
}

impl Drop for Savepoint<'_> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let undone = self
            .connection
            .prepare_cached("ROLLBACK TO unit")
            .and_then(|mut statement| statement.execute([]))
            .and_then(|_| self.connection.prepare_cached("RELEASE unit"))
            .and_then(|mut statement| statement.execute([]));
        if let Err(error) = undone {
            tracing::error!(%error, "store: rollback to a savepoint failed");
        }
    }
}

/// Per-connection settings: busy handling, foreign keys, memory temp store, a small page cache
/// and a statement cache large enough for every store statement.
fn configure_connection(connection: &Connection) -> Result<(), rusqlite::Error> {
    connection.busy_handler(Some(on_busy))?;
    // Plans never depend on bound values, so cached statements are not
    // re-prepared each time a range bound (a cursor) changes.
    connection.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    connection.pragma_update(None, "foreign_keys", true)?;
    // 2 = MEMORY: sorts and temp tables never touch the disk.
    connection.pragma_update(None, "temp_store", 2)?;
    connection.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(())
}

/// What the busy handler does on one retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BusyWait {
    Yield,
    Sleep(Duration),
    GiveUp,
}

/// The busy policy: yield, then sleep briefly, then sleep longer, and give
/// up once about `BUSY_TIMEOUT` has been spent waiting on this lock.
fn busy_wait(attempt: i32) -> BusyWait {
    if attempt < BUSY_YIELD_ATTEMPTS {
        return BusyWait::Yield;
    }
    if attempt < BUSY_YIELD_ATTEMPTS + BUSY_SHORT_SLEEP_ATTEMPTS {
        return BusyWait::Sleep(BUSY_SHORT_SLEEP);
    }
    let slept_short = BUSY_SHORT_SLEEP * BUSY_SHORT_SLEEP_ATTEMPTS.unsigned_abs();
    let long_attempts = attempt - BUSY_YIELD_ATTEMPTS - BUSY_SHORT_SLEEP_ATTEMPTS;
    let slept_long = BUSY_LONG_SLEEP * long_attempts.unsigned_abs();
    match slept_short + slept_long >= BUSY_TIMEOUT {
        true => BusyWait::GiveUp,
        false => BusyWait::Sleep(BUSY_LONG_SLEEP),
    }
}

/// SQLite's busy callback: `true` retries, `false` surfaces `SQLITE_BUSY`.
fn on_busy(attempt: i32) -> bool {
    match busy_wait(attempt) {
        BusyWait::Yield => {
            std::thread::yield_now();
            true
        }
        BusyWait::Sleep(duration) => {
            std::thread::sleep(duration);
            true
        }
        BusyWait::GiveUp => false,
    }
}

/// Applies every migration not yet counted by `PRAGMA user_version`, each in
/// its own transaction together with the version bump.
fn apply_migrations(connection: &mut Connection) -> Result<(), StoreError> {
    let applied: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        let version = i64::try_from(index + 1).map_err(|_| StoreError::ValueOutOfRange {
            what: "migration version",
        })?;
        if version <= applied {
            continue;
        }
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute_batch(migration)?;
        transaction.pragma_update(None, "user_version", version)?;
        transaction.commit()?;
    }
    Ok(())
}

fn random_hex() -> Result<String, StoreError> {
    let mut bytes = [0u8; DATABASE_NAME_RANDOM_BYTES];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| StoreError::Random)?;
    Ok(crate::hex::encode(&bytes))
}

/// Converts a `u64` for storage in an SQLite INTEGER.
pub(super) fn to_sql_u64(value: u64, what: &'static str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::ValueOutOfRange { what })
}

/// Reads a non-negative INTEGER column as `u64` inside a row mapper.
pub(super) fn column_u64(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<u64> {
    let value: i64 = row.get(index)?;
    u64::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(index, value))
}

/// Reads a small non-negative INTEGER column as `u32` inside a row mapper.
pub(super) fn column_u32(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<u32> {
    let value: i64 = row.get(index)?;
    u32::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(index, value))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::testing::{connect, event, outcome, principal, store, workspace};
    use super::super::{
        CommandStatus, EventPoll, NewCommand, NewLease, ReleaseReason, StoreError, WorkspaceLookup,
    };
    use super::{BUSY_TIMEOUT, BusyWait, MIGRATIONS, busy_wait};

    #[test]
    fn migrations_are_applied_once_and_counted() {
        let store = store();
        let version = store.query_readonly("PRAGMA user_version").unwrap();
        assert_eq!(
            format!("{:?}", version.rows),
            format!("[[Integer({})]]", MIGRATIONS.len())
        );
        let tables = store
            .query_readonly(
                "SELECT group_concat(name, ' ') FROM
                   (SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name)",
            )
            .unwrap();
        assert_eq!(
            format!("{:?}", tables.rows),
            "[[Text(\"artifacts commands connections events leases principals tombstones workspaces\")]]"
        );
        let foreign_keys = store.query_readonly("PRAGMA foreign_keys").unwrap();
        // The debug (keeper) connection is configured like the pooled ones.
        assert_eq!(format!("{:?}", foreign_keys.rows), "[[Integer(1)]]");
    }

    #[test]
    fn stores_do_not_share_a_database() {
        let (first, second) = (store(), store());
        workspace(&first, "workspace:1", &principal("a"));
        let seen = second
            .get_workspace(&principal("a"), "workspace:1")
            .unwrap();
        assert_eq!(seen, WorkspaceLookup::NotFound);
        // Clones share one.
        let clone = first.clone();
        assert!(matches!(
            clone.get_workspace(&principal("a"), "workspace:1").unwrap(),
            WorkspaceLookup::Active(_)
        ));
    }

    #[test]
    fn failed_or_panicking_writes_roll_back() {
        let store = store();
        let insert = "INSERT INTO principals (client_id, instance_id) VALUES ('x', 'y')";
        let failed: Result<(), StoreError> = store.write(|connection| {
            connection.execute(insert, [])?;
            Err(StoreError::WorkspaceNotFound)
        });
        assert!(matches!(failed, Err(StoreError::WorkspaceNotFound)));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.write(|connection| -> Result<(), StoreError> {
                connection.execute(insert, [])?;
                panic!("body panics inside the transaction");
            })
        }));
        assert!(panicked.is_err());
        let count = store
            .query_readonly("SELECT count(*) FROM principals")
            .unwrap();
        assert_eq!(format!("{:?}", count.rows), "[[Integer(0)]]");
        // The connection went back to the pool outside any transaction (the
        // pool hands out the most recently returned one first, so a leaked
        // transaction would make this BEGIN fail).
        workspace(&store, "workspace:after", &principal("a"));
    }

    #[test]
    fn busy_policy_gives_up_after_the_timeout() {
        let mut waited = std::time::Duration::ZERO;
        let mut attempt = 0;
        let mut kinds = Vec::new();
        loop {
            let wait = busy_wait(attempt);
            let kind = match wait {
                BusyWait::Yield => "yield",
                BusyWait::Sleep(duration) if duration < std::time::Duration::from_millis(1) => {
                    "short"
                }
                BusyWait::Sleep(_) => "long",
                BusyWait::GiveUp => "give up",
            };
            if kinds.last() != Some(&kind) {
                kinds.push(kind);
            }
            match wait {
                BusyWait::Yield => {}
                BusyWait::Sleep(duration) => waited += duration,
                BusyWait::GiveUp => break,
            }
            attempt += 1;
        }
        assert_eq!(kinds, ["yield", "short", "long", "give up"]);
        assert!(waited >= BUSY_TIMEOUT, "waited {waited:?}");
        assert!(
            waited < BUSY_TIMEOUT + std::time::Duration::from_millis(2),
            "waited {waited:?}"
        );
    }

    /// Eight threads hammer one shared Workspace and their own ones with
    /// mixed writes and reads; no call may fail (no SQLITE_BUSY/LOCKED), and
    /// the shared journal must stay dense. Odd threads go through the async
    /// API (the writer thread's group commits and the reader threads), even
    /// ones call the synchronous API on pooled connections, so both paths
    /// contend with each other.
    /// One step of the mixed load, run directly or through the async API.
    type Unit = Box<dyn FnOnce(&super::Store) -> Result<Option<u64>, StoreError> + Send>;

    #[test]
    fn concurrent_mixed_load_never_surfaces_busy() {
        const THREADS: usize = 8;
        const ROUNDS: usize = 150;
        let store = store();
        workspace(&store, "workspace:shared", &principal("shared"));

        let failures: Vec<String> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let store = store.clone();
                    scope.spawn(move || -> Result<Vec<u64>, StoreError> {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .build()
                            .map_err(|_| StoreError::Unavailable)?;
                        let via_actor = thread % 2 == 1;
                        let store = &store;
                        let run = |write: bool, unit: Unit| match (via_actor, write) {
                            (false, _) => unit(store),
                            (true, true) => runtime.block_on(store.call(unit)),
                            (true, false) => runtime.block_on(store.call_read(unit)),
                        };
                        let owner = principal(&format!("t{thread}"));
                        let connection_id = format!("connection:{thread}");
                        let own = format!("workspace:{thread}");
                        connect(store, &connection_id, &owner);
                        workspace(store, &own, &owner);
                        let mut shared_sequences = Vec::new();
                        for round in 0..ROUNDS {
                            let n = u64::try_from(round).unwrap_or_default();
                            let sequence = run(
                                true,
                                Box::new(move |store| {
                                    let row = store.append_event(&event("workspace:shared", n))?;
                                    Ok(Some(row.sequence))
                                }),
                            )?;
                            shared_sequences.extend(sequence);
                            let (own_, owner_, id_) =
                                (own.clone(), owner.clone(), connection_id.clone());
                            run(
                                true,
                                Box::new(move |store| {
                                    store.append_events(&[event(&own_, n), event(&own_, n + 1)])?;
                                    let lease = store.create_lease(&NewLease {
                                        id: format!("lease:{thread}:{round}"),
                                        workspace_id: own_.clone(),
                                        connection_id: id_.clone(),
                                        principal: owner_.clone(),
                                        ttl_ms: 60_000,
                                        client_key: Some("k".to_owned()),
                                        now: 10,
                                    })?;
                                    store.heartbeat_lease(
                                        &id_.clone().into(),
                                        &own_.clone().into(),
                                        &lease.id,
                                        20,
                                        20,
                                    )?;
                                    Ok(None)
                                }),
                            )?;
                            run(
                                false,
                                Box::new(|store| {
                                    store.poll_events("workspace:shared", 0, 50, true)?;
                                    Ok(None)
                                }),
                            )?;
                            let (own_, owner_, id_) =
                                (own.clone(), owner.clone(), connection_id.clone());
                            run(
                                true,
                                Box::new(move |store| {
                                    let command_id = format!("command:{thread}:{round}");
                                    store.insert_command(&NewCommand {
                                        id: command_id.clone(),
                                        principal: owner_.clone(),
                                        workspace_id: Some(own_.clone()),
                                        connection_id: id_,
                                        method: "browser.observe".to_owned(),
                                        generation: 1,
                                        idempotency_key: None,
                                        args_hash: [0; 32],
                                        accepted_at: 10,
                                        deadline_at: 100,
                                        mutating: false,
                                    })?;
                                    store.mark_dispatched(&command_id, 11)?;
                                    store.complete_command(
                                        &command_id,
                                        CommandStatus::Completed,
                                        None,
                                        None,
                                        12,
                                    )?;
                                    let scratch = format!("workspace:{thread}:scratch:{round}");
                                    workspace(store, &scratch, &owner_);
                                    store.release_workspace(
                                        &owner_,
                                        &scratch,
                                        30,
                                        ReleaseReason::Released,
                                    )?;
                                    Ok(None)
                                }),
                            )?;
                            let (own_, owner_) = (own.clone(), owner.clone());
                            run(
                                false,
                                Box::new(move |store| {
                                    store.get_workspace(&owner_, &own_)?;
                                    store.inactive_workspaces(0)?;
                                    if round % 25 == 0 {
                                        store.query_readonly("SELECT count(*) FROM events")?;
                                    }
                                    Ok(None)
                                }),
                            )?;
                        }
                        Ok(shared_sequences)
                    })
                })
                .collect();
            let mut failures = Vec::new();
            let mut seen = HashMap::new();
            for worker in workers {
                match worker.join() {
                    Ok(Ok(sequences)) => {
                        if !sequences.windows(2).all(|pair| pair[0] < pair[1]) {
                            failures.push(format!("sequences not increasing: {sequences:?}"));
                        }
                        for sequence in sequences {
                            *seen.entry(sequence).or_insert(0) += 1;
                        }
                    }
                    Ok(Err(error)) => failures.push(format!("{error:?}")),
                    Err(_) => failures.push("worker panicked".to_owned()),
                }
            }
            let total = u64::try_from(THREADS * ROUNDS).unwrap_or_default();
            if seen.len() != THREADS * ROUNDS
                || (1..=total).any(|sequence| seen.get(&sequence) != Some(&1))
            {
                failures.push("shared sequences are not exactly 1..=total".to_owned());
            }
            failures
        });
        assert_eq!(failures, Vec::<String>::new());

        let total = u64::try_from(THREADS * ROUNDS).unwrap_or_default();
        let poll = store.poll_events("workspace:shared", total - 1, 10, true);
        let rendered = outcome(poll, |poll| match poll {
            EventPoll::Page {
                events, has_more, ..
            } => format!("{} {has_more}", events.len()),
            other => format!("{other:?}"),
        });
        assert_eq!(rendered, "1 false");
    }
}
