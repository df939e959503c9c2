-- A running job's open attempt lives on its row, and its record in `attempts` is written once,
-- when the attempt ends. Before, a claim inserted the record and the attempt's end updated it:
-- two writes of `attempts` (and of its index) a downloaded file, each about 8–9 k instructions
-- under callgrind. The claim's UPDATE of the job sets these two columns at no extra cost.
--   attempt_started_at:  when the job's latest attempt began (Unix ms); it is the open one
--                        while the job is running, and left as it was once the job moves on
--   attempt_start_bytes: the job's received bytes then (see expireLeases: an attempt that made
--                        progress before its worker died is not counted)
ALTER TABLE jobs ADD COLUMN attempt_started_at INTEGER;
ALTER TABLE jobs ADD COLUMN attempt_start_bytes INTEGER;
-- Open records of running jobs move onto their jobs.
UPDATE jobs SET
    attempt_started_at = (SELECT a.started_at FROM attempts a
                          WHERE a.job_id = jobs.id AND a.lease_token = jobs.lease_token AND a.finished_at IS NULL),
    attempt_start_bytes = (SELECT a.bytes FROM attempts a
                           WHERE a.job_id = jobs.id AND a.lease_token = jobs.lease_token AND a.finished_at IS NULL)
WHERE state = 'running';
DELETE FROM attempts WHERE finished_at IS NULL AND EXISTS
    (SELECT 1 FROM jobs j WHERE j.id = attempts.job_id AND j.lease_token = attempts.lease_token AND j.state = 'running');
