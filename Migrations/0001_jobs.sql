-- The job queue: one row per URL, one row per attempt, one row per host.
-- Times are Unix milliseconds (UTC).

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    url              TEXT    NOT NULL,
    host             TEXT    NOT NULL,              -- lower-cased host:port
    destination      TEXT    NOT NULL UNIQUE,       -- absolute path
    state            TEXT    NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 5,
    next_attempt_at  INTEGER NOT NULL DEFAULT 0,
    lease_token      TEXT,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    last_status      INTEGER,
    last_error       TEXT,
    expected_bytes   INTEGER,
    received_bytes   INTEGER NOT NULL DEFAULT 0,
    etag             TEXT,                          -- validators of the partial temp file
    last_modified    TEXT,
    sha256           TEXT,                          -- lower-case hex, when the user gave one
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
);

-- Claiming: the runnable jobs of one host, soonest first.
CREATE INDEX jobs_by_host_state ON jobs (host, state, next_attempt_at);
-- Counting and listing by state; finding running jobs and the next retry due.
CREATE INDEX jobs_by_state ON jobs (state, next_attempt_at);

CREATE TABLE attempts (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    number      INTEGER NOT NULL,
    lease_token TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    status      INTEGER,
    error       TEXT,
    bytes       INTEGER
);
CREATE INDEX attempts_by_job ON attempts (job_id, number);

CREATE TABLE hosts (
    host          TEXT    PRIMARY KEY,
    paused_until  INTEGER NOT NULL DEFAULT 0,      -- e.g. from Retry-After
    pause_reason  TEXT,
    last_claim    INTEGER NOT NULL DEFAULT 0       -- claim sequence, for round-robin fairness
) WITHOUT ROWID;
