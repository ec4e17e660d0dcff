//! The Broker's transient state in one in-memory SQLite database: Principals,
//! Connections, Workspaces, Leases, event journals, Commands, Artifact
//! metadata and tombstones. All SQL of the crate lives under this module; the
//! rest of the code calls typed, synchronous functions on a cheap `Store`
//! handle, and async callers reach them only through `Store::call` (writes)
//! and `Store::call_read` (reads), see `calls.rs`. The store never sees
//! a JSON-RPC, CDP or socket type: JSON payloads pass through as `String`
//! text, and ids are the caller's prefixed strings (the store invents none); where a function
//! takes several in a row (a Lease's Connection, Workspace and id) they are typed (`ids.rs`).
//! No logic lives in this file; it declares the submodules and re-exports
//! their public API.
//!
//! ## Schema
//!
//! Defined by `migrations/NNNN_*.sql` (append-only), embedded with
//! `include_str!` and applied once, in order, at `Store::open` against
//! `PRAGMA user_version`. Tables are `STRICT`; most keyed by a text id are
//! `WITHOUT ROWID`. Foreign keys are on and cascade from a Workspace, except
//! for `events` (no foreign key, for append speed; release deletes the
//! journal explicitly).
//!
//! - `principals(principal_id, client_id, instance_id, terminal_commands,
//!   result_bytes)`: one row per
//!   `client.id + client.instanceId`; dropped once nothing refers to it.
//! - `connections(connection_id, principal_id, kind, protocol_minor, opened_at)`.
//! - `workspaces(workspace_key, workspace_id, principal_id, browser_id,
//!   client_key, created_at, last_active_at, url_policy, isolation)`; `isolation`
//!   is `'context'` for a Workspace in a browser context of its own, NULL for the
//!   shared profile; `last_active_at` is the idle
//!   clock, moved by Commands, Lease calls and polls; `workspace_key` is a private
//!   integer that keys the journal; `client_key` unique per Principal among
//!   active Workspaces.
//! - `leases(lease_id, workspace_id, connection_id, client_key, ttl_ms,
//!   expires_at, created_at)`; deleted with their Connection or Workspace;
//!   `(connection_id, workspace_id, client_key)` unique.
//! - `events(workspace_key, sequence, event_id, timestamp, generation,
//!   lease_id, target_id, event_type, payload_version, sensitivity,
//!   payload_json, class, ordinal)`, unique `(workspace_key, sequence)`, a
//!   rowid table so appends take SQLite's right-edge path: sequences are
//!   dense per Workspace and start at 1; `max(sequence)` is the journal head
//!   (the newest event is never dropped). `class` is the visibility class (0
//!   shared, 1 network) and `ordinal` dense per Workspace and class (index
//!   `(workspace_key, class, ordinal)`): only the newest
//!   `event_journal_size` of each class are visible, older rows of a class
//!   are deleted every `PRUNE_BATCH` of its appends, and
//!   `workspaces.pruned_0|1` keep the highest sequence deleted per class.
//! - `commands(command_id, principal_id, workspace_id, connection_id, method,
//!   generation, idempotency_key, args_hash, status, accepted_at, deadline_at,
//!   dispatched_at, completed_at, mutating, cancellation_requested,
//!   result_json, error_json, result_dropped)`: terminal exactly when
//!   `completed_at` is set; `(principal, workspace, idempotency_key)` unique;
//!   the newest `max_terminal_commands_per_principal` terminal rows are kept,
//!   and their results within `max_result_bytes_per_principal` (older ones
//!   dropped, the record marked). `principals.terminal_commands` and
//!   `result_bytes` are those totals, kept by triggers.
//! - `artifacts(artifact_id, workspace_id, kind, mime_type, byte_len, sha256,
//!   created_at, expires_at, retained, sensitivity, file_name)`: metadata only.
//! - `tombstones(workspace_id, principal_id, released_at, reason, client_key)`:
//!   the newest `max_tombstones` releases, for idempotent `workspaces/release`
//!   and to say why a Workspace ended (`released` or `idle`); `client_key` is
//!   kept until the first create with that key has been told of an idle
//!   reclaim.
//!
//! Every bound in `StoreLimits` is enforced inside the same transaction as
//! the write it bounds.
//!
//! ## Concurrency
//!
//! The database is a named memdb (`file:/browser-pilot-<random>?vfs=memdb`),
//! which every connection of the process opening the same name shares. A
//! keeper connection held by the `Store` keeps it alive for the Store's
//! lifetime (the pool may close idle connections) and serves debug queries.
//!
//! Async callers go through `Store::call` and `Store::call_read` only
//! (`calls.rs`), and nothing in the crate wraps the store in
//! `spawn_blocking`. Behind them (`actor.rs`):
//!
//! - One write connection per Store, held by one thread at a time: the
//!   writer thread while it commits a batch, or an async caller that found
//!   nothing queued and the connection free, which runs its unit on its own
//!   thread as a batch of one under the rules below and hands the connection
//!   back (so an idle store costs a call no thread hand-off).
//! - One writer thread per Store runs what is queued. It takes every
//!   unit queued (up to `GROUP_COMMIT_MAX_UNITS`), opens one `BEGIN
//!   IMMEDIATE` group transaction, runs each unit in its own savepoint (and
//!   each `write` inside it in a nested one), commits once, and only then
//!   answers each caller's oneshot, so no caller sees a write a later
//!   failure could undo. A `write` whose body fails rolls back to its
//!   savepoint and leaves the rest of the batch alone; a unit that panics is
//!   caught, rolled back to its savepoint and answered `Unavailable` (its
//!   reply is dropped). A failed `COMMIT` answers every unit of the batch
//!   `GroupCommit`. If the writer thread itself dies, every queued and later
//!   call gets `Unavailable` at once (the queue is gone), never a hang.
//!   Reads inside a unit run on the writer connection and see its batch.
//! - `READER_THREADS` threads run read units on pooled connections (r2d2,
//!   `POOL_MAX_CONNECTIONS`) in a deferred transaction each, so several
//!   statements see one snapshot.
//! - Synchronous calls from any other thread (unit tests, benches, the
//!   Artifact service's file thread) use a pooled connection directly:
//!   writes start with `BEGIN IMMEDIATE` so no transaction ever upgrades a
//!   read lock (SQLite answers an upgrade conflict with `SQLITE_BUSY` without
//!   waiting).
//!
//! memdb has no WAL: a writer excludes readers while it commits, and readers
//! delay a commit; the writer's group transaction and the pooled writers
//! exclude each other. Each connection's busy handler waits that out (yield,
//! then short sleeps, up to `BUSY_TIMEOUT`), so contention never surfaces as
//! `SQLITE_BUSY` or `SQLITE_LOCKED`; transactions last microseconds (a batch
//! at most `GROUP_COMMIT_MAX_UNITS` units), so waits are short. The debug
//! query's time budget stays below `BUSY_TIMEOUT` for the same reason.

mod actor;
mod artifacts;
mod calls;
mod commands;
mod connections;
mod db;
mod debug;
mod error;
mod events;
mod ids;
mod leases;
mod limits;
mod model;
mod principals;
mod view;
mod workspaces;

#[cfg(test)]
mod testing;

pub use actor::{GROUP_COMMIT_MAX_UNITS, READER_THREADS};
pub use db::{BUSY_TIMEOUT, POOL_CHECKOUT_TIMEOUT, POOL_MAX_CONNECTIONS, Store};
pub use debug::{DEBUG_QUERY_MAX_ROWS, DEBUG_QUERY_TIME_BUDGET};
pub use error::StoreError;
pub use events::PRUNE_BATCH;
pub use ids::{CommandId, ConnectionId, LeaseId, TargetRef, WorkspaceId};
pub use limits::{
    DEFAULT_EVENT_JOURNAL_SIZE, DEFAULT_MAX_LEASES_PER_CONNECTION,
    DEFAULT_MAX_RESULT_BYTES_PER_PRINCIPAL, DEFAULT_MAX_TERMINAL_COMMANDS_PER_PRINCIPAL,
    DEFAULT_MAX_TOMBSTONES, DEFAULT_MAX_WORKSPACES_PER_PRINCIPAL, StoreLimits,
};
pub use model::{
    ArtifactRow, CommandRow, CommandStatus, ConnectionKind, CreateWorkspace, EventPoll, EventRow,
    EventVisibility, InsertCommand, LeaseRow, NewCommand, NewConnection, NewEvent, NewLease,
    NewWorkspace, PrincipalKey, QueryRows, ReleaseReason, ReleaseWorkspace, SqlValue, TombstoneRow,
    WorkspaceLookup, WorkspaceOptions, WorkspaceRow,
};
pub use view::{
    VIEW_COMMANDS_PER_WORKSPACE, VIEW_EVENTS_PAGE, ViewCommand, ViewEvent, ViewLease, ViewWorkspace,
};
