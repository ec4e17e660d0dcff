//! Plain row and argument structs of the store API. Owns their shapes only:
//! no serde (they never cross a process boundary), no SQL, no protocol types.
//! Timestamps are epoch milliseconds; ids are the caller's prefixed strings, typed where a row carries several.

use super::ids::{ConnectionId, LeaseId, WorkspaceId};

/// A ClientPrincipal: `client.id + client.instanceId` from `initialize`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrincipalKey {
    /// `client.id`.
    pub client_id: String,
    /// `client.instanceId`.
    pub instance_id: String,
}

/// Which front door a Connection came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnectionKind {
    /// A host's `bridge --stdio`.
    Embedded,
    /// The human `bp` CLI.
    Cli,
}

impl ConnectionKind {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Cli => "cli",
        }
    }
}

/// Arguments of `Store::open_connection`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewConnection {
    /// Connection id chosen by the broker.
    pub id: String,
    /// The Principal that connected.
    pub principal: PrincipalKey,
    /// Embedded bridge or CLI.
    pub kind: ConnectionKind,
    /// Negotiated protocol minor version.
    pub protocol_minor: u32,
    /// When the Connection opened.
    pub opened_at: i64,
}

/// Arguments of `Store::create_workspace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWorkspace {
    /// Workspace id chosen by the broker.
    pub id: String,
    /// The owning Principal.
    pub principal: PrincipalKey,
    /// The browser binding resolved by the broker.
    pub browser_id: String,
    /// Optional protocol 1.1 `clientKey` making creation idempotent.
    pub client_key: Option<String>,
    /// The protocol 1.1 options it is created with; a repeated `clientKey` must repeat them.
    pub options: WorkspaceOptions,
    /// Creation time.
    pub now: i64,
}

/// The protocol 1.1 options of `workspaces/create` a Workspace keeps for its lifetime. A
/// repeated `clientKey` with different options is `client_key_conflict`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceOptions {
    /// The URL policy in its canonical text (`session::url_policy::UrlPolicy::to_canonical`);
    /// `None`: no policy.
    pub url_policy: Option<String>,
    /// Its managed tabs live in a browser context of their own (`isolation: "context"`);
    /// false: the contract's shared profile.
    pub isolated: bool,
}

/// An active Workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceRow {
    /// Workspace id.
    pub id: String,
    /// The owning Principal.
    pub principal: PrincipalKey,
    /// The browser binding.
    pub browser_id: String,
    /// The `clientKey` it was created with, if any.
    pub client_key: Option<String>,
    /// The options it was created with.
    pub options: WorkspaceOptions,
    /// Creation time.
    pub created_at: i64,
    /// Last time the broker touched it (for idle sweeps).
    pub last_active_at: i64,
    /// Sequence of the newest journaled event; 0 before the first event.
    pub latest_sequence: u64,
}

/// Outcome of `Store::create_workspace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateWorkspace {
    /// A new Workspace was inserted.
    Created(WorkspaceRow),
    /// The `clientKey` already named this active Workspace on the same browser.
    Existing(WorkspaceRow),
    /// A new Workspace was inserted under a `clientKey` whose previous Workspace the idle
    /// sweep reclaimed; reported once, to the first create after the reclaim.
    Replaced {
        /// The new Workspace.
        row: WorkspaceRow,
        /// The reclaimed one.
        expired: TombstoneRow,
    },
}

/// Why a Workspace ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseReason {
    /// `workspaces/release` (or `bp` on the user's word).
    Released,
    /// The idle sweep: no Command, Lease or poll for the idle limit.
    Idle,
}

impl ReleaseReason {
    /// The `tombstones.reason` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::Released => "released",
            ReleaseReason::Idle => "idle",
        }
    }

    fn parse(text: &str) -> ReleaseReason {
        match text {
            "idle" => ReleaseReason::Idle,
            _ => ReleaseReason::Released,
        }
    }
}

/// A released Workspace remembered for repeated releases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TombstoneRow {
    /// The released Workspace id.
    pub workspace_id: String,
    /// When it was released.
    pub released_at: i64,
    /// Why.
    pub reason: ReleaseReason,
}

impl TombstoneRow {
    /// Decodes `reason` as stored.
    pub(super) fn reason_from_column(text: &str) -> ReleaseReason {
        ReleaseReason::parse(text)
    }
}

/// Outcome of `Store::get_workspace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkspaceLookup {
    /// Active and owned by the asking Principal.
    Active(WorkspaceRow),
    /// Released by the asking Principal; the tombstone still lasts.
    Released(TombstoneRow),
    /// Unknown, long released, or another Principal's.
    NotFound,
}

/// Outcome of `Store::release_workspace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseWorkspace {
    /// Released now. The caller cleans up what these rows name (target
    /// control, Artifact bytes on disk).
    Released {
        /// Leases that died with the Workspace.
        released_leases: Vec<LeaseRow>,
        /// Artifact metadata rows deleted with the Workspace.
        released_artifacts: Vec<ArtifactRow>,
    },
    /// Released earlier; the tombstone still lasts.
    AlreadyReleased {
        /// When the first release happened.
        released_at: i64,
    },
    /// Unknown, tombstone pruned, or another Principal's.
    NotFound,
}

/// Arguments of `Store::create_lease`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLease {
    /// Lease id chosen by the broker (unused when a `client_key` renews).
    pub id: String,
    /// The Workspace to lease.
    pub workspace_id: String,
    /// The live Connection that will own the Lease.
    pub connection_id: String,
    /// The Principal of that Connection; must own the Workspace.
    pub principal: PrincipalKey,
    /// Time to live, already clamped by the broker.
    pub ttl_ms: i64,
    /// Optional protocol 1.1 `clientKey` making creation idempotent.
    pub client_key: Option<String>,
    /// Creation time.
    pub now: i64,
}

/// A Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    /// Lease id.
    pub id: LeaseId,
    /// Its Workspace.
    pub workspace_id: WorkspaceId,
    /// The owning Connection.
    pub connection_id: ConnectionId,
    /// The `clientKey` it was created with, if any.
    pub client_key: Option<String>,
    /// Time to live used by heartbeats.
    pub ttl_ms: i64,
    /// When it expires unless renewed.
    pub expires_at: i64,
    /// Creation time.
    pub created_at: i64,
}

/// Arguments of `Store::append_event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// Event id chosen by the caller.
    pub id: String,
    /// The Workspace whose journal receives it.
    pub workspace_id: String,
    /// When it happened.
    pub timestamp: i64,
    /// `browserConnectionGeneration`.
    pub generation: u64,
    /// The Lease it concerns, if any.
    pub lease_id: Option<String>,
    /// The opaque target it concerns, if any.
    pub target_id: Option<String>,
    /// Event type (e.g. `dialog`).
    pub event_type: String,
    /// Payload schema version.
    pub payload_version: u32,
    /// Sensitivity class (e.g. `browser_data`).
    pub sensitivity: String,
    /// The payload, already serialized JSON text.
    pub payload_json: String,
    /// Who may see it; each class has its own retention budget.
    pub visibility: EventVisibility,
}

/// Which hosts may see an event. Each class of a Workspace's journal keeps its own newest
/// `event_journal_size` events, so events one host may not see never push out ones it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventVisibility {
    /// Every host granted `event.read`.
    EventRead,
    /// Only hosts also granted `network.read` (network events).
    NetworkRead,
}

impl EventVisibility {
    /// The `events.class` value.
    pub(super) fn class(self) -> i64 {
        match self {
            EventVisibility::EventRead => 0,
            EventVisibility::NetworkRead => 1,
        }
    }
}

/// A journaled event: `NewEvent` plus its sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    /// Dense per-Workspace sequence, starting at 1.
    pub sequence: u64,
    /// Event id.
    pub id: String,
    /// Its Workspace.
    pub workspace_id: String,
    /// When it happened.
    pub timestamp: i64,
    /// `browserConnectionGeneration`.
    pub generation: u64,
    /// The Lease it concerns, if any.
    pub lease_id: Option<String>,
    /// The opaque target it concerns, if any.
    pub target_id: Option<String>,
    /// Event type.
    pub event_type: String,
    /// Payload schema version.
    pub payload_version: u32,
    /// Sensitivity class.
    pub sensitivity: String,
    /// The payload as serialized JSON text.
    pub payload_json: String,
}

/// Outcome of `Store::poll_events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventPoll {
    /// Events after the cursor, oldest first.
    Page {
        /// At most `limit` events.
        events: Vec<EventRow>,
        /// Sequence of the last returned event, or the cursor if none.
        next_sequence: u64,
        /// Whether events after `next_sequence` exist.
        has_more: bool,
    },
    /// Events right after the cursor were dropped from the bounded journal.
    Expired {
        /// The oldest valid cursor (earliest retained sequence minus 1).
        earliest: u64,
        /// The newest sequence.
        latest: u64,
    },
    /// The cursor is ahead of the journal head.
    Future {
        /// The newest sequence.
        latest: u64,
    },
}

/// Lifecycle state of a Command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommandStatus {
    /// Accepted, not yet sent to the browser.
    Accepted,
    /// Sent to the browser.
    Dispatched,
    /// Finished with a result or a recorded tool error.
    Completed,
    /// Cancelled before dispatch.
    Cancelled,
    /// A mutating command's deadline elapsed after dispatch.
    UnknownOutcome,
}

impl CommandStatus {
    /// The stored and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Dispatched => "dispatched",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::UnknownOutcome => "unknown_outcome",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "accepted" => Some(Self::Accepted),
            "dispatched" => Some(Self::Dispatched),
            "completed" => Some(Self::Completed),
            "cancelled" => Some(Self::Cancelled),
            "unknown_outcome" => Some(Self::UnknownOutcome),
            _ => None,
        }
    }

    /// Whether no further transition is possible.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Accepted | Self::Dispatched => false,
            Self::Completed | Self::Cancelled | Self::UnknownOutcome => true,
        }
    }
}

/// Arguments of `Store::insert_command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCommand {
    /// Command id (caller-supplied `commandId` or generated by the broker).
    pub id: String,
    /// The Principal issuing it.
    pub principal: PrincipalKey,
    /// Its Workspace; `None` for Connection tools.
    pub workspace_id: Option<String>,
    /// The Connection that sent it.
    pub connection_id: String,
    /// Tool name.
    pub method: String,
    /// `browserConnectionGeneration` at acceptance.
    pub generation: u64,
    /// Optional `idempotencyKey`.
    pub idempotency_key: Option<String>,
    /// SHA-256 of the canonical arguments.
    pub args_hash: [u8; 32],
    /// Acceptance time.
    pub accepted_at: i64,
    /// Absolute deadline.
    pub deadline_at: i64,
    /// Whether the tool mutates browser state.
    pub mutating: bool,
}

/// A Command with every column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRow {
    /// Command id.
    pub id: String,
    /// Its Workspace; `None` for Connection tools.
    pub workspace_id: Option<String>,
    /// The Connection that sent it.
    pub connection_id: String,
    /// Tool name.
    pub method: String,
    /// `browserConnectionGeneration` at acceptance.
    pub generation: u64,
    /// Optional `idempotencyKey`.
    pub idempotency_key: Option<String>,
    /// SHA-256 of the canonical arguments.
    pub args_hash: [u8; 32],
    /// Lifecycle state.
    pub status: CommandStatus,
    /// Acceptance time.
    pub accepted_at: i64,
    /// Absolute deadline.
    pub deadline_at: i64,
    /// When it was sent to the browser.
    pub dispatched_at: Option<i64>,
    /// When it became terminal.
    pub completed_at: Option<i64>,
    /// Whether the tool mutates browser state.
    pub mutating: bool,
    /// Whether `commands/cancel` was called.
    pub cancellation_requested: bool,
    /// Recorded result, serialized JSON text.
    pub result_json: Option<String>,
    /// Recorded JSON-RPC error, serialized JSON text.
    pub error_json: Option<String>,
    /// Whether `result_json` was dropped under the per-Principal byte budget
    /// (`StoreLimits::max_result_bytes_per_principal`); the record stays.
    pub result_dropped: bool,
}

/// Outcome of `Store::insert_command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InsertCommand {
    /// A new Command was recorded with status `accepted`.
    Inserted(CommandRow),
    /// The same request was seen before; this is its current row.
    Duplicate(CommandRow),
}

/// Metadata of one Artifact (the bytes live on disk, owned by `artifacts/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactRow {
    /// Artifact id.
    pub id: String,
    /// The owning Workspace.
    pub workspace_id: String,
    /// Kind (e.g. `screenshot`, `pdf`, `download`, `upload`).
    pub kind: String,
    /// MIME type.
    pub mime_type: String,
    /// Size of the bytes.
    pub byte_len: u64,
    /// Lowercase hex SHA-256 of the bytes (64 characters).
    pub sha256: String,
    /// Creation time.
    pub created_at: i64,
    /// When the bytes may be deleted.
    pub expires_at: i64,
    /// Whether `artifacts/retain` extended its TTL.
    pub retained: bool,
    /// Sensitivity class.
    pub sensitivity: String,
    /// Suggested file name, if any.
    pub file_name: Option<String>,
}

/// One value of a debug query result, mirroring SQLite's storage classes.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// NULL.
    Null,
    /// INTEGER.
    Integer(i64),
    /// REAL.
    Real(f64),
    /// TEXT (invalid UTF-8 replaced).
    Text(String),
    /// BLOB.
    Blob(Vec<u8>),
}

/// Result of `Store::query_readonly`.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryRows {
    /// Column names in order.
    pub columns: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<SqlValue>>,
    /// Whether rows were cut at the row cap.
    pub truncated: bool,
}
