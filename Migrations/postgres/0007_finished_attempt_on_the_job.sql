-- The attempt that finishes a job well (a download placed) keeps its record on the job's row, as
-- an open attempt does (0006); it is written to attempts only when the job is fetched again
-- (refetch), as in the SQLite queue's migration 0017. Before, each batch of completions also
-- inserted a row a job into attempts and its index: about a fifth of the completion's time.
--   done_attempt_token: the lease token of the attempt that finished the job, while its record
--                       lives on the row: the record is (attempts, attempt_started_at,
--                       finished_at, last_status, received_bytes). NULL for every other job,
--                       and for jobs finished before this migration (their records are in
--                       attempts).
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN done_attempt_token text;
