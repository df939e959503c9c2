-- Files already at a destination, and the files haul placed.
-- A job's destination may already hold a file that haul did not place (the user's): what to do
-- with it is the job's if_exists; haul records what it placed, so that its own files can be
-- told from the user's later (a re-fetch may replace haul's own file, never the user's unasked).

-- NULL: skip (keep the file that is there; the job ends done, kept = 1); 'replace'; 'rename'
-- (place the new file beside it as NAME.1.EXT, NAME.2.EXT…).
ALTER TABLE jobs ADD COLUMN if_exists TEXT CHECK (if_exists IN ('replace', 'rename'));
-- 1: the job ended done by keeping the file already at its destination.
ALTER TABLE jobs ADD COLUMN kept INTEGER NOT NULL DEFAULT 0;
-- What haul placed, once done: the path when it is not the destination (rename), the file's
-- size, modification and change times (ns since the epoch) and inode after it was moved there.
-- The change time cannot be set by hand: a file put there since has another.
ALTER TABLE jobs ADD COLUMN placed_path TEXT;
ALTER TABLE jobs ADD COLUMN placed_size INTEGER;
ALTER TABLE jobs ADD COLUMN placed_mtime INTEGER;
ALTER TABLE jobs ADD COLUMN placed_inode INTEGER;
ALTER TABLE jobs ADD COLUMN placed_ctime INTEGER;
