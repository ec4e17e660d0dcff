-- 0006_workspace_isolation: the isolation a Workspace was created with (protocol 1.1
-- workspaces/create isolation), kept so a repeated clientKey can be compared with it,
-- workspaces/get can report it, and its tools know where its managed tabs live.
--
-- isolation is 'context' for a Workspace whose managed tabs live in a browser context of
-- their own (session::contexts), or NULL for the contract's shared profile.

ALTER TABLE workspaces ADD COLUMN isolation TEXT;
