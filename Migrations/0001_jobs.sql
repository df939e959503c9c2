-- The job queue: one row per URL, one row per attempt, one row per host.
-- Times are Unix milliseconds (UTC).

CREATE TABLE hosts (
    id            INTEGER PRIMARY KEY,
    host          TEXT    NOT NULL UNIQUE,         -- lower-cased host:port
    paused_until  INTEGER NOT NULL DEFAULT 0,      -- e.g. from Retry-After
    pause_reason  TEXT,
    last_claim    INTEGER NOT NULL DEFAULT 0       -- claim sequence, for round-robin fairness
);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    url              TEXT    NOT NULL,
    host_id          INTEGER NOT NULL,              -- hosts.id (no FOREIGN KEY clause: checking it
                                                    -- costs a third of the time of a bulk add; hosts
                                                    -- rows are never deleted)
    destination      TEXT    NOT NULL,              -- absolute path
    destination_key  INTEGER NOT NULL UNIQUE,       -- 64-bit FNV-1a hash of destination's UTF-8
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

-- Indexes are small on purpose: adding a million jobs must stay fast, so only the claim index
-- covers every new (queued) job; the others are partial and hold few rows.
-- Claiming: the queued jobs of one host, soonest first.
CREATE INDEX jobs_claimable ON jobs (host_id, next_attempt_at) WHERE state = 'queued';
-- Running jobs: per-host caps and lease expiry.
CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE state = 'running';
-- Jobs waiting for a retry (new jobs have next_attempt_at 0 and are not in it).
CREATE INDEX jobs_waiting ON jobs (next_attempt_at) WHERE state = 'queued' AND next_attempt_at > 0;
-- Destinations are unique through destination_key: equal paths have equal keys. A unique index
-- on the path text itself would double the cost of adding a million jobs. Two different paths
-- with one key (odds about 1 in 10^7 at ten million jobs) make the second add a clear rejection.
-- Failure reasons, for status.
CREATE INDEX jobs_failed ON jobs (last_error) WHERE state = 'failed';

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
