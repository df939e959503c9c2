-- Counters that keep `haul status` and claiming O(1) in the queue's length.
-- Updates and deletes keep them by trigger. Inserts do not: a trigger per inserted row would
-- double the cost of adding a million jobs, so `JobQueue.add` adds its batch's counts itself,
-- in the same transaction.

CREATE TABLE job_totals (
    state          TEXT    PRIMARY KEY,
    jobs           INTEGER NOT NULL DEFAULT 0,
    expected_bytes INTEGER NOT NULL DEFAULT 0,
    received_bytes INTEGER NOT NULL DEFAULT 0,
    unknown_size   INTEGER NOT NULL DEFAULT 0      -- jobs whose expected size is not known
) WITHOUT ROWID;
INSERT INTO job_totals (state) VALUES ('queued'), ('running'), ('done'), ('failed'), ('cancelled');
UPDATE job_totals SET
    jobs           = (SELECT count(*) FROM jobs WHERE jobs.state = job_totals.state),
    expected_bytes = (SELECT coalesce(sum(expected_bytes), 0) FROM jobs WHERE jobs.state = job_totals.state),
    received_bytes = (SELECT coalesce(sum(received_bytes), 0) FROM jobs WHERE jobs.state = job_totals.state),
    unknown_size   = (SELECT count(*) FROM jobs WHERE jobs.state = job_totals.state AND expected_bytes IS NULL);

ALTER TABLE hosts ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;  -- jobs of this host in state queued
UPDATE hosts SET queued = (SELECT count(*) FROM jobs WHERE jobs.host_id = hosts.id AND jobs.state = 'queued');
CREATE INDEX hosts_with_work ON hosts (last_claim) WHERE queued > 0;

CREATE TRIGGER jobs_totals_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_totals SET
        jobs = jobs - 1,
        expected_bytes = expected_bytes - coalesce(OLD.expected_bytes, 0),
        received_bytes = received_bytes - OLD.received_bytes,
        unknown_size = unknown_size - (OLD.expected_bytes IS NULL)
    WHERE state = OLD.state;
    UPDATE hosts SET queued = queued - 1 WHERE id = OLD.host_id AND OLD.state = 'queued';
END;

CREATE TRIGGER jobs_totals_update AFTER UPDATE OF state, expected_bytes, received_bytes ON jobs BEGIN
    UPDATE job_totals SET
        jobs = jobs - 1,
        expected_bytes = expected_bytes - coalesce(OLD.expected_bytes, 0),
        received_bytes = received_bytes - OLD.received_bytes,
        unknown_size = unknown_size - (OLD.expected_bytes IS NULL)
    WHERE state = OLD.state;
    UPDATE job_totals SET
        jobs = jobs + 1,
        expected_bytes = expected_bytes + coalesce(NEW.expected_bytes, 0),
        received_bytes = received_bytes + NEW.received_bytes,
        unknown_size = unknown_size + (NEW.expected_bytes IS NULL)
    WHERE state = NEW.state;
END;

CREATE TRIGGER jobs_host_queued_update AFTER UPDATE OF state ON jobs
WHEN (OLD.state = 'queued') <> (NEW.state = 'queued') BEGIN
    UPDATE hosts SET queued = queued + (CASE WHEN NEW.state = 'queued' THEN 1 ELSE -1 END)
    WHERE id = NEW.host_id;
END;
