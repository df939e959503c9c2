/// Queries a download run needs to decide whether to wait, and for how long.
extension JobQueue {
    /// Jobs still to be finished: queued plus running, over every process.
    public func unfinishedCount() throws -> (queued: Int, running: Int) {
        let queued = try database.scalarInt("SELECT jobs FROM job_totals WHERE state = 'queued'")
        return (queued, try runningTotals().jobs)
    }

    /// The running jobs' count and bytes, from the jobs themselves: they are the few under a
    /// lease (found through the jobs_running index), and job_totals does not count them.
    func runningTotals() throws -> (jobs: Int, expectedBytes: Int, receivedBytes: Int, unknownSize: Int) {
        try database.firstRow("""
            SELECT count(*), coalesce(sum(expected_bytes), 0), coalesce(sum(received_bytes), 0), count(*) - count(expected_bytes)
            FROM jobs WHERE state = 'running'
            """, [], { ($0.int(0), $0.int(1), $0.int(2), $0.int(3)) }) ?? (0, 0, 0, 0)
    }

    /// The soonest moment (Unix ms) a queued job may become claimable: a retry falling due or a
    /// paused host with queued jobs resuming. Nil when nothing is waiting on time.
    public func nextWakeTime() throws -> Int? {
        let now = clock()
        let retry = try database.firstRow("""
            SELECT min(next_attempt_at) FROM jobs WHERE state = 'queued' AND next_attempt_at > 0 AND next_attempt_at > ?
            """, [now]) { $0.optionalInt(0) } ?? nil
        let pause = try database.firstRow("SELECT min(paused_until) FROM hosts WHERE queued > 0 AND paused_until > ?", [now]) {
            $0.optionalInt(0)
        } ?? nil
        return [retry, pause].compactMap { $0 }.min()
    }

    public func identity() throws -> Int {
        // Migrations/0014_queue_identity.sql.
        try database.scalarInt("SELECT value FROM queue_settings WHERE name = 'identity'")
    }

    public func jobFolders() throws -> Set<String> {
        // Recorded by `add` (Migrations/0013_job_folders.sql): no scan of the jobs.
        Set(try database.rows("SELECT folder FROM job_folders") { JobBatch.folder(recorded: $0.string(0)) })
    }
}
