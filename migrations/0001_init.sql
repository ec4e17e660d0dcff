-- 0001_init: every table of the Broker's transient state.
--
-- Append-only: a migration that has shipped is never edited; later changes go
-- into 0002_*.sql and so on. `PRAGMA user_version` counts applied files.
-- Timestamps are epoch milliseconds. Ids are the caller's prefixed strings
-- ("workspace:...", "lease:..."), except the private integer principal_id.

-- One row per ClientPrincipal (client.id + client.instanceId).
CREATE TABLE principals (
    principal_id INTEGER PRIMARY KEY,
    client_id    TEXT NOT NULL,
    instance_id  TEXT NOT NULL,
    UNIQUE (client_id, instance_id)
) STRICT;

-- Live Broker Connections (one per bridge process or CLI invocation).
CREATE TABLE connections (
    connection_id  TEXT PRIMARY KEY,
    principal_id   INTEGER NOT NULL REFERENCES principals (principal_id),
    kind           TEXT NOT NULL CHECK (kind IN ('embedded', 'cli')),
    protocol_minor INTEGER NOT NULL CHECK (protocol_minor >= 0),
    opened_at      INTEGER NOT NULL,
    -- Set when the peer vanished without closing (a killed bridge): its Leases are left to
    -- expire, and the row is reclaimed once none remain. NULL while the Connection is live.
    lost_at        INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX connections_by_principal ON connections (principal_id);
CREATE INDEX connections_by_kind ON connections (kind);

-- Active Workspaces. workspace_key is private and keys the journal compactly;
-- the journal head is max(events.sequence) of that key.
CREATE TABLE workspaces (
    workspace_key   INTEGER PRIMARY KEY,
    workspace_id    TEXT NOT NULL UNIQUE,
    principal_id    INTEGER NOT NULL REFERENCES principals (principal_id),
    browser_id      TEXT NOT NULL,
    client_key      TEXT,
    created_at      INTEGER NOT NULL,
    last_active_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX workspaces_by_principal ON workspaces (principal_id);
CREATE UNIQUE INDEX workspaces_by_client_key
    ON workspaces (principal_id, client_key) WHERE client_key IS NOT NULL;

-- Leases: owned by one live Connection, scoped to one Workspace.
CREATE TABLE leases (
    lease_id      TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (workspace_id) ON DELETE CASCADE,
    connection_id TEXT NOT NULL REFERENCES connections (connection_id) ON DELETE CASCADE,
    client_key    TEXT,
    ttl_ms        INTEGER NOT NULL CHECK (ttl_ms > 0),
    expires_at    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX leases_by_workspace ON leases (workspace_id);
CREATE INDEX leases_by_connection ON leases (connection_id);
CREATE UNIQUE INDEX leases_by_client_key
    ON leases (connection_id, workspace_id, client_key) WHERE client_key IS NOT NULL;
CREATE INDEX leases_by_expiry ON leases (expires_at);

-- The per-Workspace event journal, keyed by its dense sequence. The newest
-- row of a Workspace is never deleted, so max(sequence) is its journal head.
-- A rowid table: appends land at the right edge of the table (SQLite's cheap
-- append path) and only the small (workspace_key, sequence) index is inserted
-- mid-tree. workspace_key is deliberately not a foreign key: append checks the
-- Workspace inside its transaction anyway, a per-event parent lookup is
-- measurable on the hottest write, and release deletes the journal itself.
CREATE TABLE events (
    workspace_key   INTEGER NOT NULL,
    sequence        INTEGER NOT NULL CHECK (sequence > 0),
    event_id        TEXT NOT NULL,
    timestamp       INTEGER NOT NULL,
    generation      INTEGER NOT NULL CHECK (generation >= 0),
    lease_id        TEXT,
    target_id       TEXT,
    event_type      TEXT NOT NULL,
    payload_version INTEGER NOT NULL CHECK (payload_version >= 0),
    sensitivity     TEXT NOT NULL,
    payload_json    TEXT NOT NULL,
    UNIQUE (workspace_key, sequence)
) STRICT;

-- Commands (tools/call outcomes). The rowid orders rows by acceptance; a
-- command is terminal exactly when completed_at is set.
CREATE TABLE commands (
    command_id             TEXT NOT NULL UNIQUE,
    principal_id           INTEGER NOT NULL REFERENCES principals (principal_id),
    workspace_id           TEXT REFERENCES workspaces (workspace_id) ON DELETE CASCADE,
    connection_id          TEXT NOT NULL,
    method                 TEXT NOT NULL,
    generation             INTEGER NOT NULL CHECK (generation >= 0),
    idempotency_key        TEXT,
    args_hash              BLOB NOT NULL CHECK (length(args_hash) = 32),
    status                 TEXT NOT NULL CHECK (status IN
                               ('accepted', 'dispatched', 'completed', 'cancelled', 'unknown_outcome')),
    accepted_at            INTEGER NOT NULL,
    deadline_at            INTEGER NOT NULL,
    dispatched_at          INTEGER,
    completed_at           INTEGER,
    mutating               INTEGER NOT NULL CHECK (mutating IN (0, 1)),
    cancellation_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancellation_requested IN (0, 1)),
    result_json            TEXT,
    error_json             TEXT,
    CHECK ((completed_at IS NULL) = (status IN ('accepted', 'dispatched')))
) STRICT;
CREATE INDEX commands_by_workspace ON commands (workspace_id);
CREATE UNIQUE INDEX commands_by_idempotency_key
    ON commands (principal_id, ifnull(workspace_id, ''), idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Serves both "does this Principal have Commands" and the terminal pruning
-- (terminal rows are exactly those with completed_at set).
CREATE INDEX commands_by_principal_age ON commands (principal_id, completed_at);

-- Artifact metadata only; the bytes live on disk under the artifacts module.
CREATE TABLE artifacts (
    artifact_id  TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (workspace_id) ON DELETE CASCADE,
    kind         TEXT NOT NULL,
    mime_type    TEXT NOT NULL,
    byte_len     INTEGER NOT NULL CHECK (byte_len >= 0),
    sha256       TEXT NOT NULL CHECK (length(sha256) = 64),
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    retained     INTEGER NOT NULL CHECK (retained IN (0, 1)),
    sensitivity  TEXT NOT NULL,
    file_name    TEXT
) STRICT, WITHOUT ROWID;
CREATE INDEX artifacts_by_workspace ON artifacts (workspace_id);
CREATE INDEX artifacts_by_expiry ON artifacts (expires_at);

-- Released Workspaces, so a second release answers the same success. The
-- rowid orders them by release; the oldest are pruned beyond the bound.
CREATE TABLE tombstones (
    workspace_id TEXT NOT NULL UNIQUE,
    principal_id INTEGER NOT NULL REFERENCES principals (principal_id),
    released_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX tombstones_by_principal ON tombstones (principal_id);
