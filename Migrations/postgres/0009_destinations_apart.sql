-- A destination's uniqueness moves out of the jobs table into its own: job_destinations holds one
-- row a destination key, naming the job that holds it, written once when the job is added and
-- never changed. The unique index on jobs.destination_key cost every write that moves a job on
-- (a claim, a completion: state changes, so none is heap-only) one more entry in an index of
-- random keys, a page touched at random each time: measured on workload A (10,000 jobs, one
-- `haul run`), dropping it took a claim from about 20 to 15 µs a job and a completion from 15 to
-- 11. An add now writes one more small row; jobs.destination_key stays, unindexed, for reading.
-- The jobs table is locked against writes before the copy (the lock waits for adds under way and
-- holds off new ones to the end of the migration): else a batch an older haul committed between
-- the copy and the constraint's drop would hold no key. An older haul still running on the
-- queue cannot add to it any more (its INSERT names the constraint dropped here: it fails with
-- 42P10 and adds nothing); its claims and completions go on as before.
SET LOCAL lock_timeout = '5s';
LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE job_destinations (
    destination_key bigint PRIMARY KEY,               -- as jobs.destination_key
    job_id          bigint NOT NULL                    -- jobs.id
) WITH (fillfactor = 100);
INSERT INTO job_destinations (destination_key, job_id) SELECT destination_key, id FROM jobs;
ALTER TABLE jobs DROP CONSTRAINT jobs_destination_key_key;
