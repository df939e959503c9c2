/// What became of one line given to `JobQueue.add`.
public enum AddOutcome: Sendable, Equatable {
    case added(jobID: Int)
    /// The same URL was already queued for the same destination: nothing changed.
    case alreadyQueued(jobID: Int)
    case rejected(InputLine.Rejection)
}

extension JobQueue {
    /// Adds jobs in one transaction. Idempotent: the same URL for the same destination is one
    /// job; a destination that another URL already holds is rejected with that job's id.
    public func add(_ lines: [InputLine], maxAttempts: Int = 5) throws -> [AddOutcome] {
        let now = clock()
        return try database.transaction(.write) {
            let insertHost = try database.statement("INSERT OR IGNORE INTO hosts (host) VALUES (?)")
            let insertJob = try database.statement("""
                INSERT INTO jobs (url, host, destination, max_attempts, sha256, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (destination) DO NOTHING
                """)
            let holder = try database.statement("SELECT id, url FROM jobs WHERE destination = ?")
            var knownHosts = Set<String>()
            var outcomes: [AddOutcome] = []
            outcomes.reserveCapacity(lines.count)
            for line in lines {
                let host = line.url.hostKey
                if knownHosts.insert(host).inserted { try insertHost.run([host]) }
                try insertJob.run([line.url.string, host, line.destination, maxAttempts, line.sha256, now, now])
                if database.changes == 1 {
                    outcomes.append(.added(jobID: database.lastInsertRowID))
                    continue
                }
                guard let (id, url) = try holder.firstRow([line.destination], { ($0.int(0), $0.string(1)) }) else {
                    throw SQLiteError(code: 0, message: "destination conflict without a holder", sql: holder.sql)
                }
                outcomes.append(url == line.url.string ? .alreadyQueued(jobID: id)
                                                       : .rejected(.destinationTaken(byJob: id, url: url)))
            }
            return outcomes
        }
    }
}
