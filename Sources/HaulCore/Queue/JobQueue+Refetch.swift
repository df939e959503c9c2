/// A done job to be fetched again (`haul verify --fix`, `haul refresh`).
///
/// Guarantees: `adopt`, when given, is recorded as the identity of the file haul placed, so the
/// fetch replaces the file now at the destination (it is haul's own, changed since); nil keeps
/// the recorded identity for a conditional fetch, and forgets it otherwise.
public struct Refetch: Sendable, Equatable {
    public var jobID: Int
    public var adopt: FileIdentity?
    /// Keep the recorded validators, so the fetch asks whether the file changed (a refresh);
    /// false forgets them, so it fetches unconditionally.
    public var conditional: Bool

    public init(jobID: Int, adopt: FileIdentity?, conditional: Bool) {
        self.jobID = jobID
        self.adopt = adopt
        self.conditional = conditional
    }
}

extension JobQueue {
    /// Puts done jobs back in the queue, attempts reset, to be fetched again; returns how many
    /// were done and so changed (others are left as they are). One transaction.
    @discardableResult
    public func refetch(_ jobs: [Refetch]) throws -> Int {
        let now = clock()
        return try database.transaction(.write) {
            // The record of the attempt that finished the job leaves its row for attempts first
            // (migration 0017), as `complete` would have written it.
            let record = try database.statement("""
                INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, status, bytes)
                SELECT id, attempts, done_attempt_token, coalesce(attempt_started_at, finished_at), finished_at, last_status, received_bytes
                FROM jobs WHERE id = ? AND state = 'done' AND done_attempt_token IS NOT NULL
                """)
            let update = try database.statement("""
                UPDATE jobs SET state = 'queued', attempts = 0, lost_leases = 0, next_attempt_at = 0, last_error = NULL, error_kind = NULL, finished_at = NULL,
                    updated_at = ?1, kept = 0, done_attempt_token = NULL,
                    placed_size = CASE WHEN ?6 THEN placed_size ELSE ?2 END,
                    placed_mtime = CASE WHEN ?6 THEN placed_mtime ELSE ?3 END,
                    placed_inode = CASE WHEN ?6 THEN placed_inode ELSE ?4 END,
                    placed_ctime = CASE WHEN ?6 THEN placed_ctime ELSE ?5 END,
                    placed_etag = CASE WHEN ?7 THEN placed_etag END,
                    placed_last_modified = CASE WHEN ?7 THEN placed_last_modified END
                WHERE id = ?8 AND state = 'done'
                """)
            var changed = 0
            for job in jobs {
                let identity = job.adopt
                let keepIdentity = identity == nil && job.conditional
                try record.run([job.jobID])
                try counting(job.jobID) {
                    try update.run([now, identity?.stored.size, identity?.stored.modified,
                                    identity?.stored.inode, identity?.stored.changed,
                                    keepIdentity ? 1 : 0, job.conditional ? 1 : 0, job.jobID])
                    changed += database.changes
                }
            }
            return changed
        }
    }
}
