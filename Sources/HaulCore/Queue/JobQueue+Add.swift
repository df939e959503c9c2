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
    static func destinationKey(_ destination: String) -> Int { JobBatch.destinationKey(destination) }

    /// Rows per multi-row INSERT: fewer statement executions, with few enough parameters
    /// (5 a row) for any SQLite build.
    static let rowsPerInsert = 128

    /// The INSERT for a full chunk of `rowsPerInsert` rows, and for one row, built once.
    private static let fullInsertSQL = insertSQL(rows: rowsPerInsert)
    private static let singleInsertSQL = insertSQL(rows: 1)

    /// Adds jobs in one transaction. Idempotent: the same URL for the same destination is one
    /// job; a destination that another URL already holds is rejected with that job's id.
    /// Destinations stay unique because the check and the insert share one write transaction.
    /// New jobs get the request profile `profileID` (see `storeProfile`); jobs already queued
    /// keep theirs; so with `ifExists`.
    public func add(_ lines: [InputLine], maxAttempts: Int = 5, profileID: Int? = nil,
                    ifExists: ExistingFilePolicy = .skip) throws -> [AddOutcome] {
        try add(JobBatch(lines), maxAttempts: maxAttempts, profileID: profileID, ifExists: ifExists)
    }

    /// `add(_:maxAttempts:profileID:)` for a compact batch: one outcome per entry, in order. New
    /// jobs get ids in line order.
    public func add(_ batch: JobBatch, maxAttempts: Int, profileID: Int? = nil, ifExists: ExistingFilePolicy = .skip) throws -> [AddOutcome] {
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

            let holder = try database.statement("SELECT id, url, destination, checksum, state FROM jobs WHERE destination_key = ?")
            let largestBefore = try database.scalarInt("SELECT coalesce(max(id), 0) FROM jobs")
            var ids = JobIDs(after: largestBefore)
            // A placeholder, overwritten below: every entry gets exactly one outcome.
            var outcomes = [AddOutcome](repeating: .added(jobID: 0), count: batch.count)
            let (inserts, repeats) = batch.partitionedByKey()
            // The inserts cannot break a CHECK constraint: `state` and `if_exists` keep their defaults.
            try database.withoutCheckConstraints {
                var start = 0
                while start < inserts.count {
                    let chunk = inserts[start..<min(start + Self.rowsPerInsert, inserts.count)]
                    let insert = try insertRows(chunk, of: batch, hostIDs: hostIDs, maxAttempts: maxAttempts, now: now)
                    let newIDs = try ids.take(database.changes, lastInserted: database.lastInsertRowID, sql: insert.sql)
                    let allInserted = newIDs.count == chunk.count
                    for (row, element) in chunk.enumerated() {
                        let index = Int(element)
                        // When every row was inserted, their ids follow the rows' order.
                        outcomes[index] = allInserted ? .added(jobID: newIDs.lowerBound + row)
                                                      : try outcome(of: index, in: batch, holder: holder, newIDs: newIDs)
                        if case .added = outcomes[index] { addedPerHost[Int(batch.entries[index].host)] += 1 }
                    }
                    start = chunk.endIndex
                }
            }
            for index in repeats {
                outcomes[Int(index)] = try outcome(of: Int(index), in: batch, holder: holder, newIDs: 0..<0)
            }
            // A name made from the URL that another URL already holds gives way to the same name
            // with a short suffix from the URL's hash: stable, so adding the line again finds it.
            for index in outcomes.indices where batch.entries[index].namedByURL {
                guard case .rejected(.destinationTaken) = outcomes[index] else { continue }
                let entry = batch.entries[index]
                let destination = JobBatch.suffixed(batch.destination(index), for: batch.url(index))
                let key = Self.destinationKey(destination)
                let insert = try database.statement(Self.singleInsertSQL)
                defer { insert.reset() }
                try insert.run([maxAttempts, now, batch.rootLength, batch.url(index), hostIDs[Int(entry.host)], destination, key,
                                batch.checksum(index)])
                if database.changes == 1 {
                    outcomes[index] = .added(jobID: database.lastInsertRowID)
                    addedPerHost[Int(entry.host)] += 1
                } else if let judged = try judged(index, in: batch, key: key, holder: holder, suffixed: destination),
                          JobBatch.isSameJob(judged) {
                    outcomes[index] = judged
                }
            }
            if let profileID {
                // Every job this transaction inserted has an id above the largest before it.
                try database.run("UPDATE jobs SET profile_id = ? WHERE id > ?", profileID, largestBefore)
            }
            if ifExists != .skip {
                try database.run("UPDATE jobs SET if_exists = ? WHERE id > ?", ifExists.rawValue, largestBefore)
            }
            // The folders a run sweeps for orphaned temp files (Migrations/0013_job_folders.sql).
            let recordFolder = try database.statement("INSERT OR IGNORE INTO job_folders (folder) VALUES (?)")
            for folder in batch.folders(added: outcomes) { try recordFolder.run([folder]) }
            // The counters (see JobQueue+Counting.swift): the added jobs are queued, of unknown size.
            let added = addedPerHost.reduce(0, +)
            if added > 0 {
                try addTotals(state: JobState.queued.rawValue, jobs: added, expected: 0, received: 0, unknownSize: added)
                for (index, count) in addedPerHost.enumerated() where count > 0 {
                    try addQueued(count, host: hostIDs[index])
                }
            }
            return outcomes
        }
    }

    /// Inserts the rows of `chunk` (indices into `batch.entries`, no key twice) with one
    /// multi-row INSERT, which it returns, run and reset.
    private func insertRows(_ chunk: ArraySlice<Int32>, of batch: JobBatch, hostIDs: [Int],
                            maxAttempts: Int, now: Int) throws -> Statement {
        let insert = try database.statement(
            chunk.count == Self.rowsPerInsert ? Self.fullInsertSQL : Self.insertSQL(rows: chunk.count))
        try batch.text.withUnsafeBufferPointer { text in
            guard let base = text.baseAddress else { return }
            defer { insert.reset() }  // also drops the pointers into `text`
            // Every row binds its own url, host, destination, key and checksum; the values shared
            // by the batch are bound once, as ?1, ?2 and ?3.
            try insert.bind(maxAttempts, at: 1)
            try insert.bind(now, at: 2)
            if let length = batch.rootLength { try insert.bind(length, at: 3) } else { try insert.bindNull(at: 3) }
            var first: Int32 = 4
            for index in chunk {
                let entry = batch.entries[Int(index)]
                let urlStart = base + entry.offset
                let destinationStart = urlStart + Int(entry.urlLength)
                try insert.bindStatic(text: urlStart, count: Int(entry.urlLength), at: first)
                try insert.bind(hostIDs[Int(entry.host)], at: first + 1)
                try insert.bindStatic(text: destinationStart, count: Int(entry.destinationLength), at: first + 2)
                try insert.bind(entry.key, at: first + 3)
                if entry.checksumLength > 0 {
                    try insert.bindStatic(text: destinationStart + Int(entry.destinationLength),
                                          count: Int(entry.checksumLength), at: first + 4)
                } else {
                    try insert.bindNull(at: first + 4)
                }
                first += 5
            }
            while try insert.step() {}
        }
        return insert
    }

    /// The outcome of entry `index`, judged by the job now holding its key: the entry's own when
    /// that job's id is one of `newIDs`, the ids of the statement that inserted the entry's row
    /// (no two rows of one statement have the same key). Otherwise the entry lost to that job —
    /// an earlier one, or one from an earlier line of the batch — and is already queued (same URL
    /// and destination) or rejected.
    private func outcome(of index: Int, in batch: JobBatch, holder: Statement, newIDs: Range<Int>) throws -> AddOutcome {
        if let id = try holder.firstRow([batch.entries[index].key], { $0.int(0) }), newIDs.contains(id) { return .added(jobID: id) }
        guard let outcome = try judged(index, in: batch, key: batch.entries[index].key, holder: holder) else {
            throw SQLiteError(code: 0, message: "destination conflict without a holder", sql: holder.sql)
        }
        return outcome
    }

    /// Entry `index` judged by the job holding `key` (nil when none does), its destination
    /// `suffixed` when given; an entry found to bring that job the checksum it lacks gives it.
    private func judged(_ index: Int, in batch: JobBatch, key: Int, holder: Statement, suffixed: String? = nil) throws -> AddOutcome? {
        guard let (id, url, destination, checksum, state) = try holder.firstRow([key], {
            ($0.int(0), $0.string(1), $0.string(2), $0.optionalString(3), JobState(rawValue: $0.string(4)) ?? .queued)
        }) else { return nil }
        let outcome = batch.outcome(of: index, heldBy: id, url: url, destination: destination, checksum: checksum, state: state,
                                    suffixed: suffixed)
        if case .alreadyQueued = outcome, batch.adoptsChecksum(index, held: checksum) {
            // (A write transaction: the job cannot start between the read and this.)
            try database.run("UPDATE jobs SET checksum = ? WHERE id = ? AND checksum IS NULL", batch.checksum(index), id)
        }
        return outcome
    }

    /// `INSERT … VALUES (…), (…), …` for `rows` rows: ?1 is max_attempts, ?2 the time, ?3 the
    /// output folder's length (`root_length`), and row r binds url, host_id, destination, destination_key and
    /// checksum at ?(4+5r) … ?(8+5r).
    ///
    /// `OR IGNORE`, not `ON CONFLICT (destination_key) DO NOTHING`: a multi-row statement that
    /// may abort keeps a statement journal, a copy of every page it touches first (with random
    /// keys, ~2 pages a row: 12 s of system time a million rows). The only constraint the bound
    /// values can break is the destination key's (every NOT NULL column gets a value, state
    /// keeps its default), and a row ignored for any other reason would be missing with no
    /// holder, which `outcome(of:in:holder:newIDs:)` reports as an error, not as an outcome.
    ///
    /// No `RETURNING`: SQLite buffers returned rows in a temporary table, a tenth of the time of
    /// a bulk add. The ids of inserted rows are known without it (see `JobIDs`).
    static func insertSQL(rows: Int) -> String {
        var sql = """
            INSERT OR IGNORE INTO jobs (url, host_id, destination, destination_key, max_attempts, checksum, created_at, updated_at,
                                        claims, root_length) VALUES
            """
        for row in 0..<rows {
            let p = 4 + row * 5
            sql += row == 0 ? "\n" : ",\n"
            // claims 0: never claimed (migration 0018).
            sql += "(?\(p), ?\(p + 1), ?\(p + 2), ?\(p + 3), ?1, ?\(p + 4), ?2, ?2, 0, ?3)"
        }
        return sql
    }
}
