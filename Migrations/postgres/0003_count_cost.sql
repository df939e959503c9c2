-- How long the last count of state_counts took (ms of server time), so that workers count again
-- only after many times that: counting reads every job, 0.4 s at 1,000,000 jobs, and the worker
-- counting waits for it in its exchange.
ALTER TABLE state_counts ADD COLUMN count_ms bigint NOT NULL DEFAULT 0;
