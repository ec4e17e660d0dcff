//! The `Store` handle: opening the shared in-memory database, the connection
//! pool, migrations and the transaction helpers every other store file uses.
//! Owns connection setup and lifetime; holds no domain SQL (that lives in the
//! per-table files) and never sees protocol or CDP types.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use ring::rand::{SecureRandom as _, SystemRandom};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use super::debug::DebugConnection;
use super::error::StoreError;
use super::limits::StoreLimits;

/// Pooled connections. Store calls are short and run on `spawn_blocking`
/// threads; 8 lets readers overlap a writer on a small machine without
/// keeping many idle page caches.
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

/// Random bytes in the memdb name, so two Stores in one process (tests,
/// benches) never share a database.
const DATABASE_NAME_RANDOM_BYTES: usize = 16;

/// The embedded migrations, applied in order; `PRAGMA user_version` is the
/// number already applied. Append only.
const MIGRATIONS: &[&str] = &[include_str!("../../migrations/0001_init.sql")];

/// Cheap, cloneable handle to the Broker's in-memory database.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    /// Connections used by every typed call.
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
    pub fn open(limits: StoreLimits) -> Result<Store, StoreError> {
        let uri = format!("file:/browser-pilot-{}?vfs=memdb", random_hex()?);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;

        let mut keeper = Connection::open_with_flags(&uri, flags)?;
        configure_connection(&keeper)?;
        apply_migrations(&mut keeper)?;
        let debug_connection = DebugConnection::new(keeper)?;

        let manager = SqliteConnectionManager::file(&uri)
            .with_flags(flags)
            .with_init(|connection| configure_connection(connection));
        let pool = r2d2::Pool::builder()
            .max_size(POOL_MAX_CONNECTIONS)
            .connection_timeout(POOL_CHECKOUT_TIMEOUT)
            .test_on_check_out(false)
            .build(manager)?;

        Ok(Store {
            inner: Arc::new(StoreInner {
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

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction and commits if it
    /// returns `Ok`. Taking the write lock up front means a transaction never
    /// has to upgrade a read lock, which SQLite reports as `SQLITE_BUSY`
    /// without consulting the busy handler.
    pub(super) fn write<T>(
        &self,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.inner.pool.get()?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = body(&transaction)?;
        transaction.commit()?;
        Ok(value)
    }

    /// Like `write`, but commits also when `body` reports a domain error, so
    /// a call can both change rows and fail (e.g. delete an expired Lease
    /// and answer `LeaseExpired`).
    pub(super) fn write_then<T>(
        &self,
        body: impl FnOnce(&Transaction<'_>) -> Result<Result<T, StoreError>, StoreError>,
    ) -> Result<T, StoreError> {
        self.write(body)?
    }

    /// Runs `body` in a deferred (read) transaction, so several statements
    /// see one snapshot.
    pub(super) fn read<T>(
        &self,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.inner.pool.get()?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let value = body(&transaction)?;
        transaction.commit()?;
        Ok(value)
    }

    /// The debug connection, for `debug.rs` only.
    pub(super) fn debug_connection(&self) -> &Mutex<DebugConnection> {
        &self.inner.debug_connection
    }
}

/// Per-connection settings: busy handling, foreign keys, memory temp store
/// and a statement cache large enough for every store statement.
fn configure_connection(connection: &Connection) -> Result<(), rusqlite::Error> {
    connection.busy_handler(Some(on_busy))?;
    connection.pragma_update(None, "foreign_keys", true)?;
    // 2 = MEMORY: sorts and temp tables never touch the disk.
    connection.pragma_update(None, "temp_store", 2)?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(())
}

/// Busy handler: yield, then sleep briefly, then sleep longer, giving up
/// (returning false, so `SQLITE_BUSY` surfaces) after about `BUSY_TIMEOUT`.
fn on_busy(attempt: i32) -> bool {
    if attempt < BUSY_YIELD_ATTEMPTS {
        std::thread::yield_now();
        return true;
    }
    if attempt < BUSY_YIELD_ATTEMPTS + BUSY_SHORT_SLEEP_ATTEMPTS {
        std::thread::sleep(BUSY_SHORT_SLEEP);
        return true;
    }
    let slept_short = BUSY_SHORT_SLEEP * BUSY_SHORT_SLEEP_ATTEMPTS.unsigned_abs();
    let long_attempts = attempt - BUSY_YIELD_ATTEMPTS - BUSY_SHORT_SLEEP_ATTEMPTS;
    let slept_long = BUSY_LONG_SLEEP * long_attempts.unsigned_abs();
    if slept_short + slept_long >= BUSY_TIMEOUT {
        return false;
    }
    std::thread::sleep(BUSY_LONG_SLEEP);
    true
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
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(DATABASE_NAME_RANDOM_BYTES * 2);
    for byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    Ok(hex)
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
