/// What became of one line given to `JobQueue.add`.
public enum AddOutcome: Sendable, Equatable {
    case added(jobID: Int)
    /// The same URL was already queued for the same destination: nothing changed.
    case alreadyQueued(jobID: Int)
    case rejected(InputLine.Rejection)
}

extension JobQueue {
    /// The 64-bit FNV-1a hash of a destination's UTF-8 bytes, as stored in `destination_key`.
    static func destinationKey(_ destination: String) -> Int {
        Int(Int64(bitPattern: FNV1a.hash(destination)))
    }

    /// Adds jobs in one transaction. Idempotent: the same URL for the same destination is one
    /// job; a destination that another URL already holds is rejected with that job's id.
    /// Destinations stay unique because the check and the insert share one write transaction.
    public func add(_ lines: [InputLine], maxAttempts: Int = 5) throws -> [AddOutcome] {
        let now = clock()
        return try database.transaction(.write) {
            let insertHost = try database.statement("""
                INSERT INTO hosts (host) VALUES (?) ON CONFLICT (host) DO UPDATE SET host = host RETURNING id
                """)
            let insertJob = try database.statement("""
                INSERT INTO jobs (url, host_id, destination, destination_key, max_attempts, sha256, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (destination_key) DO NOTHING
                """)
            let holder = try database.statement("SELECT id, url, destination FROM jobs WHERE destination_key = ?")
            var hostIDs: [String: Int] = [:]
            var addedPerHost: [Int: Int] = [:]
            var outcomes: [AddOutcome] = []
            outcomes.reserveCapacity(lines.count)
            for line in lines {
                let host = line.url.hostKey
                let hostID: Int
                if let known = hostIDs[host] {
                    hostID = known
                } else {
                    hostID = try insertHost.firstRow([host]) { $0.int(0) } ?? 0
                    hostIDs[host] = hostID
                }
                let key = Self.destinationKey(line.destination)
                insertJob.reset()
                try insertJob.bind(line.url.string, at: 1)
                try insertJob.bind(hostID, at: 2)
                try insertJob.bind(line.destination, at: 3)
                try insertJob.bind(key, at: 4)
                try insertJob.bind(maxAttempts, at: 5)
                try insertJob.bind(line.sha256, at: 6)
                try insertJob.bind(now, at: 7)
                try insertJob.bind(now, at: 8)
                try insertJob.runBound()
                if database.changes == 0 {
                    guard let (id, url, destination) = try holder.firstRow([key], { ($0.int(0), $0.string(1), $0.string(2)) }) else {
                        throw SQLiteError(code: 0, message: "destination conflict without a holder", sql: holder.sql)
                    }
                    if destination != line.destination {
                        outcomes.append(.rejected(.destinationKeyCollision(byJob: id)))
                    } else {
                        outcomes.append(url == line.url.string ? .alreadyQueued(jobID: id)
                                                               : .rejected(.destinationTaken(byJob: id, url: url)))
                    }
                    continue
                }
                outcomes.append(.added(jobID: database.lastInsertRowID))
                addedPerHost[hostID, default: 0] += 1
            }
            // The counters that triggers keep for updates (see Migrations/0002_counters.sql).
            let added = addedPerHost.values.reduce(0, +)
            if added > 0 {
                try database.run("""
                    UPDATE job_totals SET jobs = jobs + ?1, unknown_size = unknown_size + ?1 WHERE state = 'queued'
                    """, added)
                let countHost = try database.statement("UPDATE hosts SET queued = queued + ? WHERE id = ?")
                for (hostID, count) in addedPerHost { try countHost.run([count, hostID]) }
            }
            return outcomes
        }
    }
}
