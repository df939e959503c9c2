-- The folders the queue's jobs write into, each once: what a run sweeps for orphaned temp files
-- at its start. Read from the jobs table instead, that sweep scanned every job at every start
-- (1.6 s of a `haul run` start at 1,000,000 jobs, growing with the queue). `add` records the
-- folder of each job it inserts. A folder is a destination up to and including its last "/"
-- ('' for a destination without one), as the query this replaces gave it.
CREATE TABLE job_folders (
    folder TEXT PRIMARY KEY
) WITHOUT ROWID;

INSERT OR IGNORE INTO job_folders (folder)
SELECT DISTINCT rtrim(destination, replace(destination, '/', '')) FROM jobs;
