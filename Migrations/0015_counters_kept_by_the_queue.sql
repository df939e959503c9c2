-- The counters of job_totals and hosts.queued are kept by the queue's own statements, no longer
-- by triggers on UPDATE of jobs (JobQueue+Counting.swift). An UPDATE of a table with triggers
-- loads the old row for them and runs each as a sub-program, whatever its WHEN clause decides:
-- measured under callgrind, about 12 k instructions a statement, so 24 k a downloaded file
-- (its claim and its completion), although neither was counted by them (a claim is counted by
-- the claim itself since 0012, and a completion now adds to the done counters once per batch).
-- The counters stay what 0012 made them; the trigger on DELETE stays.
DROP TRIGGER jobs_totals_leave;
DROP TRIGGER jobs_totals_enter;
DROP TRIGGER jobs_host_queued_update;
