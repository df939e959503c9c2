-- The folders the queue's jobs write into, each once: what a worker sweeps for orphaned temp
-- files when it starts. Read from the jobs table instead, that sweep scanned every job at every
-- worker's start (0.73 s of server time at 1,000,000 jobs, growing with the queue). `add`
-- records the folder of each job it inserts. A folder is a destination up to and including its
-- last "/" ('' for a destination without one), as the query this replaces gave it.
CREATE TABLE job_folders (
    folder text COLLATE "C" PRIMARY KEY
);

INSERT INTO job_folders (folder)
SELECT DISTINCT coalesce(substring(destination FROM '^.*/'), '') FROM jobs
ON CONFLICT DO NOTHING;
