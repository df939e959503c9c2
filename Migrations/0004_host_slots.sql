-- Per-host concurrency held as slot leases: a process holds a slot of a host while it has a
-- transfer to that host running (or about to start in it); live slots of a host never number
-- more than its cap, over every process sharing the queue. A slot is renewed like a job lease
-- and dies with its owner (its expiry passed, or its process known to be gone).
-- Jobs are claimed ahead of their transfers with ordinary job leases; those do not count
-- against the cap, the slots do.

CREATE TABLE host_slots (
    host_id    INTEGER NOT NULL,        -- hosts.id
    slot       INTEGER NOT NULL,        -- 0 ..< the host's cap
    owner      TEXT    NOT NULL,        -- as jobs.lease_owner
    token      TEXT    NOT NULL,        -- only its holder renews or gives it back
    expires_at INTEGER NOT NULL,        -- Unix ms; past it the slot is free for anyone
    PRIMARY KEY (host_id, slot)
) WITHOUT ROWID;
CREATE INDEX host_slots_by_owner ON host_slots (owner);

-- The cap of one host (NULL: the queue's default, in queue_settings), and the last claimer
-- that asked for a slot of it and got none (so holders give one back when it is free).
ALTER TABLE hosts ADD COLUMN cap INTEGER;
ALTER TABLE hosts ADD COLUMN wanted_by TEXT;
ALTER TABLE hosts ADD COLUMN wanted_at INTEGER NOT NULL DEFAULT 0;

CREATE TABLE queue_settings (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO queue_settings (name, value) VALUES ('default_host_cap', 4);
