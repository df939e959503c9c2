/// What became of one job named to `cancel` or `retry`.
public enum AdminOutcome: Sendable, Equatable {
    case changed
    case notFound
    /// The job was in a state the operation does not apply to.
    case unchanged(JobState)
}

/// Filters for `JobQueue.list`.
public struct JobFilter: Sendable {
    public var state: JobState?
    public var host: String?
    public var limit: Int
    public var afterID: Int

    public init(state: JobState? = nil, host: String? = nil, limit: Int = 100, afterID: Int = 0) {
        self.state = state
        self.host = host
        self.limit = limit
        self.afterID = afterID
    }

    /// The WHERE conditions on `j` (jobs) and `h` (hosts), with their values. A host with a
    /// port (`example.org:443`) is that host; one without (`example.org`, `[::1]`) is every port
    /// of it.
    var conditions: ([String], [SQLiteBindable]) {
        var conditions = ["j.id > ?"]
        var values: [SQLiteBindable] = [afterID]
        if let state { conditions.append("j.state = ?"); values.append(state.rawValue) }
        if let host = host?.lowercased() {
            if HostName.hasPort(host) {
                conditions.append("h.host = ?")
                values.append(host)
            } else {
                // "host:" ≤ h.host < "host;" (';' follows ':'): every port, through the index.
                conditions.append("h.host >= ? AND h.host < ?")
                values.append(host + ":")
                values.append(host + ";")
            }
        }
        return (conditions, values)
    }
}

/// Telling `host:port` from a bare host, IPv6 literals included.
///
/// Guarantees: `[v6]` and `name` have no port; `[v6]:port` and `name:port` do.
public enum HostName {
    /// True for `host:port` (and `[v6]:port`), false for a bare host.
    public static func hasPort(_ text: String) -> Bool {
        if text.hasPrefix("[") { return text.contains("]:") }
        return text.contains(":")
    }
}

extension JobQueue {
    /// Cancels queued, running or failed jobs. A running job's lease is revoked, so its worker's
    /// late answer is refused.
    public func cancel(_ ids: [Int]) throws -> [AdminOutcome] {
        let now = clock()
        return try database.transaction(.write) {
            try ids.map { id in
                guard let state = try state(of: id) else { return .notFound }
                guard state == .queued || state == .running || state == .failed else { return .unchanged(state) }
                // A running job's open attempt (on its row) gets its record, ended now.
                try database.run("""
                    INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, error)
                    SELECT id, attempts, lease_token, coalesce(attempt_started_at, updated_at), ?, 'cancelled'
                    FROM jobs WHERE id = ? AND state = 'running'
                    """, now, id)
                try counting(id) {
                    try database.run("""
                        UPDATE jobs SET state = 'cancelled', last_error = coalesce(last_error, 'cancelled by the user'),
                            finished_at = ?, updated_at = ?, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                        WHERE id = ?
                        """, now, now, id)
                }
                return .changed
            }
        }
    }

    /// Puts failed or cancelled jobs back in the queue with their attempts reset.
    public func retry(_ ids: [Int]) throws -> [AdminOutcome] {
        try database.transaction(.write) {
            try ids.map { id in
                guard let state = try state(of: id) else { return .notFound }
                guard state == .failed || state == .cancelled else { return .unchanged(state) }
                try counting(id) { try requeue("id = ?", [id]) }
                return .changed
            }
        }
    }

    /// Puts every failed job back in the queue; returns how many.
    public func retryAllFailed() throws -> Int {
        try retryAllFailed(rowsPerStatement: Self.rowsPerStatement)
    }

    /// `retryAllFailed()`, `rowsPerStatement` rows a statement (see `JobQueue.rowsPerStatement`).
    func retryAllFailed(rowsPerStatement: Int) throws -> Int {
        try database.transaction(.write) {
            // A few thousand jobs a statement, walked by id: one statement over every failed job
            // kept a copy of each page it changed in memory (its statement journal), 482 MB for
            // 1,000,000 jobs; and counting them all by host first, in one GROUP BY, sorted the
            // whole failed set in memory (temp_store is MEMORY): 161 MB at 1,000,000 jobs against
            // 57 MB at 100,000. Each chunk is counted by host (a requeue keeps the bytes: out of
            // failed, into queued) and requeued by the same id range, so the counters move with
            // exactly the rows that moved.
            var changed = 0
            var after = 0
            let chunk = max(1, rowsPerStatement)
            while let last = try database.firstRow("""
                SELECT max(id) FROM (SELECT id FROM jobs WHERE state = 'failed' AND id > ? ORDER BY id LIMIT ?)
                """, [after, chunk], { $0.optionalInt(0) }) ?? nil {
                let failed = try database.rows("""
                    SELECT host_id, count(*), coalesce(sum(expected_bytes), 0), sum(received_bytes), count(*) - count(expected_bytes)
                    FROM jobs WHERE state = 'failed' AND id > ? AND id <= ? GROUP BY host_id
                    """, [after, last]) { (host: $0.int(0), jobs: $0.int(1), expected: $0.int(2), received: $0.int(3), unknownSize: $0.int(4)) }
                try requeue("state = 'failed' AND id > ? AND id <= ?", [after, last])
                changed += database.changes
                let jobs = failed.reduce(0) { $0 + $1.jobs }, expected = failed.reduce(0) { $0 + $1.expected }
                let received = failed.reduce(0) { $0 + $1.received }, unknownSize = failed.reduce(0) { $0 + $1.unknownSize }
                try addTotals(state: JobState.failed.rawValue, jobs: -jobs, expected: -expected, received: -received, unknownSize: -unknownSize)
                try addTotals(state: JobState.queued.rawValue, jobs: jobs, expected: expected, received: received, unknownSize: unknownSize)
                for group in failed { try addQueued(group.jobs, host: group.host) }
                after = last
            }
            return changed
        }
    }

    private func requeue(_ condition: String, _ values: [SQLiteBindable]) throws {
        let now = clock()
        try database.statement("""
            UPDATE jobs SET state = 'queued', attempts = 0, lost_leases = 0, next_attempt_at = 0, last_error = NULL, error_kind = NULL,
                finished_at = NULL, updated_at = ?
            WHERE \(condition)
            """).run([now] + values)
    }

    private func state(of id: Int) throws -> JobState? {
        try database.firstRow("SELECT state FROM jobs WHERE id = ?", [id]) { JobState(rawValue: $0.string(0)) } ?? nil
    }

    /// One job by id.
    public func job(id: Int) throws -> Job? {
        try database.firstRow("\(Job.select) WHERE j.id = ?", [id], Job.init)
    }

    /// The jobs fetching `url` (one per destination).
    public func jobs(url: String) throws -> [Job] {
        try database.rows("\(Job.select) WHERE j.url = ? ORDER BY j.id", [url], Job.init)
    }

    /// The attempts of a job, oldest first (in the order they began); the one kept on its row
    /// comes last: a running job's open attempt, or the attempt that finished a done job
    /// (`done_attempt_token`, migration 0017).
    public func attempts(jobID: Int) throws -> [Attempt] {
        try database.rows("""
            SELECT number, started_at, finished_at, status, error, bytes FROM
                (SELECT 0 AS on_row, id AS position, number, started_at, finished_at, status, error, bytes FROM attempts WHERE job_id = ?1
                 UNION ALL
                 SELECT 1, 0, attempts, coalesce(attempt_started_at, updated_at), NULL, NULL, NULL, attempt_start_bytes
                 FROM jobs WHERE id = ?1 AND state = 'running'
                 UNION ALL
                 SELECT 1, 0, attempts, coalesce(attempt_started_at, finished_at), finished_at, last_status, NULL, received_bytes
                 FROM jobs WHERE id = ?1 AND state = 'done' AND done_attempt_token IS NOT NULL)
            ORDER BY on_row, position
            """, [jobID]) {
            Attempt(number: $0.int(0), startedAt: $0.int(1), finishedAt: $0.optionalInt(2), status: $0.optionalInt(3),
                    error: $0.optionalString(4), bytes: $0.optionalInt(5))
        }
    }

    /// Jobs in id order, filtered.
    public func list(_ filter: JobFilter) throws -> [Job] {
        var (conditions, values) = filter.conditions
        values.append(filter.limit)
        return try database.rows(
            "\(Job.select) WHERE \(conditions.joined(separator: " AND ")) ORDER BY j.id LIMIT ?", values, Job.init)
    }

    /// How many jobs `filter` matches, whatever its limit.
    public func count(_ filter: JobFilter) throws -> Int {
        let (conditions, values) = filter.conditions
        return try database.scalarInt(
            "SELECT count(*) FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE \(conditions.joined(separator: " AND "))", values)
    }

    /// A consistent snapshot of the queue. Cheap at any queue length: the counts come from
    /// totals the queue keeps (running jobs, the few under a lease, are counted afresh).
    public func status() throws -> QueueStatus {
        let now = clock()
        return try database.transaction(.read) {
            var status = QueueStatus()
            let running = try runningTotals()
            var rows = try database.rows(
                "SELECT state, jobs, expected_bytes, received_bytes, unknown_size FROM job_totals WHERE state <> 'running'", [], {
                    (JobState(rawValue: $0.string(0)), $0.int(1), $0.int(2), $0.int(3), $0.int(4)) })
            rows.append((.running, running.jobs, running.expectedBytes, running.receivedBytes, running.unknownSize))
            for row in rows {
                guard let state = row.0 else { continue }
                status.counts[state] = row.1
                if state != .cancelled {
                    status.expectedBytes += row.2
                    status.receivedBytes += row.3
                    status.unknownSize += row.4
                }
                if state == .queued || state == .running {
                    status.pendingBytes += max(0, row.2 - row.3)
                    status.pendingUnknownSize += row.4
                }
            }
            if let (count, next) = try database.firstRow(
                """
                SELECT count(*), min(next_attempt_at) FROM jobs
                WHERE state = 'queued' AND next_attempt_at > 0 AND next_attempt_at > ?
                """,
                [now], { ($0.int(0), $0.optionalInt(1)) }) {
                status.waitingForRetry = count
                status.nextRetryAt = next
            }
            status.pausedHosts = try database.rows(
                "SELECT host, paused_until, pause_reason FROM hosts WHERE paused_until > ? ORDER BY paused_until", [now]) {
                (host: $0.string(0), until: $0.int(1), reason: $0.optionalString(2))
            }
            status.slotsHeld = try database.scalarInt("SELECT count(*) FROM host_slots WHERE expires_at > ?", [now])
            status.limitedHosts = try database.rows("""
                SELECT h.host, h.current_limit, \(Self.capOfHost) FROM hosts h
                WHERE h.current_limit IS NOT NULL AND EXISTS (SELECT 1 FROM host_slots s WHERE s.host_id = h.id AND s.expires_at > ?)
                ORDER BY h.host
                """, [now]) { (host: $0.string(0), limit: $0.int(1), cap: $0.int(2)) }
            status.topFailures = try database.rows(Self.topFailuresSQL) { (reason: $0.optionalString(0) ?? "unknown", count: $0.int(1)) }
            return status
        }
    }
}

extension JobQueue {
    /// Rows one statement of a bulk change (`retryAllFailed`) changes at most: a statement that
    /// may fail half-way keeps a copy of each page it changes until it ends.
    static let rowsPerStatement = 5_000

    /// The five commonest kinds of failure: read in order from the index `jobs_failed_kind`
    /// (Migrations/0021), so the failed jobs are counted kind by kind, never sorted in memory.
    static let topFailuresSQL = """
        SELECT coalesce(error_kind, last_error) AS kind, count(*) AS n FROM jobs WHERE state = 'failed'
        GROUP BY kind ORDER BY n DESC, kind LIMIT 5
        """
}
