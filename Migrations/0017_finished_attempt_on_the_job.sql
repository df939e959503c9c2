-- The attempt that finishes a job well (a download placed) keeps its record on the job's row, as
-- an open attempt does (0016); it is written to `attempts` only when the job is fetched again
-- (`refetch`). Before, each done job inserted a row into `attempts` and its index: about 12 k of
-- the 335 k instructions a 10 KB download cost under callgrind.
--   done_attempt_token: the lease token of the attempt that finished the job, while its record
--                       lives on the row: the record is (attempts, attempt_started_at,
--                       finished_at, last_status, received_bytes). NULL for every other job,
--                       and for jobs finished before this migration (their records are in
--                       `attempts`).
ALTER TABLE jobs ADD COLUMN done_attempt_token TEXT;
