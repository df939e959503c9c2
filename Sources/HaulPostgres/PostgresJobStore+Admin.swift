import HaulCore

/// Reading and changing jobs on PostgreSQL, for the commands.
extension PostgresJobStore {
    public func job(id: Int) throws -> Job? {
        try rows("\(Self.selectJobs) WHERE j.id = $1", [.int(id)]).first.map(Self.job)
    }

    public func jobs(url: String) throws -> [Job] {
        try rows("\(Self.selectJobs) WHERE j.url = $1 ORDER BY j.id", [.text(url)]).map(Self.job)
    }

    public func attempts(jobID: Int) throws -> [Attempt] {
        // The attempt kept on the job's row comes last: a running job's open attempt, or the
        // attempt that finished a done job (done_attempt_token, migration 0007).
        try rows("""
            SELECT number, started_at, finished_at, status, error, bytes FROM
                (SELECT 0 AS on_row, id AS position, number, started_at, finished_at, status, error, bytes FROM attempts WHERE job_id = $1
                 UNION ALL
                 SELECT 1, 0, attempts, coalesce(attempt_started_at, updated_at), NULL, NULL, NULL, attempt_start_bytes
                 FROM jobs WHERE id = $1 AND state = 'running'
                 UNION ALL
                 SELECT 1, 0, attempts, coalesce(attempt_started_at, finished_at), finished_at, last_status, NULL, received_bytes
                 FROM jobs WHERE id = $1 AND state = 'done' AND done_attempt_token IS NOT NULL) AS a
            ORDER BY on_row, position
            """, [.int(jobID)]).map {
            Attempt(number: $0.int(0), startedAt: $0.int(1), finishedAt: $0.optionalInt(2), status: $0.optionalInt(3),
                    error: $0.optionalString(4), bytes: $0.optionalInt(5))
        }
    }

    /// The WHERE conditions of `filter` on `j` and `h`, numbered from $1, with their values. A
    /// host with a port is that host; one without is every port of it.
    private func conditions(_ filter: JobFilter) -> ([String], [Arg]) {
        var conditions = ["j.id > $1"]
        var values: [Arg] = [.int(filter.afterID)]
        if let state = filter.state {
            values.append(.text(state.rawValue))
            conditions.append("j.state = $\(values.count)")
        }
        if let host = filter.host?.lowercased() {
            if HostName.hasPort(host) {
                values.append(.text(host))
                conditions.append("h.host = $\(values.count)")
            } else {
                values.append(.text(host + ":"))
                values.append(.text(host + ";"))
                conditions.append("h.host >= $\(values.count - 1) AND h.host < $\(values.count)")
            }
        }
        return (conditions, values)
    }

    public func list(_ filter: JobFilter) throws -> [Job] {
        var (conditions, values) = conditions(filter)
        values.append(.int(filter.limit))
        return try rows("\(Self.selectJobs) WHERE \(conditions.joined(separator: " AND ")) ORDER BY j.id LIMIT $\(values.count)",
                        values).map(Self.job)
    }

    public func count(_ filter: JobFilter) throws -> Int {
        let (conditions, values) = conditions(filter)
        return try one("SELECT count(*) FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE \(conditions.joined(separator: " AND "))",
                       values).int(0)
    }

    /// Keyset pages (`WHERE id > last ORDER BY id LIMIT batch`), each read in its own statement, so
    /// no snapshot is held while `body` runs.
    @discardableResult
    public func forEachJob(state: JobState?, after: Int, batch: Int, _ body: (Job) throws -> Void) throws -> Int {
        precondition(batch > 0, "forEachJob needs a batch of at least one job")
        var last = after
        var count = 0
        while true {
            let page = try state.map {
                try rows("\(Self.selectJobs) WHERE j.id > $1 AND j.state = $2 ORDER BY j.id LIMIT $3",
                         [.int(last), .text($0.rawValue), .int(batch)])
            } ?? rows("\(Self.selectJobs) WHERE j.id > $1 ORDER BY j.id LIMIT $2", [.int(last), .int(batch)])
            let jobs = page.map(Self.job)
            for job in jobs { try body(job) }
            count += jobs.count
            guard jobs.count == batch, let final = jobs.last else { return count }
            last = final.id
        }
    }

    public func identity() throws -> Int {
        // Migrations/postgres/0005_queue_identity.sql.
        try one("SELECT value FROM queue_settings WHERE name = 'identity'").int(0)
    }

    public func jobFolders() throws -> Set<String> {
        // Recorded by `add` (Migrations/postgres/0002_job_folders.sql): no scan of the jobs.
        Set(try rows("SELECT folder FROM job_folders").map { JobBatch.folder(recorded: $0.string(0)) })
    }

    public func cancel(_ ids: [Int]) throws -> [AdminOutcome] {
        try write { now in
            try ids.map { id in
                guard let state = try state(of: id) else { return .notFound }
                guard state == .queued || state == .running || state == .failed else { return .unchanged(state) }
                // A running job's open attempt (on its row) gets its record, ended now.
                try run("""
                    INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, error)
                    SELECT id, attempts, lease_token, coalesce(attempt_started_at, updated_at), $1, 'cancelled' FROM jobs
                    WHERE id = $2 AND state = 'running'
                    """, [.int(now), .int(id)])
                try run("""
                    UPDATE jobs SET state = 'cancelled', last_error = coalesce(last_error, 'cancelled by the user'),
                        finished_at = $1, updated_at = $1, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                    WHERE id = $2
                    """, [.int(now), .int(id)])
                return .changed
            }
        }
    }

    public func retry(_ ids: [Int]) throws -> [AdminOutcome] {
        try write { now in
            try ids.map { id in
                guard let state = try state(of: id) else { return .notFound }
                guard state == .failed || state == .cancelled else { return .unchanged(state) }
                try requeue("id = $2", [.int(id)], now: now)
                return .changed
            }
        }
    }

    public func retryAllFailed() throws -> Int {
        try write { now in try requeue("state = 'failed'", [], now: now) }
    }

    @discardableResult
    private func requeue(_ condition: String, _ values: [Arg], now: Int) throws -> Int {
        try run("""
            UPDATE jobs SET state = 'queued', attempts = 0, lost_leases = 0, next_attempt_at = 0, last_error = NULL, error_kind = NULL,
                finished_at = NULL, updated_at = $1
            WHERE \(condition)
            """, [.int(now)] + values)
    }

    private func state(of id: Int) throws -> JobState? {
        try rows("SELECT state FROM jobs WHERE id = $1 FOR UPDATE", [.int(id)]).first.flatMap { JobState(rawValue: $0.string(0)) }
    }

    @discardableResult
    public func refetch(_ jobs: [Refetch]) throws -> Int {
        try write { now in
            var changed = 0
            for job in jobs {
                let identity = job.adopt
                let keepIdentity = identity == nil && job.conditional
                // The record of the attempt that finished the job leaves its row for attempts
                // first (migration 0007), as the completion would have written it. The row is
                // locked before the record is written (`old`): a concurrent refetch of the same
                // job waits, then finds it queued and writes nothing.
                changed += try run("""
                    WITH old AS (
                        SELECT id, attempts, done_attempt_token, attempt_started_at, finished_at, last_status, received_bytes
                        FROM jobs WHERE id = $8 AND state = 'done' FOR UPDATE
                    ),
                    record AS (
                        INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, status, bytes)
                        SELECT id, attempts, done_attempt_token, coalesce(attempt_started_at, finished_at), finished_at, last_status, received_bytes
                        FROM old WHERE done_attempt_token IS NOT NULL
                    )
                    UPDATE jobs SET state = 'queued', attempts = 0, lost_leases = 0, next_attempt_at = 0, last_error = NULL, error_kind = NULL,
                        finished_at = NULL, updated_at = $1, kept = false, done_attempt_token = NULL,
                        placed_size = CASE WHEN $6 THEN placed_size ELSE $2 END,
                        placed_mtime = CASE WHEN $6 THEN placed_mtime ELSE $3 END,
                        placed_inode = CASE WHEN $6 THEN placed_inode ELSE $4 END,
                        placed_ctime = CASE WHEN $6 THEN placed_ctime ELSE $5 END,
                        placed_etag = CASE WHEN $7 THEN placed_etag END,
                        placed_last_modified = CASE WHEN $7 THEN placed_last_modified END
                    WHERE id IN (SELECT id FROM old)
                    """, [.int(now), .int(identity?.stored.size), .int(identity?.stored.modified),
                          .int(identity?.stored.inode), .int(identity?.stored.changed),
                          .bool(keepIdentity), .bool(job.conditional), .int(job.jobID)])
            }
            return changed
        }
    }

    static let countByState = """
        SELECT state, count(*), coalesce(sum(expected_bytes), 0), coalesce(sum(received_bytes), 0),
            count(*) FILTER (WHERE expected_bytes IS NULL)
        FROM jobs GROUP BY state
        """

    /// One snapshot of the queue. The counts come from the jobs table itself (no counter rows
    /// for claims and completions to queue on): one pass over it.
    public func status() throws -> QueueStatus {
        try read { now in try snapshot(now: now, counts: try rows(Self.countByState)) }
    }

    /// How old the counts of `recentStatus` may be, in ms, at least.
    static let recentCountsAge = 2000
    /// Counts are also kept for this many times as long as counting took: counting reads every
    /// job, and the worker counting waits for it in its exchange (0.4 s a count at 1,000,000
    /// jobs), so the workers spend at most about a twentieth of their time counting.
    static let recountCostFactor = 20
    /// The advisory lock of the worker counting for `state_counts` ("haulcnts").
    static let countingLock = 0x6861_756C_636E_7473

    /// `status()` with counts at most `recentCountsAge` old, or `recountCostFactor` times as old
    /// as the last count took: one worker at a time counts afresh (the others read what it
    /// counted), so the jobs are read about once per interval over all workers, not once a
    /// second by each.
    public func recentStatus() throws -> QueueStatus {
        try write { now in
            let last = try one("SELECT min(counted_at), max(count_ms) FROM state_counts")
            let maximumAge = max(Self.recentCountsAge, (last.optionalInt(1) ?? 0) * Self.recountCostFactor)
            if last.optionalInt(0).map({ now - $0 > maximumAge }) ?? true,
               try one("SELECT pg_try_advisory_xact_lock($1)", [.int(Self.countingLock)]).bool(0) {
                try run("DELETE FROM state_counts")
                // clock_timestamp() is read as the grouped rows come out, once every job was read.
                try run("""
                    INSERT INTO state_counts (state, jobs, expected_bytes, received_bytes, unknown_size, counted_at, count_ms)
                    SELECT c.*, $1::bigint, (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::bigint
                    FROM (\(Self.countByState)) AS c
                    """, [.int(now)])
            }
            return try snapshot(now: now, counts: try rows(
                "SELECT state, jobs, expected_bytes, received_bytes, unknown_size FROM state_counts"))
        }
    }

    /// The rest of a snapshot beside `counts` (rows of state, jobs, expected, received, unknown).
    private func snapshot(now: Int, counts: PostgresRows) throws -> QueueStatus {
        var status = QueueStatus()
        for row in counts {
            guard let state = JobState(rawValue: row.string(0)) else { continue }
            let (count, expected, received, unknown) = (row.int(1), row.int(2), row.int(3), row.int(4))
            status.counts[state] = count
            if state != .cancelled {
                status.expectedBytes += expected
                status.receivedBytes += received
                status.unknownSize += unknown
            }
            if state == .queued || state == .running {
                status.pendingBytes += max(0, expected - received)
                status.pendingUnknownSize += unknown
            }
        }
        let retry = try one("""
            SELECT count(*), min(next_attempt_at) FROM jobs WHERE state = 'queued' AND next_attempt_at > 0 AND next_attempt_at > $1
            """, [.int(now)])
        status.waitingForRetry = retry.int(0)
        status.nextRetryAt = retry.optionalInt(1)
        status.pausedHosts = try rows("""
            SELECT host, paused_until, pause_reason FROM hosts WHERE paused_until > $1 ORDER BY paused_until
            """, [.int(now)]).map { (host: $0.string(0), until: $0.int(1), reason: $0.optionalString(2)) }
        status.slotsHeld = try one("SELECT count(*) FROM host_slots WHERE expires_at > $1", [.int(now)]).int(0)
        status.limitedHosts = try rows("""
            SELECT h.host, h.current_limit, \(Self.capOfHost) FROM hosts h
            WHERE h.current_limit IS NOT NULL AND EXISTS (SELECT 1 FROM host_slots s WHERE s.host_id = h.id AND s.expires_at > $1)
            ORDER BY h.host
            """, [.int(now)]).map { (host: $0.string(0), limit: $0.int(1), cap: $0.int(2)) }
        status.topFailures = try rows("""
            SELECT coalesce(error_kind, last_error) AS kind, count(*) AS n FROM jobs WHERE state = 'failed'
            GROUP BY kind ORDER BY n DESC, kind LIMIT 5
            """).map { (reason: $0.optionalString(0) ?? "unknown", count: $0.int(1)) }
        return status
    }
}
