-- A running job's open attempt lives on its row, and its record in `attempts` is written once,
-- when the attempt ends (as in the SQLite queue's migration 0016). Before, a claim inserted the
-- record and the attempt's end updated it: two writes of attempts a downloaded file, and a row
-- that grew when it was closed (hence 0004's fill factor of 50 %, no longer needed). The claim's
-- UPDATE of the job sets these two columns:
--   attempt_started_at:  when the job's latest attempt began (server ms); it is the open one
--                        while the job is running, and left as it was once the job moves on
--   attempt_start_bytes: the job's received bytes then (an attempt that made progress before
--                        its worker died is not counted, see expireLeasesSQL)
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN attempt_started_at bigint, ADD COLUMN attempt_start_bytes bigint;
-- Open records of running jobs move onto their jobs.
UPDATE jobs j SET attempt_started_at = a.started_at, attempt_start_bytes = a.bytes
FROM attempts a
WHERE j.state = 'running' AND a.job_id = j.id AND a.lease_token = j.lease_token AND a.finished_at IS NULL;
DELETE FROM attempts a USING jobs j
WHERE a.finished_at IS NULL AND a.job_id = j.id AND a.lease_token = j.lease_token AND j.state = 'running';
ALTER TABLE attempts SET (fillfactor = 100);
