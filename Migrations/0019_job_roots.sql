-- root: the output folder a job was added with (`-d`, absolute and standardised), so that a run
-- can check that no symbolic link below it leads outside, whatever the link's age: a link that
-- was already there when the folder was moved into place (or on another machine's disk, for a
-- shared queue) was never seen when the job was added. NULL for jobs added before this
-- migration: their runs keep the older check (links newer than the job are refused).
ALTER TABLE jobs ADD COLUMN root TEXT;
