-- Both changes below lock the attempts table, and every worker's exchange waits behind that lock:
-- if another session holds the table longer than this (a transaction left open), the migration
-- gives up with PostgreSQL's "lock timeout" instead of stalling every running worker, and haul
-- says so; run it again once that session is gone.
SET LOCAL lock_timeout = '5s';
-- Attempts are found by their job (attempts_by_job), never by id: the primary key's index was
-- never read, and cost every claim one more index entry (measured: 10,000 index scans of
-- attempts_by_job and none of attempts_pkey in a 10,000-job run). The id stays, for the order of
-- a job's attempts.
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
-- Without a primary key, logical replication (a publication holding this table) needs the whole
-- old row to identify an updated one; without this, updates of attempts would fail there. It
-- changes nothing at the default wal_level.
ALTER TABLE attempts REPLICA IDENTITY FULL;
-- An attempt's row grows when it is closed: with pages filled to 80 % by the claims, only 38 % of
-- those updates found room on their page and stayed heap-only; the rest added an entry to every
-- index. At 50 %, 89 % stay heap-only (same run; pages written before this migration keep their
-- old fill).
ALTER TABLE attempts SET (fillfactor = 50);
