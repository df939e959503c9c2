-- lost_leases: how many times in a row the worker holding the job stopped without reporting (its
-- lease expired) while the job made no progress (one with progress sets it back to 0). Such an
-- attempt is not counted: it may be a job claimed ahead that was never requested, taken down by
-- a kill of its worker (a restart loop spent five attempts of jobs no server ever saw). A job
-- that stops its worker every time still ends: it fails when this reaches
-- Lease.lostLeaseLimit (twice its attempts, at least 10). Set back to 0 where the attempts are
-- (retry, refresh, verify --fix).
ALTER TABLE jobs ADD COLUMN lost_leases INTEGER NOT NULL DEFAULT 0;
