-- 0005_workspace_url_policy: the URL policy a Workspace was created with
-- (protocol 1.1 workspaces/create urlPolicy), kept so a repeated clientKey can
-- be compared with it and workspaces/get can report it.
--
-- url_policy is the canonical JSON text {"allow": [...], "block": [...]} of
-- session::url_policy (patterns normalised, sorted, without duplicates), or
-- NULL for a Workspace without a policy.

ALTER TABLE workspaces ADD COLUMN url_policy TEXT;
