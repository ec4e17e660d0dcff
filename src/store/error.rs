//! `StoreError`: every way a store call can fail. Owns the error enum only;
//! mapping these to agent-visible codes belongs to the broker's one error
//! table, never here.

/// Why a store call failed. Domain variants first; `Sqlite` and `Pool` are
/// infrastructure failures (never `SQLITE_BUSY`/`SQLITE_LOCKED`: the busy
/// handler absorbs contention, see the module doc's `## Concurrency`).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The Workspace is not active, or belongs to another Principal.
    #[error("workspace not found")]
    WorkspaceNotFound,
    /// No live Connection with that id.
    #[error("connection not found")]
    ConnectionNotFound,
    /// No Lease with that id in that Workspace.
    #[error("lease not found")]
    LeaseNotFound,
    /// The Lease exists but another Connection owns it.
    #[error("lease is owned by another connection")]
    LeaseNotOwned,
    /// The Lease reached its `expires_at`.
    #[error("lease expired")]
    LeaseExpired,
    /// A heartbeat or release found the Lease already expired and ended it: the deleted row, so
    /// the caller journals `lease.expired` exactly as the sweep would have.
    #[error("lease expired")]
    LeaseEnded(Box<super::LeaseRow>),
    /// No Command with that id.
    #[error("command not found")]
    CommandNotFound,
    /// The `clientKey` already names an active Workspace on another browser.
    #[error("client key already names a workspace bound to another browser")]
    ClientKeyConflict,
    /// A bound from `StoreLimits` would be exceeded.
    #[error("limit exceeded: {what} (at most {limit})")]
    LimitExceeded {
        /// Which bound, in snake_case (e.g. `workspaces_per_principal`).
        what: &'static str,
        /// The configured bound.
        limit: u32,
    },
    /// A command id or idempotency key was reused for a different request.
    #[error("command id or idempotency key reused for a different request")]
    IdempotencyConflict,
    /// `complete_command` was given a status that is not terminal.
    #[error("command status {status} is not terminal")]
    StatusNotTerminal {
        /// The snake_case status that was passed.
        status: &'static str,
    },
    /// A `u64` does not fit SQLite's signed 64-bit integer.
    #[error("{what} is out of range for storage")]
    ValueOutOfRange {
        /// Which value overflowed.
        what: &'static str,
    },
    /// The debug query was refused (not one read-only statement).
    #[error("read-only violation: {0}")]
    ReadOnlyViolation(String),
    /// The debug query ran past its time budget and was interrupted.
    #[error("debug query exceeded its time budget")]
    DebugQueryTimeout,
    /// The operating system's random number generator failed.
    #[error("system random number generator failed")]
    Random,
    /// The store could not run the call: its unit of work panicked (the unit's writes are
    /// rolled back) or the store's thread has stopped. Never retried by the store.
    #[error("the store could not run this call")]
    Unavailable,
    /// The writer's group transaction did not begin or commit, so this unit's writes (and its
    /// batch's) are not in the database.
    #[error("group commit failed: {0}")]
    GroupCommit(String),
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The connection pool failed (e.g. every connection busy for too long).
    #[error("connection pool: {0}")]
    Pool(#[from] r2d2::Error),
}
