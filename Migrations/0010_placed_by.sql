-- The worker that placed each file: the machine's name (or the name `haul run --worker` gave),
-- taken from the lease owner of the attempt that completed the job. NULL before it is done, and
-- for jobs done before this version.
ALTER TABLE jobs ADD COLUMN placed_by TEXT;
