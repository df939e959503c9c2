-- The queue's identity: a random number, the same for every worker on the queue, mixed into the
-- names of its temp files. Two queues downloading to one destination (two databases, one output
-- folder) then never take each other's partial file for their own: a resume trusts that the
-- bytes on disk are those its stored validator names, and another queue's bytes of another
-- resource would be spliced with this one's. A queue made before this migration that holds jobs
-- keeps 0, the names it had, so its partial files still resume.
INSERT INTO queue_settings (name, value)
SELECT 'identity', CASE WHEN EXISTS (SELECT 1 FROM jobs) THEN 0 ELSE 1 + floor(random() * 9007199254740990)::bigint END;
