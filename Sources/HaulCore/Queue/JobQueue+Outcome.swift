/// Where a rescheduled job went.
public enum RescheduleResult: Sendable, Equatable {
    case queued(at: Int)
    /// It had used all its attempts: failed, with the given reason.
    case failed(reason: String)
}

extension JobQueue {
    /// Renews the leases of jobs still held; returns the ids whose lease was lost (an expired
    /// lease is never renewed, even before another claimer took the job back).
    public func renew(_ leases: [(jobID: Int, token: String)], leaseMilliseconds: Int) throws -> [Int] {
        try renew(leases.map { JobLeaseID(jobID: $0.jobID, token: $0.token) }, now: clock(), leaseMilliseconds: leaseMilliseconds)
            .map(\.jobID)
    }

    func renew(_ leases: [JobLeaseID], now: Int, leaseMilliseconds: Int) throws -> [JobLeaseID] {
        guard !leases.isEmpty else { return [] }
        return try database.transaction(.write) {
            let statement = try database.statement("""
                UPDATE OR FAIL jobs SET lease_expires_at = ? WHERE id = ? AND lease_token = ? AND state = 'running' AND lease_expires_at > ?
                """)
            var lost: [JobLeaseID] = []
            for lease in leases {
                try statement.run([now + leaseMilliseconds, lease.jobID, lease.token, now])
                if database.changes == 0 { lost.append(lease) }
            }
            return lost
        }
    }

    /// Records progress of running transfers (bytes, size, validators). Stale entries are
    /// skipped, and returned: their leases are no longer the caller's (a job cancelled, or
    /// taken back), which the engine hears at once rather than at its next renewal.
    @discardableResult
    public func recordProgress(_ updates: [Progress]) throws -> [JobLeaseID] {
        guard !updates.isEmpty else { return [] }
        let now = clock()
        return try database.transaction(.write) {
            let statement = try database.statement("""
                UPDATE OR FAIL jobs SET received_bytes = ?, expected_bytes = ?, etag = ?, last_modified = ?, partial_url = ?, updated_at = ?
                WHERE id = ? AND lease_token = ? AND state = 'running'
                """)
            var stale: [JobLeaseID] = []
            for update in updates {
                try statement.run([update.receivedBytes, update.expectedBytes, update.etag, update.lastModified, update.url, now,
                                   update.jobID, update.token])
                if database.changes == 0 { stale.append(JobLeaseID(jobID: update.jobID, token: update.token)) }
            }
            return stale
        }
    }

    /// Marks a job done. Throws `StaleLeaseError` when `token` no longer holds it. The record of
    /// the attempt that did it stays on the job's row (see `attempts(jobID:)`, `refetch`).
    public func complete(jobID: Int, token: String, status: Int, bytes: Int, placed: PlacedFile? = nil, placedBy: String? = nil) throws {
        try database.transaction(.write) {
            var done = DoneTally()
            try complete(jobID: jobID, token: token, status: status, bytes: bytes, placed: placed, placedBy: placedBy, tally: &done)
            try count(done)
        }
    }

    /// `complete`, counted in `tally` (the caller counts it, for a batch at once).
    func complete(jobID: Int, token: String, status: Int, bytes: Int, placed: PlacedFile?, placedBy: String?,
                  tally: inout DoneTally) throws {
        let now = clock()
        try database.transaction(.write) {
            // Bound value by value, not through an array of existentials: the hottest statement
            // of a run, once a file.
            let update = try database.statement("""
                UPDATE OR FAIL jobs SET state = 'done', last_status = ?1, last_error = NULL, error_kind = NULL, received_bytes = ?2,
                    expected_bytes = ?2, finished_at = ?3, updated_at = ?3,
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, etag = NULL, last_modified = NULL,
                    kept = 0, placed_path = ?4, placed_size = ?5, placed_mtime = ?6, placed_inode = ?7, placed_ctime = ?8,
                    placed_etag = ?9, placed_last_modified = ?10, content_type = ?11, final_url = ?12, placed_sha256 = ?13,
                    placed_by = coalesce(?14, lease_owner), done_attempt_token = lease_token
                WHERE id = ?15 AND lease_token = ?16 AND state = 'running'
                """)
            update.reset()
            let stored = placed?.identity.stored
            try update.bind(status, at: 1)
            try update.bind(bytes, at: 2)
            try update.bind(now, at: 3)
            try update.bind(placed?.path, at: 4)
            try update.bind(stored?.size, at: 5)
            try update.bind(stored?.modified, at: 6)
            try update.bind(stored?.inode, at: 7)
            try update.bind(stored?.changed, at: 8)
            try update.bind(placed?.metadata.etag, at: 9)
            try update.bind(placed?.metadata.lastModified, at: 10)
            try update.bind(placed?.metadata.contentType, at: 11)
            try update.bind(placed?.metadata.finalURL, at: 12)
            try update.bind(placed?.metadata.sha256, at: 13)
            try update.bind(placedBy, at: 14)
            try update.bind(jobID, at: 15)
            try update.bind(token, at: 16)
            try update.runBound()
            guard database.changes == 1 else { throw StaleLeaseError(jobID: jobID) }
            // The attempt's record stays on the row (done_attempt_token, migration 0017): one
            // write a file, not two. `refetch` writes it to attempts when the job goes again.
            tally.jobs += 1
            tally.bytes += bytes
        }
    }

    /// Marks a job done because the server answered its conditional request 304: the file haul
    /// placed before is current and stays recorded as it was. Throws `StaleLeaseError` when
    /// `token` no longer holds it.
    public func markUnchanged(jobID: Int, token: String) throws {
        let now = clock()
        try database.transaction(.write) {
            try closeAttempt(jobID: jobID, token: token, now: now, status: 304, error: nil, bytes: 0)
            try database.run("""
                UPDATE OR FAIL jobs SET state = 'done', last_status = 304, last_error = NULL, error_kind = NULL, finished_at = ?, updated_at = ?,
                    received_bytes = coalesce(placed_size, received_bytes), expected_bytes = coalesce(placed_size, expected_bytes),
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, etag = NULL, last_modified = NULL
                WHERE id = ? AND lease_token = ? AND state = 'running'
                """, now, now, jobID, token)
            guard database.changes == 1 else { throw StaleLeaseError(jobID: jobID) }
            try countArrival(of: jobID)
        }
    }

    /// Marks a job done by keeping the file the user already had at its destination (`bytes`
    /// long): nothing of haul's is recorded as placed there. Throws `StaleLeaseError` when
    /// `token` no longer holds it.
    public func keep(jobID: Int, token: String, bytes: Int) throws {
        let now = clock()
        try database.transaction(.write) {
            try closeAttempt(jobID: jobID, token: token, now: now, status: nil, error: Job.keptNote, bytes: 0)
            try database.run("""
                UPDATE OR FAIL jobs SET state = 'done', last_status = NULL, last_error = NULL, error_kind = NULL, received_bytes = ?,
                    expected_bytes = ?, finished_at = ?, updated_at = ?,
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, etag = NULL, last_modified = NULL,
                    kept = 1, placed_path = NULL, placed_size = NULL, placed_mtime = NULL, placed_inode = NULL, placed_ctime = NULL,
                    placed_etag = NULL, placed_last_modified = NULL, content_type = NULL, final_url = NULL, placed_sha256 = NULL,
                    placed_by = NULL
                WHERE id = ? AND lease_token = ? AND state = 'running'
                """, bytes, bytes, now, now, jobID, token)
            guard database.changes == 1 else { throw StaleLeaseError(jobID: jobID) }
            try countArrival(of: jobID)
        }
    }

    /// Puts a job back in the queue to be tried again at `at` (Unix ms) — or fails it when it
    /// has used all its attempts. Throws `StaleLeaseError` when `token` no longer holds it.
    @discardableResult
    public func reschedule(jobID: Int, token: String, at: Int, status: Int?, error: String, bytes: Int? = nil) throws -> RescheduleResult {
        let now = clock()
        return try database.transaction(.write) {
            guard let (attempts, maxAttempts) = try database.firstRow(
                "SELECT attempts, max_attempts FROM jobs WHERE id = ? AND lease_token = ? AND state = 'running'",
                [jobID, token], { ($0.int(0), $0.int(1)) })
            else { throw StaleLeaseError(jobID: jobID) }
            try closeAttempt(jobID: jobID, token: token, now: now, status: status, error: error, bytes: bytes)
            if attempts >= maxAttempts {
                let reason = "gave up after \(attempts) attempt\(attempts == 1 ? "" : "s"): \(error)"
                try finishFailed(jobID: jobID, status: status, reason: reason, now: now)
                try countArrival(of: jobID)
                return .failed(reason: reason)
            }
            try database.run("""
                UPDATE OR FAIL jobs SET state = 'queued', next_attempt_at = ?, last_status = ?, last_error = ?, error_kind = ?, updated_at = ?,
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                WHERE id = ?
                """, at, status, error, FailureKind.of(error), now, jobID)
            try countArrival(of: jobID)
            return .queued(at: at)
        }
    }

    /// Fails a job for good, with the reason the user will read.
    /// Throws `StaleLeaseError` when `token` no longer holds it.
    public func fail(jobID: Int, token: String, status: Int?, reason: String, bytes: Int? = nil) throws {
        let now = clock()
        try database.transaction(.write) {
            guard try database.scalarInt(
                "SELECT count(*) FROM jobs WHERE id = ? AND lease_token = ? AND state = 'running'", [jobID, token]) == 1
            else { throw StaleLeaseError(jobID: jobID) }
            try closeAttempt(jobID: jobID, token: token, now: now, status: status, error: reason, bytes: bytes)
            try finishFailed(jobID: jobID, status: status, reason: reason, now: now)
            try countArrival(of: jobID)
        }
    }

    /// Hands a job back to the queue without counting the attempt (the run was interrupted,
    /// not the transfer refused). Returns false when the lease was already lost.
    @discardableResult
    public func release(jobID: Int, token: String, reason: String, notBefore: Int? = nil) throws -> Bool {
        let now = clock()
        // The attempt's record says it was not counted (see `Attempt.wasCounted`).
        let reason = reason.hasPrefix(Attempt.interruptedPrefix) ? reason : "\(Attempt.interruptedPrefix) \(reason)"
        return try database.transaction(.write) {
            try closeAttempt(jobID: jobID, token: token, now: now, status: nil, error: reason, bytes: nil)
            try database.run("""
                UPDATE OR FAIL jobs SET state = 'queued', attempts = max(attempts - 1, 0), updated_at = ?,
                    next_attempt_at = coalesce(?, next_attempt_at),
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                WHERE id = ? AND lease_token = ? AND state = 'running'
                """, now, notBefore, jobID, token)
            guard database.changes == 1 else { return false }
            try countArrival(of: jobID)
            return true
        }
    }

    /// Pauses every request to `host` until `until` (Unix ms), e.g. for a Retry-After.
    /// An existing later pause is kept.
    public func pauseHost(_ host: String, until: Int, reason: String) throws {
        try database.transaction(.write) {
            try database.run("""
                INSERT INTO hosts (host, paused_until, pause_reason) VALUES (?1, ?2, ?3)
                ON CONFLICT (host) DO UPDATE SET
                    pause_reason = CASE WHEN ?2 > paused_until THEN ?3 ELSE pause_reason END,
                    paused_until = max(paused_until, ?2)
                """, host, until, reason)
        }
    }

    private func finishFailed(jobID: Int, status: Int?, reason: String, now: Int) throws {
        try database.run("""
            UPDATE OR FAIL jobs SET state = 'failed', last_status = ?, last_error = ?, error_kind = ?, finished_at = ?, updated_at = ?,
                lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
            WHERE id = ?
            """, status, reason, FailureKind.of(reason), now, now, jobID)
    }

    /// Writes the record of the job's open attempt, ended now; call it while `token` still holds
    /// the job (before the update that moves the job on). Nothing is written for a stale token.
    private func closeAttempt(jobID: Int, token: String, now: Int, status: Int?, error: String?, bytes: Int?) throws {
        let close = try database.statement("""
            INSERT OR FAIL INTO attempts (job_id, number, lease_token, started_at, finished_at, status, error, bytes)
            SELECT id, attempts, lease_token, coalesce(attempt_started_at, updated_at), ?1, ?2, ?3, ?4
            FROM jobs WHERE id = ?5 AND lease_token = ?6 AND state = 'running'
            """)
        close.reset()
        try close.bind(now, at: 1)
        try close.bind(status, at: 2)
        try close.bind(error, at: 3)
        try close.bind(bytes, at: 4)
        try close.bind(jobID, at: 5)
        try close.bind(token, at: 6)
        try close.runBound()
    }
}
