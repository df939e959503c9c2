-- Counters off the claim. The triggers of 0002 updated two job_totals rows and a hosts row for
-- every claim, and two job_totals rows for every completion and every progress record: measured
-- under callgrind, about 28 k instructions a downloaded file more than the triggers below.
-- Now:
-- * running jobs are not counted in job_totals (its 'running' row stays at zero): they are the
--   few jobs under a lease, counted from the jobs_running index when asked;
-- * a claim (queued to running) fires no counting: the claim keeps job_totals' queued row and
--   hosts.queued itself, once per batch and host (JobQueue.claimRoundRobin);
-- * every other change is counted here, as before: a job leaving a counted state, and a job
--   entering one, each by its own trigger (a completion leaves running, so only enters done).
DROP TRIGGER jobs_totals_update;
DROP TRIGGER jobs_host_queued_update;
DROP TRIGGER jobs_totals_delete;

CREATE TRIGGER jobs_totals_leave AFTER UPDATE OF state, expected_bytes, received_bytes ON jobs
WHEN OLD.state <> 'running' AND NOT (OLD.state = 'queued' AND NEW.state = 'running') BEGIN
    UPDATE job_totals SET
        jobs = jobs - 1,
        expected_bytes = expected_bytes - coalesce(OLD.expected_bytes, 0),
        received_bytes = received_bytes - OLD.received_bytes,
        unknown_size = unknown_size - (OLD.expected_bytes IS NULL)
    WHERE state = OLD.state;
END;

CREATE TRIGGER jobs_totals_enter AFTER UPDATE OF state, expected_bytes, received_bytes ON jobs
WHEN NEW.state <> 'running' BEGIN
    UPDATE job_totals SET
        jobs = jobs + 1,
        expected_bytes = expected_bytes + coalesce(NEW.expected_bytes, 0),
        received_bytes = received_bytes + NEW.received_bytes,
        unknown_size = unknown_size + (NEW.expected_bytes IS NULL)
    WHERE state = NEW.state;
END;

CREATE TRIGGER jobs_host_queued_update AFTER UPDATE OF state ON jobs
WHEN (OLD.state = 'queued') <> (NEW.state = 'queued') AND NOT (OLD.state = 'queued' AND NEW.state = 'running') BEGIN
    UPDATE hosts SET queued = queued + (CASE WHEN NEW.state = 'queued' THEN 1 ELSE -1 END)
    WHERE id = NEW.host_id;
END;

CREATE TRIGGER jobs_totals_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_totals SET
        jobs = jobs - 1,
        expected_bytes = expected_bytes - coalesce(OLD.expected_bytes, 0),
        received_bytes = received_bytes - OLD.received_bytes,
        unknown_size = unknown_size - (OLD.expected_bytes IS NULL)
    WHERE state = OLD.state AND OLD.state <> 'running';
    UPDATE hosts SET queued = queued - 1 WHERE id = OLD.host_id AND OLD.state = 'queued';
END;

UPDATE job_totals SET jobs = 0, expected_bytes = 0, received_bytes = 0, unknown_size = 0 WHERE state = 'running';
