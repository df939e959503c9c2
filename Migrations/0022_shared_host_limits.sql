-- limit_until: until when (Unix ms) a host's current_limit (its transfers held below the cap
-- after a 429 or 503) holds for slot grants to every worker. The worker that set it writes it
-- again at each renewal of its leases while it holds the host to it, so the limit of a worker
-- that stopped lapses by itself.
ALTER TABLE hosts ADD COLUMN limit_until INTEGER NOT NULL DEFAULT 0;
