-- The concurrency a host that said it is overloaded (429, 503) is held to below its cap: halved
-- at each such answer (never below 1), grown back by one after a run of successes; NULL when it
-- is back at its cap. Written by the run that holds it, for `haul status` to show.
ALTER TABLE hosts ADD COLUMN current_limit INTEGER;
