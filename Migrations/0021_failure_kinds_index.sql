-- The failed jobs by the kind of their reason, in order: `status` and the run's summary count
-- the commonest kinds (JobQueue.status) by reading this index, not by sorting every failed
-- job's reason (a temporary B-tree in memory: 230 MB for 400,000 failed jobs, 419 MB for
-- 1,000,000; 47 MB and 0.08 s against 197 MB and 0.55 s for the query alone at 400,000). It
-- holds failed jobs only, about 100 bytes each.
CREATE INDEX jobs_failed_kind ON jobs (coalesce(error_kind, last_error)) WHERE state = 'failed';
