import HaulCore

/// Outcomes on PostgreSQL: each moves a job only under its current lease token. Completions, the
/// common case, go in one statement for the whole batch.
extension PostgresJobStore {
    /// Records outcomes, one result each, each judged after the earlier outcomes for its job:
    /// completions gather into one statement until an outcome names a job already gathered,
    /// which sends them first; outcomes of other jobs do not touch them, so they go at once.
    func record(_ outcomes: [Outcome], worker: String, now: Int) throws -> [OutcomeResult] {
        var results = [OutcomeResult](repeating: .recorded, count: outcomes.count)
        var run: [(index: Int, completion: Completion)] = []
        var inRun = Set<Int>()
        func flush() throws {
            guard !run.isEmpty else { return }
            let completed = try complete(run.map(\.completion), worker: worker, now: now)
            for item in run where !completed.contains(item.completion.jobID) { results[item.index] = .stale }
            run = []
            inRun = []
        }
        for (index, outcome) in outcomes.enumerated() {
            if inRun.contains(outcome.jobID) { try flush() }
            if case .done(let jobID, let token, let status, let bytes, let placed) = outcome {
                run.append((index, (jobID, token, status, bytes, placed)))
                inRun.insert(jobID)
                continue
            }
            results[index] = try recordOne(outcome, worker: worker, now: now)
        }
        try flush()
        return results
    }

    /// A completion: what `completeSQL` takes for one job.
    typealias Completion = (jobID: Int, token: String, status: Int, bytes: Int, placed: PlacedFile?)

    /// The outcomes as completions when every one is a completion and no job is named twice
    /// (one statement records them all), else nil.
    static func completionsOnly(_ outcomes: [Outcome]) -> [Completion]? {
        var items: [Completion] = []
        var seen = Set<Int>()
        for outcome in outcomes {
            guard case .done(let jobID, let token, let status, let bytes, let placed) = outcome, seen.insert(jobID).inserted else { return nil }
            items.append((jobID, token, status, bytes, placed))
        }
        return items
    }

    /// Marks jobs done in one statement; returns the ids completed (the others' tokens were stale).
    func complete(_ items: [Completion], worker: String, now: Int) throws -> Set<Int> {
        Set(try rows(Self.completeSQL, completeArgs(items, worker: worker, now: now)).map { $0.int(0) })
    }

    /// Marks done the jobs still held under their tokens, each attempt's record kept on its job's
    /// row (done_attempt_token, migration 0007: one write a job, not two); returns their ids.
    static let completeSQL = """
        WITH o AS (
            SELECT * FROM unnest($2::bigint[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::text[]::bigint[],
                                 $8::text[]::bigint[], $9::text[]::bigint[], $10::text[]::bigint[], $11::text[], $12::text[],
                                 $13::text[], $14::text[], $15::text[])
                AS o(id, token, status, bytes, path, size, mtime, inode, ctime, etag, modified, type, final, sha)
        )
        UPDATE jobs j SET state = 'done', last_status = o.status, last_error = NULL, error_kind = NULL,
            received_bytes = o.bytes, expected_bytes = o.bytes, finished_at = $1, updated_at = $1,
            lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, etag = NULL, last_modified = NULL,
            kept = false, placed_path = o.path, placed_size = o.size, placed_mtime = o.mtime, placed_inode = o.inode,
            placed_ctime = o.ctime, placed_etag = o.etag, placed_last_modified = o.modified, content_type = o.type,
            final_url = o.final, placed_sha256 = o.sha, placed_by = coalesce($16, j.lease_owner),
            done_attempt_token = j.lease_token
        FROM o WHERE j.id = o.id AND j.lease_token = o.token AND \(PostgresJobStore.heldRunning)
        RETURNING j.id
        """

    func completeArgs(_ items: [Completion], worker: String, now: Int) -> [Arg] {
        let placed = items.map(\.placed)
        return [.int(now), .ints(items.map(\.jobID)), .texts(items.map(\.token)), .ints(items.map(\.status)),
                .ints(items.map(\.bytes)), .texts(placed.map { $0?.path }),
                .optionalInts(placed.map { $0?.identity.stored.size }),
                .optionalInts(placed.map { $0?.identity.stored.modified }),
                .optionalInts(placed.map { $0?.identity.stored.inode }),
                .optionalInts(placed.map { $0?.identity.stored.changed }),
                .texts(placed.map { $0?.metadata.etag }), .texts(placed.map { $0?.metadata.lastModified }),
                .texts(placed.map { $0?.metadata.contentType }), .texts(placed.map { $0?.metadata.finalURL }),
                .texts(placed.map { $0?.metadata.sha256 }), .text(worker.isEmpty ? nil : worker)]
    }

    private func recordOne(_ outcome: Outcome, worker: String, now: Int) throws -> OutcomeResult {
        switch outcome {
        case .done(let jobID, let token, let status, let bytes, let placed):
            return try complete([(jobID, token, status, bytes, placed)], worker: worker, now: now).isEmpty ? .stale : .recorded
        case .kept(let jobID, let token, let bytes):
            guard try run("""
                UPDATE jobs SET state = 'done', last_status = NULL, last_error = NULL, error_kind = NULL, received_bytes = $3,
                    expected_bytes = $3, finished_at = $4, updated_at = $4,
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, etag = NULL, last_modified = NULL,
                    kept = true, placed_path = NULL, placed_size = NULL, placed_mtime = NULL, placed_inode = NULL, placed_ctime = NULL,
                    placed_etag = NULL, placed_last_modified = NULL, content_type = NULL, final_url = NULL, placed_sha256 = NULL,
                    placed_by = NULL
                WHERE id = $1 AND lease_token = $2 AND state = 'running'
                """, [.int(jobID), .text(token), .int(bytes), .int(now)]) == 1 else { return .stale }
            try closeAttempt(jobID: jobID, token: token, now: now, status: nil, error: Job.keptNote, bytes: 0)
            return .recorded
        case .unchanged(let jobID, let token):
            guard try run("""
                UPDATE jobs SET state = 'done', last_status = 304, last_error = NULL, error_kind = NULL, finished_at = $3,
                    updated_at = $3, received_bytes = coalesce(placed_size, received_bytes),
                    expected_bytes = coalesce(placed_size, expected_bytes),
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, etag = NULL, last_modified = NULL
                WHERE id = $1 AND lease_token = $2 AND state = 'running'
                """, [.int(jobID), .text(token), .int(now)]) == 1 else { return .stale }
            try closeAttempt(jobID: jobID, token: token, now: now, status: 304, error: nil, bytes: 0)
            return .recorded
        case .retry(let jobID, let token, let at, let status, let error, let progress):
            try recordProgress([progress], now: now)
            guard let held = try rows("""
                SELECT attempts, max_attempts FROM jobs WHERE id = $1 AND lease_token = $2 AND state = 'running' FOR UPDATE
                """, [.int(jobID), .text(token)]).first else { return .stale }
            try closeAttempt(jobID: jobID, token: token, now: now, status: status, error: error, bytes: progress.receivedBytes)
            let attempts = held.int(0)
            if attempts >= held.int(1) {
                let reason = "gave up after \(attempts) attempt\(attempts == 1 ? "" : "s"): \(error)"
                try finishFailed(jobID: jobID, status: status, reason: reason, now: now)
                return .gaveUp(reason: reason)
            }
            try run("""
                UPDATE jobs SET state = 'queued', next_attempt_at = $2, last_status = $3, last_error = $4, error_kind = $5,
                    updated_at = $6, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                WHERE id = $1
                """, [.int(jobID), .int(at > 0 ? at + skew : 0), .int(status), .text(error), .text(FailureKind.of(error)), .int(now)])
            return .recorded
        case .fail(let jobID, let token, let status, let reason):
            guard try !rows("SELECT 1 FROM jobs WHERE id = $1 AND lease_token = $2 AND state = 'running' FOR UPDATE",
                            [.int(jobID), .text(token)]).isEmpty else { return .stale }
            try closeAttempt(jobID: jobID, token: token, now: now, status: status, error: reason, bytes: nil)
            try finishFailed(jobID: jobID, status: status, reason: reason, now: now)
            return .recorded
        case .release(let jobID, let token, let reason, let progress, let notBefore):
            if let progress { try recordProgress([progress], now: now) }
            let reason = reason.hasPrefix(Attempt.interruptedPrefix) ? reason : "\(Attempt.interruptedPrefix) \(reason)"
            guard try run("""
                UPDATE jobs SET state = 'queued', attempts = greatest(attempts - 1, 0), updated_at = $3,
                    next_attempt_at = coalesce($4::bigint, next_attempt_at),
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                WHERE id = $1 AND lease_token = $2 AND state = 'running'
                """, [.int(jobID), .text(token), .int(now), .int(notBefore.map { $0 + skew })]) == 1 else { return .stale }
            try closeAttempt(jobID: jobID, token: token, now: now, status: nil, error: reason, bytes: nil, released: true)
            return .recorded
        }
    }

    private func finishFailed(jobID: Int, status: Int?, reason: String, now: Int) throws {
        try run("""
            UPDATE jobs SET state = 'failed', last_status = $2, last_error = $3, error_kind = $4, finished_at = $5, updated_at = $5,
                lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
            WHERE id = $1
            """, [.int(jobID), .int(status), .text(reason), .text(FailureKind.of(reason)), .int(now)])
    }

    /// Writes the record of the job's attempt under `token`, ended now, from its row (migration
    /// 0006); call it once `token` was found to hold the job, before or after the job's own update
    /// (`released`: after a release, which gave back the attempt's count).
    private func closeAttempt(jobID: Int, token: String, now: Int, status: Int?, error: String?, bytes: Int?,
                              released: Bool = false) throws {
        try run("""
            INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, status, error, bytes)
            SELECT id, attempts + $7, $2, coalesce(attempt_started_at, updated_at), $3, $4, $5, $6 FROM jobs WHERE id = $1
            """, [.int(jobID), .text(token), .int(now), .int(status), .text(error), .int(bytes), .int(released ? 1 : 0)])
    }
}
