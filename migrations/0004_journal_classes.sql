-- 0004_journal_classes: each visibility class of a Workspace's journal keeps
-- its own retention budget, so events a host may not see (network events,
-- for hosts without network.read) never push out events it may see.
--
-- class is 0 for events every event.read host sees and 1 for network events
-- (network.read only). ordinal is dense per (Workspace, class), starting at
-- 1: the newest event_journal_size ordinals of each class are kept. sequence
-- stays one dense order per Workspace across both classes.
--
-- workspaces.pruned_0 / pruned_1 is the highest sequence of that class ever
-- deleted (0 when none), written only when a class is pruned: a cursor is
-- expired for a host exactly when it lies below pruned_c of a class it sees.

ALTER TABLE events ADD COLUMN class INTEGER NOT NULL DEFAULT 0 CHECK (class IN (0, 1));
ALTER TABLE events ADD COLUMN ordinal INTEGER NOT NULL DEFAULT 0;
CREATE INDEX events_by_class ON events (workspace_key, class, ordinal);

ALTER TABLE workspaces ADD COLUMN pruned_0 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN pruned_1 INTEGER NOT NULL DEFAULT 0;
