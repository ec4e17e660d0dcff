-- 0002_command_retention: per-Principal totals of retained terminal Commands,
-- kept by triggers, so pruning after a completion is a few index steps
-- instead of a walk over the Principal's newest rows.
--
-- terminal_commands counts the Principal's rows with completed_at set;
-- result_bytes sums octet_length(result_json) over them. Triggers keep both
-- exact through completion, result dropping and every delete (a Workspace's
-- cascade included). error_json is never dropped and not counted: errors are
-- small, and a failed Command must never replay as a success.

ALTER TABLE principals ADD COLUMN terminal_commands INTEGER NOT NULL DEFAULT 0;
ALTER TABLE principals ADD COLUMN result_bytes INTEGER NOT NULL DEFAULT 0;

-- Set when the result was dropped under the byte budget; the Command record
-- stays, so a late retry is still recognized and never runs again.
ALTER TABLE commands ADD COLUMN result_dropped INTEGER NOT NULL DEFAULT 0
    CHECK (result_dropped IN (0, 1));

-- The oldest retained results of a Principal, for the byte budget.
CREATE INDEX commands_with_results ON commands (principal_id, completed_at)
    WHERE result_json IS NOT NULL;

CREATE TRIGGER commands_retention_update
AFTER UPDATE OF completed_at, result_json ON commands
BEGIN
    UPDATE principals SET
        terminal_commands = terminal_commands
            + (new.completed_at IS NOT NULL) - (old.completed_at IS NOT NULL),
        result_bytes = result_bytes
            + iif(new.completed_at IS NULL, 0, ifnull(octet_length(new.result_json), 0))
            - iif(old.completed_at IS NULL, 0, ifnull(octet_length(old.result_json), 0))
    WHERE principal_id = new.principal_id;
END;

CREATE TRIGGER commands_retention_delete
AFTER DELETE ON commands WHEN old.completed_at IS NOT NULL
BEGIN
    UPDATE principals SET
        terminal_commands = terminal_commands - 1,
        result_bytes = result_bytes - ifnull(octet_length(old.result_json), 0)
    WHERE principal_id = old.principal_id;
END;
