-- limit_until: until when (Unix ms, the server's clock) a host's current_limit (its transfers
-- held below the cap after a 429 or 503) holds for slot grants to every worker. The worker that
-- set it writes it again at each renewal of its leases while it holds the host to it, so the
-- limit of a worker that stopped lapses by itself. (A narrow update of a row that claims and
-- grants read anyway.)
ALTER TABLE hosts ADD COLUMN limit_until bigint NOT NULL DEFAULT 0;
