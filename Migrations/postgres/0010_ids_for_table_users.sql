-- Since migration 0009 an add draws the ids of its new jobs with nextval() on the jobs table's
-- identity sequence (it takes the destination keys first, then inserts the jobs), and nextval()
-- asks for USAGE on the sequence, which the column's own default never did: a database user
-- given the rights on the queue's tables only (SELECT, INSERT, UPDATE, DELETE), as a worker's
-- user may well be, could add before 0009 and was then refused ("permission denied for sequence
-- jobs_id_seq"). USAGE on that sequence goes to every user: it lets one draw numbers from it
-- (an id skipped, never one reused), and nothing else; adding still takes INSERT on jobs.
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO PUBLIC', pg_get_serial_sequence('jobs', 'id'));
END
$$
