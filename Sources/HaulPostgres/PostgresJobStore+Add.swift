import HaulCore

extension PostgresJobStore {
    /// Rows per INSERT: each statement takes its rows as arrays (`unnest`), so a batch of 64,000
    /// lines is a few dozen statements.
    static let rowsPerInsert = 4_000

    /// Adds a batch in one transaction (see `JobStore`): destinations stay unique through their
    /// keys in job_destinations, inserted `ON CONFLICT DO NOTHING`; an entry whose key was taken
    /// is judged against the job holding it.
    public func add(_ batch: JobBatch, maxAttempts: Int, profileID: Int?, ifExists: ExistingFilePolicy) throws -> [AddOutcome] {
        guard !batch.isEmpty else { return [] }
        let outcomes = try insert(batch, maxAttempts: maxAttempts, profileID: profileID, ifExists: ifExists)
        analyzeJobsIfGrown()
        return outcomes
    }

    /// Refreshes the server's statistics of the jobs table (ANALYZE) once the table has more
    /// than doubled since they were taken, so that every worker's statements are planned for
    /// the table as it is. Workers plan their hot statements once per session (see `write`):
    /// planned while `haul get` had queued only its first lines, the claims scanned the whole
    /// table (measured on workload A: 85 scans reading 722 k rows, against 10 reading 20 k when
    /// the list was added first, and the run half as slow again). ANALYZE makes the server plan
    /// them again; it runs outside the add's transaction, holding its lock only while it runs,
    /// and about log2 of the table's growth times over a queue's life. Best effort: the batch is
    /// committed, and a role that does not own the table is only warned by the server.
    func analyzeJobsIfGrown() {
        guard let size = try? one("""
            SELECT relpages, pg_relation_size(oid) / current_setting('block_size')::bigint FROM pg_class WHERE oid = 'jobs'::regclass
            """), size.int(1) > max(2 * size.int(0), 4) else { return }
        _ = try? run("ANALYZE jobs")
    }

    /// The transaction of `add`.
    private func insert(_ batch: JobBatch, maxAttempts: Int, profileID: Int?, ifExists: ExistingFilePolicy) throws -> [AddOutcome] {
        try write { now in
            // Hosts first, in one statement; ids by name.
            let hostRows = try rows("""
                WITH wanted AS (SELECT unnest($1::text[]) AS host),
                ins AS (INSERT INTO hosts (host) SELECT host FROM wanted ON CONFLICT (host) DO NOTHING RETURNING id, host)
                SELECT id, host FROM ins UNION ALL SELECT h.id, h.host FROM hosts h JOIN wanted w ON w.host = h.host
                """, [.texts(batch.hosts)])
            var hostID: [String: Int] = [:]
            for row in hostRows { hostID[row.string(1)] = row.int(0) }
            let missing = batch.hosts.filter { hostID[$0] == nil }
            if !missing.isEmpty {
                // Inserted by another add after this statement's snapshot was taken: a new statement sees them.
                for row in try rows("SELECT id, host FROM hosts WHERE host = ANY($1::text[])", [.texts(missing)]) {
                    hostID[row.string(1)] = row.int(0)
                }
            }
            let hostIDs = batch.hosts.map { hostID[$0] ?? 0 }

            var outcomes = [AddOutcome](repeating: .added(jobID: 0), count: batch.count)
            var judged = [Bool](repeating: false, count: batch.count)
            let (inserts, repeats) = batch.partitionedByKey()
            var start = 0
            while start < inserts.count {
                let chunk = Array(inserts[start..<min(start + Self.rowsPerInsert, inserts.count)])
                let inserted = try insert(chunk.map(Int.init), of: batch, hostIDs: hostIDs, maxAttempts: maxAttempts,
                                          profileID: profileID, ifExists: ifExists, now: now)
                for element in chunk {
                    let index = Int(element)
                    if let id = inserted[batch.entries[index].key] {
                        outcomes[index] = .added(jobID: id)
                        judged[index] = true
                    }
                }
                start += chunk.count
            }
            // The entries that lost to a job already holding their key, and repeats within the batch.
            let unjudged = Array(inserts.map(Int.init).filter { !judged[$0] }) + repeats.map(Int.init)
            try judge(unjudged, of: batch, into: &outcomes)
            // A name made from the URL that another URL holds gives way to the same name with a
            // short suffix from the URL's hash (as the SQLite queue does).
            for index in outcomes.indices where batch.entries[index].namedByURL {
                guard case .rejected(.destinationTaken) = outcomes[index] else { continue }
                let destination = JobBatch.suffixed(batch.destination(index), for: batch.url(index))
                let key = JobBatch.destinationKey(destination)
                let row = try rows(Self.insertSQL, [
                    .texts([batch.url(index)]), .ints([hostIDs[Int(batch.entries[index].host)]]), .texts([destination]),
                    .ints([key]), .texts([batch.checksum(index)]), .int(maxAttempts), .int(now), .int(profileID),
                    .text(ifExists == .skip ? nil : ifExists.rawValue), .int(batch.rootLength)])
                if let row = row.first {
                    outcomes[index] = .added(jobID: row.int(0))
                } else if let holder = try rows(Self.holdersSQL, [.ints([key])]).first.map(Holder.init) {
                    let judged = try outcome(of: index, in: batch, heldBy: holder, suffixed: destination)
                    if JobBatch.isSameJob(judged) { outcomes[index] = judged }
                }
            }
            // The folders a worker sweeps for orphaned temp files (Migrations/postgres/0002_job_folders.sql),
            // inserted in sorted order: two adds inserting the same new folders then take their
            // keys in one order and never wait on each other in a cycle.
            let folders = batch.folders(added: outcomes)
            if !folders.isEmpty {
                try run("INSERT INTO job_folders (folder) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING", [.texts(folders.sorted())])
            }
            return outcomes
        }
    }

    /// Inserts jobs given as arrays (no key twice): each takes its destination key in
    /// job_destinations first (migration 0009), `ON CONFLICT DO NOTHING`, and only the keys it got
    /// become jobs, with the ids drawn for them there. Returns `id, destination_key` of each.
    static let insertSQL = """
        WITH r AS (
            SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[]) WITH ORDINALITY AS r(u, h, d, k, c, n)
        ),
        taken AS (
            INSERT INTO job_destinations (destination_key, job_id)
            SELECT k, nextval((SELECT pg_get_serial_sequence('jobs', 'id'))::regclass) FROM r ORDER BY n
            ON CONFLICT (destination_key) DO NOTHING
            RETURNING destination_key, job_id
        )
        INSERT INTO jobs (id, url, host_id, destination, destination_key, checksum, max_attempts, created_at, updated_at,
                          profile_id, if_exists, claims, root_length)
        SELECT taken.job_id, u, h, d, k, c, $6, $7, $7, $8, $9, 0, $10
        FROM taken JOIN r ON r.k = taken.destination_key
        ORDER BY taken.job_id
        RETURNING id, destination_key
        """

    /// The jobs holding the destination keys `$1`: `id, url, destination, destination_key,
    /// checksum, state`.
    static let holdersSQL = """
        SELECT j.id, j.url, j.destination, j.destination_key, j.checksum, j.state
        FROM job_destinations d JOIN jobs j ON j.id = d.job_id
        WHERE d.destination_key = ANY($1::bigint[])
        """

    /// A row of `holdersSQL`.
    private struct Holder {
        var id: Int, url: String, destination: String, key: Int, checksum: String?, state: JobState
        init(_ row: PostgresRow) {
            (id, url, destination, key) = (row.int(0), row.string(1), row.string(2), row.int(3))
            checksum = row.optionalString(4)
            state = JobState(rawValue: row.string(5)) ?? .queued
        }
    }

    /// Entry `index` judged by `holder` (see `JobBatch.outcome`), its destination `suffixed`
    /// when given; an entry bringing a job that has not started the checksum it lacks gives it,
    /// unless the job started since it was read (then the line is refused as too late).
    private func outcome(of index: Int, in batch: JobBatch, heldBy holder: Holder, suffixed: String? = nil) throws -> AddOutcome {
        let outcome = batch.outcome(of: index, heldBy: holder.id, url: holder.url, destination: holder.destination,
                                    checksum: holder.checksum, state: holder.state, suffixed: suffixed)
        guard case .alreadyQueued = outcome, batch.adoptsChecksum(index, held: holder.checksum) else { return outcome }
        let taken = try rows("""
            UPDATE jobs SET checksum = $1 WHERE id = $2 AND checksum IS NULL AND state IN ('queued', 'failed', 'cancelled') RETURNING id
            """, [.text(batch.checksum(index)), .int(holder.id)])
        guard taken.isEmpty else { return outcome }
        // Changed since it was read (claimed, or given a checksum by another add): judged again
        // as it is now, refused when it would still take this one.
        guard let now = try rows(Self.holdersSQL, [.ints([holder.key])]).first.map(Holder.init) else { return outcome }
        let again = batch.outcome(of: index, heldBy: now.id, url: now.url, destination: now.destination,
                                  checksum: now.checksum, state: now.state, suffixed: suffixed)
        if case .alreadyQueued = again, batch.adoptsChecksum(index, held: now.checksum) {
            return .rejected(.checksumTooLate(byJob: now.id, state: now.state == .done ? .done : .running))
        }
        return again
    }

    /// Inserts the entries `chunk` (no key twice) with one statement; returns the new ids by key.
    private func insert(_ chunk: [Int], of batch: JobBatch, hostIDs: [Int], maxAttempts: Int, profileID: Int?,
                        ifExists: ExistingFilePolicy, now: Int) throws -> [Int: Int] {
        let inserted = try rows(Self.insertSQL, [.texts(chunk.map { batch.url($0) }), .ints(chunk.map { hostIDs[Int(batch.entries[$0].host)] }),
                  .texts(chunk.map { batch.destination($0) }), .ints(chunk.map { batch.entries[$0].key }),
                  .texts(chunk.map { batch.checksum($0) }), .int(maxAttempts), .int(now), .int(profileID),
                  .text(ifExists == .skip ? nil : ifExists.rawValue), .int(batch.rootLength)])
        var ids: [Int: Int] = [:]
        for row in inserted { ids[row.int(1)] = row.int(0) }
        return ids
    }

    /// Outcomes of entries whose key another job holds: already queued (same URL and
    /// destination), or rejected with that job's id.
    private func judge(_ indices: [Int], of batch: JobBatch, into outcomes: inout [AddOutcome]) throws {
        var start = 0
        while start < indices.count {
            let chunk = Array(indices[start..<min(start + Self.rowsPerInsert, indices.count)])
            var holders: [Int: Holder] = [:]
            for row in try rows(Self.holdersSQL, [.ints(chunk.map { batch.entries[$0].key })]) {
                let holder = Holder(row)
                holders[holder.key] = holder
            }
            for index in chunk {
                let key = batch.entries[index].key
                guard let holder = holders[key] else {
                    throw PostgresError(kind: .client, message: "destination conflict without a holder", sql: nil)
                }
                outcomes[index] = try outcome(of: index, in: batch, heldBy: holder)
                // A later line of this chunk meets the checksum this one gave.
                if case .alreadyQueued = outcomes[index], holder.checksum == nil { holders[key]?.checksum = batch.checksum(index) }
            }
            start += chunk.count
        }
    }

    public func storeProfile(_ profile: RequestProfile) throws -> Int {
        try write { _ in
            try run("""
                INSERT INTO request_profiles (headers, user_agent, netrc) VALUES ($1, $2, $3)
                ON CONFLICT (headers, user_agent, netrc) DO NOTHING
                """, [.text(profile.storedHeaders), .text(profile.userAgent), .text(profile.storedNetrc)])
            return try one("""
                SELECT id FROM request_profiles
                WHERE headers = $1 AND user_agent IS NOT DISTINCT FROM $2 AND netrc IS NOT DISTINCT FROM $3
                """, [.text(profile.storedHeaders), .text(profile.userAgent), .text(profile.storedNetrc)]).int(0)
        }
    }

    public func profile(id: Int) throws -> RequestProfile? {
        try rows("SELECT headers, user_agent, netrc FROM request_profiles WHERE id = $1", [.int(id)]).first.map {
            RequestProfile(storedHeaders: $0.string(0), userAgent: $0.optionalString(1), storedNetrc: $0.optionalString(2))
        }
    }
}
