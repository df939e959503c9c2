-- What a user asked every request of one `add` to carry (-H, -A, -u, --netrc): one row per
-- distinct set, shared by the jobs of that add. Jobs added without such options have no
-- profile (NULL), so they cost nothing more to add, claim or fetch.
-- Header values may hold secrets: they are never printed, and a database holding any is made
-- readable by its owner only.

CREATE TABLE request_profiles (
    id          INTEGER PRIMARY KEY,
    headers     TEXT    NOT NULL DEFAULT '',   -- "Name: value" lines, each ending in "\n"
    user_agent  TEXT,                          -- NULL: haul/VERSION
    netrc       TEXT,                          -- NULL: none; '': ~/.netrc; else the file's path
    UNIQUE (headers, user_agent, netrc)
);

ALTER TABLE jobs ADD COLUMN profile_id INTEGER;  -- request_profiles.id, or NULL
