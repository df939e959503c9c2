-- claims: how many times the job was claimed. A claim adds one; nothing else changes it (a claim
-- handed back uncounted, `retry` and a refetch leave it as it is), so 0 says that no worker has
-- ever held the job. Such a job's first attempt does not look for an earlier attempt's temp file
-- (none can exist: only an attempt makes one), which spares a lookup of a name that is not there
-- in the output folder for every new file (on ext4, a search of the folder's blocks).
-- New jobs are inserted with 0. Jobs queued before this migration, and any row inserted without
-- the column, take the default, 1: what they went through is not known, so their next attempt
-- looks, as every attempt did before.
ALTER TABLE jobs ADD COLUMN claims INTEGER NOT NULL DEFAULT 1;
