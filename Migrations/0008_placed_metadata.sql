-- What the server said of each file haul placed: its validators (for a refresh's conditional
-- GET), its type, the URL that answered after redirects, and (with `run --checksum sha256`)
-- the file's own sha256. NULL when not known or not given.
ALTER TABLE jobs ADD COLUMN placed_etag TEXT;
ALTER TABLE jobs ADD COLUMN placed_last_modified TEXT;
ALTER TABLE jobs ADD COLUMN content_type TEXT;
ALTER TABLE jobs ADD COLUMN final_url TEXT;
ALTER TABLE jobs ADD COLUMN placed_sha256 TEXT;
