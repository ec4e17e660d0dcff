-- 0003_workspace_expiry: why a Workspace ended, and under which clientKey, so
-- the next call on it (by id) or the next workspaces/create with its clientKey
-- can say it expired for want of activity rather than looking merely absent.
--
-- reason is 'released' for workspaces/release and 'idle' for the idle sweep.
-- client_key is the released Workspace's clientKey, if it had one.

ALTER TABLE tombstones ADD COLUMN reason TEXT NOT NULL DEFAULT 'released'
    CHECK (reason IN ('released', 'idle'));
ALTER TABLE tombstones ADD COLUMN client_key TEXT;

CREATE INDEX tombstones_by_client_key ON tombstones (principal_id, client_key)
    WHERE client_key IS NOT NULL;
