-- claims: how many times the job was claimed (as in the SQLite queue's migration 0018). A claim
-- adds one; nothing else changes it (a claim handed back uncounted, `retry` and a refetch leave it
-- as it is), so a claim that makes it 1 is the first that any worker on any machine made of the
-- job. That attempt does not look for an earlier attempt's temp file (none can exist: only an
-- attempt makes one), which spares a lookup of a name that is not there in the output folder for
-- every new file. New jobs are inserted with 0. Jobs queued before this migration, and any row
-- inserted without the column, take the default, 1: what they went through is not known, so
-- their next attempt looks, as every attempt did before. An older haul still running on the
-- queue claims without counting, but its claim sets attempt_started_at (0006): a claim that finds
-- 0 claims and an attempt_started_at counts that claim too. A constant default: no table rewrite.
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN claims int NOT NULL DEFAULT 1;
