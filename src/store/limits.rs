//! `StoreLimits`: the bounds the store enforces in SQL. Owns the numbers and
//! why they were chosen; it does not read configuration (the broker builds a
//! `StoreLimits` and may report them in `initialize`).

/// Newest events kept per Workspace journal. Enough for an agent that polls
/// every few seconds during a busy page (hundreds of network and console
/// events per second for a few seconds) while keeping a full journal of small
/// payloads within a few megabytes.
pub const DEFAULT_EVENT_JOURNAL_SIZE: u32 = 10_000;

/// Active Workspaces per Principal. A host maps one work scope to one
/// Workspace; 64 parallel scopes is far beyond real use, while a leaking host
/// cannot grow the Broker without bound.
pub const DEFAULT_MAX_WORKSPACES_PER_PRINCIPAL: u32 = 64;

/// Leases held by one Connection. A bridge holds about one Lease per active
/// Workspace invocation, so this matches the Workspace bound.
pub const DEFAULT_MAX_LEASES_PER_CONNECTION: u32 = 64;

/// Tombstones of released Workspaces kept (across all Principals) so a second
/// release answers the same success. A retry arrives within seconds, so 1,024
/// covers bursts of releases by many hosts at a few dozen bytes per row.
pub const DEFAULT_MAX_TOMBSTONES: u32 = 1_024;

/// Terminal Commands kept per Principal for idempotent replay and
/// `commands/get`. Retries come soon after the original, so the newest 1,024
/// outcomes cover any realistic retry window while bounding stored results.
pub const DEFAULT_MAX_TERMINAL_COMMANDS_PER_PRINCIPAL: u32 = 1_024;

/// Bytes of Command results kept per Principal beside the count bound. Past
/// it the oldest results are dropped (their records stay, marked
/// `result_dropped`, so a late retry is still recognized and never runs
/// again); the newest Command's result is always kept, however large. 2 MiB
/// holds a few hundred action results with their closing Observations
/// (4-7 KB each), which covers a retry window, and bounds what four busy
/// agents make the Broker hold to a few MiB.
pub const DEFAULT_MAX_RESULT_BYTES_PER_PRINCIPAL: u64 = 2 * 1024 * 1024;

/// Every bound the store enforces. `Default` gives the documented defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Newest events kept per Workspace (`eventJournalSize`).
    pub event_journal_size: u32,
    /// Active Workspaces per Principal.
    pub max_workspaces_per_principal: u32,
    /// Leases per Connection.
    pub max_leases_per_connection: u32,
    /// Tombstones kept across all Principals.
    pub max_tombstones: u32,
    /// Terminal Commands kept per Principal.
    pub max_terminal_commands_per_principal: u32,
    /// Bytes of retained Command results per Principal.
    pub max_result_bytes_per_principal: u64,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            event_journal_size: DEFAULT_EVENT_JOURNAL_SIZE,
            max_workspaces_per_principal: DEFAULT_MAX_WORKSPACES_PER_PRINCIPAL,
            max_leases_per_connection: DEFAULT_MAX_LEASES_PER_CONNECTION,
            max_tombstones: DEFAULT_MAX_TOMBSTONES,
            max_terminal_commands_per_principal: DEFAULT_MAX_TERMINAL_COMMANDS_PER_PRINCIPAL,
            max_result_bytes_per_principal: DEFAULT_MAX_RESULT_BYTES_PER_PRINCIPAL,
        }
    }
}
