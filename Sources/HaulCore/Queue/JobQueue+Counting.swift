/// The counters of `job_totals` (per state, running jobs not counted) and `hosts.queued`, kept
/// by the statements that move jobs (migration 0015 dropped the triggers that kept them on
/// every UPDATE of a job).
///
/// Guarantees: every statement that changes a job's state, or a counted job's bytes, is
/// followed in its transaction by one of these, so the counters always equal what the jobs
/// table holds (`QueueInvariants.counterMismatches` checks it in the tests). A claim counts
/// itself (`claimRoundRobin`); an add counts itself (`add`).
extension JobQueue {
    /// What of a job the counters count.
    struct CountedJob: Equatable {
        let state: String
        let hostID: Int
        let expected: Int?
        let received: Int
    }

    /// Jobs that entered the done state in a batch, to be counted once.
    struct DoneTally {
        var jobs = 0
        var bytes = 0
    }

    func countedJob(_ id: Int) throws -> CountedJob? {
        try database.statement("SELECT state, host_id, expected_bytes, received_bytes FROM jobs WHERE id = ?")
            .firstRow([id]) { CountedJob(state: $0.string(0), hostID: $0.int(1), expected: $0.optionalInt(2), received: $0.int(3)) }
    }

    /// Runs `change`, which may change job `id` alone, and moves the counters from what the job
    /// was to what it is.
    func counting<T>(_ id: Int, _ change: () throws -> T) throws -> T {
        let before = try countedJob(id)
        let result = try change()
        try recount(from: before, to: try countedJob(id))
        return result
    }

    /// Counts job `id`, which just left the running state (not counted), where it is now.
    func countArrival(of id: Int) throws {
        try recount(from: nil, to: try countedJob(id))
    }

    /// Counts jobs that entered the done state with their bytes (expected and received alike).
    func count(_ done: DoneTally) throws {
        guard done.jobs > 0 else { return }
        try addTotals(state: "done", jobs: done.jobs, expected: done.bytes, received: done.bytes, unknownSize: 0)
    }

    /// Moves the counters from `old` to `new` (nil: not there, or not counted).
    func recount(from old: CountedJob?, to new: CountedJob?) throws {
        guard old != new else { return }
        if let old, old.state != JobState.running.rawValue {
            try addTotals(state: old.state, jobs: -1, expected: -(old.expected ?? 0), received: -old.received,
                          unknownSize: old.expected == nil ? -1 : 0)
        }
        if let new, new.state != JobState.running.rawValue {
            try addTotals(state: new.state, jobs: 1, expected: new.expected ?? 0, received: new.received,
                          unknownSize: new.expected == nil ? 1 : 0)
        }
        let queued = JobState.queued.rawValue
        let wasQueued = old?.state == queued, isQueued = new?.state == queued
        if wasQueued != isQueued, let hostID = (new ?? old)?.hostID {
            try addQueued(isQueued ? 1 : -1, host: hostID)
        }
    }

    func addTotals(state: String, jobs: Int, expected: Int, received: Int, unknownSize: Int) throws {
        try database.statement("""
            UPDATE OR FAIL job_totals SET jobs = jobs + ?, expected_bytes = expected_bytes + ?, received_bytes = received_bytes + ?,
                unknown_size = unknown_size + ?
            WHERE state = ?
            """).run([jobs, expected, received, unknownSize, state])
    }

    func addQueued(_ count: Int, host: Int) throws {
        try database.statement("UPDATE OR FAIL hosts SET queued = queued + ? WHERE id = ?").run([count, host])
    }
}
