-- Since migration 0009 an add draws the ids of its new jobs with nextval() on the jobs table's
-- identity sequence (it takes the destination keys first, then inserts the jobs), and nextval()
-- asks for USAGE on the sequence, which the column's own default never did: a database user
-- given the rights on the queue's tables only (SELECT, INSERT, UPDATE, DELETE), as a worker's
-- user may well be, could add before 0009 and was then refused ("permission denied for sequence
-- jobs_id_seq"). USAGE on that sequence goes to every user: it lets one draw numbers from it
-- (an id skipped, never one reused), and nothing else; adding still takes INSERT on jobs.
-- Run by a user who does not own the sequence but holds a right on it, GRANT only warns and
-- grants nothing: the check after it fails the migration then (42501), so it stays to be run by
-- the owner instead of being recorded as done.
DO $$
DECLARE
    sequence text := pg_get_serial_sequence('jobs', 'id');
BEGIN
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO PUBLIC', sequence);
    IF NOT has_sequence_privilege('public', sequence, 'USAGE') THEN
        RAISE EXCEPTION 'USAGE on % was not granted to every user', sequence USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$
