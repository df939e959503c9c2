/// What became of one line given to `JobQueue.add`.
public enum AddOutcome: Sendable, Equatable {
    case added(jobID: Int)
    /// The same URL was already queued for the same destination: nothing changed.
    case alreadyQueued(jobID: Int)
    case rejected(InputLine.Rejection)
}

extension FNV1a {
    /// The same hash as `hash(_: String)`, of UTF-8 bytes already in a buffer.
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }
}

extension JobQueue {
    /// The 64-bit FNV-1a hash of a destination's UTF-8 bytes, as stored in `destination_key`.
    static func destinationKey(_ destination: String) -> Int {
        Int(Int64(bitPattern: FNV1a.hash(destination)))
    }

    static func destinationKey(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
        Int(Int64(bitPattern: FNV1a.hash(utf8)))
    }

    /// Rows per multi-row INSERT: fewer statement executions, with few enough parameters
    /// (5 a row) for any SQLite build.
    static let rowsPerInsert = 128

    /// Adds jobs in one transaction. Idempotent: the same URL for the same destination is one
    /// job; a destination that another URL already holds is rejected with that job's id.
    /// Destinations stay unique because the check and the insert share one write transaction.
    public func add(_ lines: [InputLine], maxAttempts: Int = 5) throws -> [AddOutcome] {
        try add(JobBatch(lines), maxAttempts: maxAttempts)
    }

    /// `add(_:maxAttempts:)` for a compact batch: one outcome per entry, in order.
    func add(_ batch: JobBatch, maxAttempts: Int) throws -> [AddOutcome] {
        guard !batch.isEmpty else { return [] }
        let now = clock()
        return try database.transaction(.write) {
            let insertHost = try database.statement("""
                INSERT INTO hosts (host) VALUES (?) ON CONFLICT (host) DO UPDATE SET host = host RETURNING id
                """)
            var hostIDs: [Int] = []
            hostIDs.reserveCapacity(batch.hosts.count)
            for host in batch.hosts { hostIDs.append(try insertHost.firstRow([host]) { $0.int(0) } ?? 0) }
            var addedPerHost = [Int](repeating: 0, count: hostIDs.count)

            let holder = try database.statement("SELECT id, url, destination FROM jobs WHERE destination_key = ?")
            var outcomes: [AddOutcome] = []
            outcomes.reserveCapacity(batch.count)
            var inserted: [(id: Int, key: Int)] = []
            inserted.reserveCapacity(Self.rowsPerInsert)
            let entries = batch.entries
            try batch.text.withUnsafeBufferPointer { text in
                guard let base = text.baseAddress else { return }
                var start = 0
                while start < entries.count {
                    let end = min(start + Self.rowsPerInsert, entries.count)
                    let insert = try database.statement(Self.insertSQL(rows: end - start))
                    // Every row binds its own url, host, destination, key and sha256; the values
                    // shared by the batch are bound once, as ?1 and ?2.
                    try insert.bind(maxAttempts, at: 1)
                    try insert.bind(now, at: 2)
                    for index in start..<end {
                        let entry = entries[index]
                        let first = Int32(3 + (index - start) * 5)
                        let urlStart = base + entry.offset
                        let destinationStart = urlStart + Int(entry.urlLength)
                        try insert.bindStatic(text: urlStart, count: Int(entry.urlLength), at: first)
                        try insert.bind(hostIDs[Int(entry.host)], at: first + 1)
                        try insert.bindStatic(text: destinationStart, count: Int(entry.destinationLength), at: first + 2)
                        try insert.bind(entry.key, at: first + 3)
                        if entry.sha256Length > 0 {
                            try insert.bindStatic(text: destinationStart + Int(entry.destinationLength),
                                                  count: Int(entry.sha256Length), at: first + 4)
                        } else {
                            try insert.bindNull(at: first + 4)
                        }
                    }
                    inserted.removeAll(keepingCapacity: true)
                    do {
                        defer { insert.reset() }  // also drops the pointers into `text`
                        while try insert.step() {
                            let row = Row(statement: insert)
                            inserted.append((row.int(0), row.int(1)))
                        }
                    }
                    try classify(entries[start..<end], inserted: inserted, batch: batch, holder: holder,
                                 into: &outcomes, addedPerHost: &addedPerHost)
                    start = end
                }
            }
            // The counters that triggers keep for updates (see Migrations/0002_counters.sql).
            let added = addedPerHost.reduce(0, +)
            if added > 0 {
                try database.run("""
                    UPDATE job_totals SET jobs = jobs + ?1, unknown_size = unknown_size + ?1 WHERE state = 'queued'
                    """, added)
                let countHost = try database.statement("UPDATE hosts SET queued = queued + ? WHERE id = ?")
                for (index, count) in addedPerHost.enumerated() where count > 0 {
                    try countHost.run([count, hostIDs[index]])
                }
            }
            return outcomes
        }
    }

    /// The outcomes of one multi-row INSERT's entries, given the rows it inserted.
    ///
    /// The rows of one statement are inserted in order, so an entry was inserted exactly when no
    /// earlier job and no earlier entry held its key: the first entry of each returned key is the
    /// one inserted (RETURNING's order is not promised, so rows are matched by key, not position).
    /// Every other entry lost to the job holding its key — an earlier job, or an earlier entry of
    /// the same batch — and is classified against that job.
    private func classify(_ entries: ArraySlice<JobBatch.Entry>, inserted: [(id: Int, key: Int)], batch: JobBatch,
                          holder: Statement, into outcomes: inout [AddOutcome], addedPerHost: inout [Int]) throws {
        var insertedByKey = [Int: Int](minimumCapacity: inserted.count)
        for row in inserted { insertedByKey[row.key] = row.id }
        for index in entries.indices {
            let entry = entries[index]
            if let id = insertedByKey.removeValue(forKey: entry.key) {
                outcomes.append(.added(jobID: id))
                addedPerHost[Int(entry.host)] += 1
                continue
            }
            guard let (id, url, destination) = try holder.firstRow([entry.key], { ($0.int(0), $0.string(1), $0.string(2)) }) else {
                throw SQLiteError(code: 0, message: "destination conflict without a holder", sql: holder.sql)
            }
            if destination != batch.destination(index) {
                outcomes.append(.rejected(.destinationKeyCollision(byJob: id)))
            } else {
                outcomes.append(url == batch.url(index) ? .alreadyQueued(jobID: id)
                                                        : .rejected(.destinationTaken(byJob: id, url: url)))
            }
        }
    }

    /// `INSERT … VALUES (…), (…), …` for `rows` rows: ?1 is max_attempts, ?2 the time, and row
    /// r binds url, host_id, destination, destination_key and sha256 at ?(3+5r) … ?(7+5r).
    ///
    /// `OR IGNORE`, not `ON CONFLICT (destination_key) DO NOTHING`: a multi-row statement that
    /// may abort keeps a statement journal, a copy of every page it touches first (with random
    /// keys, ~2 pages a row: 12 s of system time a million rows). The only constraint the bound
    /// values can break is the destination key's (every NOT NULL column gets a value, state
    /// keeps its default), and a row ignored for any other reason would come back from RETURNING
    /// missing with no holder, which `classify` reports as an error, not as an outcome.
    static func insertSQL(rows: Int) -> String {
        var sql = """
            INSERT OR IGNORE INTO jobs (url, host_id, destination, destination_key, max_attempts, sha256, created_at, updated_at) VALUES
            """
        for row in 0..<rows {
            let p = 3 + row * 5
            sql += row == 0 ? "\n" : ",\n"
            sql += "(?\(p), ?\(p + 1), ?\(p + 2), ?\(p + 3), ?1, ?\(p + 4), ?2, ?2)"
        }
        sql += "\nRETURNING id, destination_key"
        return sql
    }
}
