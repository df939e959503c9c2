import HaulCore

/// The engine's one round trip on PostgreSQL: outcomes, progress, renewals, slots and claims in one
/// transaction (see `Exchange` for the guarantees), with the worker's heartbeat.
extension PostgresJobStore {
    public func exchange(_ request: Exchange) throws -> ExchangeResult {
        // The heartbeat commits on its own, first: an exchange waiting on another worker's locks
        // does not make this worker look silent, and an evicted worker writes nothing.
        try ensureConnected()
        try beatIfDue(owner: request.owner, name: request.worker)
        // What the transaction tells this store is kept only once it committed (a retried body
        // must find the store as it was).
        var swept = false
        var claimedHosts: [Int] = []
        let answer = try write(genericPlans: true) { now -> ExchangeResult in
            swept = false
            claimedHosts = []
            var result = ExchangeResult()
            // The sweep takes this worker's work back a timeout after its last heartbeat (server
            // time, like `now`): what is left of that from here.
            result.silenceLimit = workerTimeout - max(0, now - lastHeartbeat)
            // Four round trips when all goes as usual: BEGIN with the clock; one pipeline with
            // everything up to the claim (and a grant's reads), in the order it would run one
            // statement at a time; the claim; then what the engine reads back, with COMMIT (and
            // one more for the slots granted, when some are wanted). The rare parts (outcomes
            // other than completions of distinct jobs, the sweep) run one by one.
            var batch = Pipeline()
            // An evicted worker writes nothing, whenever it was evicted: its heartbeat may have
            // passed just before a stall (what the batch wrote is rolled back with the throw).
            // FOR SHARE: a sweep evicting it now waits for this exchange to commit, then takes
            // back what it claimed.
            let evicted = batch.add(Self.evictedSQL, [.text(request.owner)])
            // Renewals first: a lease that lapsed is not renewed, and its outcome below is then
            // judged under whoever holds the job now.
            let renewedJobs = request.renewJobs.isEmpty ? nil
                : batch.add(Self.renewJobsSQL, Self.renewJobsArgs(request.renewJobs, now: now, leaseMilliseconds: request.leaseMilliseconds))
            let renewedSlots = request.renewSlots.isEmpty ? nil
                : batch.add(Self.renewSlotsSQL, Self.renewSlotsArgs(request.renewSlots, now: now, leaseMilliseconds: request.leaseMilliseconds))
            for pause in request.pauses {
                batch.add(Self.pauseHostSQL, [.text(pause.host), .int(pause.until + skew), .text(pause.reason)])
            }
            for (hostID, limit) in request.limits.sorted(by: { $0.key < $1.key }) {
                batch.add("UPDATE hosts SET current_limit = $1, limit_until = $3 WHERE id = $2",
                          [.int(limit), .int(hostID), .int(limit == nil ? 0 : now + Exchange.limitLifetime(request.leaseMilliseconds))])
            }
            let progressed = request.progress.isEmpty ? nil : batch.add(Self.progressSQL, Self.progressArgs(request.progress, now: now))
            let completions = Self.completionsOnly(request.outcomes)
            let completed = completions.flatMap { $0.isEmpty ? nil : batch.add(Self.completeSQL, completeArgs($0, worker: request.worker, now: now)) }
            if completions != nil && !request.releaseSlots.isEmpty {
                batch.add(Self.releaseSlotsSQL, Self.releaseSlotsArgs(request.releaseSlots))
            }
            // About once a second a worker, and one at a time: the sweep walks every running job.
            let sweepDue = now - lastExpiry >= Self.expiryInterval
            let sweepLock = sweepDue ? batch.add("SELECT pg_try_advisory_xact_lock($1)", [.int(Self.sweepLock)]) : nil
            let fast = completions != nil && !sweepDue
            let hosts = fast && request.claim > 0 ? batch.add(Self.hostsWithWorkSQL, hostsWithWorkArgs(request, now: now)) : nil
            // The grant's reads too: claims change no slot, and what this exchange releases or
            // pauses is written above them.
            let wanted = fast && request.wantSlots.values.contains(where: { $0 > 0 })
                ? (batch.add(Self.grantReadsSQL.caps, Self.grantReadsArgs(request.wantSlots, now: now)),
                   batch.add(Self.grantReadsSQL.slots, Self.grantReadsArgs(request.wantSlots, now: now))) : nil
            let answers = try send(batch)
            if answers[evicted].rows.first?.optionalInt(0) != nil { throw WorkerEvicted(owner: request.owner) }
            if let renewedJobs { result.lostJobs = Self.lost(request.renewJobs, renewed: answers[renewedJobs].rows) }
            if let progressed {
                // A lease found gone by its progress is lost too (a job cancelled mid-transfer).
                let kept = Set(answers[progressed].rows.map { $0.int(0) })
                for progress in request.progress where !kept.contains(progress.jobID) {
                    let lease = JobLeaseID(jobID: progress.jobID, token: progress.token)
                    if !result.lostJobs.contains(lease) { result.lostJobs.append(lease) }
                }
            }
            if let renewedSlots {
                result.lostSlots = Self.lost(request.renewSlots, renewed: answers[renewedSlots].rows)
                try releaseSlots(result.lostSlots)  // beyond a lowered cap: free now
            }
            if let completions {
                let done = completed.map { Set(answers[$0].rows.map { $0.int(0) }) } ?? []
                result.outcomes = completions.map { done.contains($0.jobID) ? .recorded : .stale }
            } else {
                result.outcomes = try record(request.outcomes, worker: request.worker, now: now)
                try releaseSlots(request.releaseSlots)
            }
            if let sweepLock {
                swept = true
                if answers[sweepLock].rows.first?.bool(0) == true { try sweep(now: now) }
            }
            if request.claim > 0 {
                (result.claimed, claimedHosts) = try claimAhead(request, now: now, found: hosts.map { answers[$0].rows })
            }
            var last = Pipeline()
            let wantSlots = request.slotsWanted(afterClaiming: result.claimed)
            if !wantSlots.isEmpty {
                // The reads sent ahead cover `request.wantSlots` only: slots for the jobs just
                // claimed are read here.
                let read = wantSlots == request.wantSlots ? wanted.map { (answers[$0.0].rows, answers[$0.1].rows) } : nil
                (result.grantedSlots, result.caps) = try grantSlots(wantSlots, owner: request.owner, now: now,
                                                                    leaseMilliseconds: request.leaseMilliseconds,
                                                                    read: read, last: &last)
            }
            let involved = Set(request.renewSlots.map(\.hostID)).union(request.heldByHost.keys).union(wantSlots.keys)
            let conditions = involved.isEmpty ? nil
                : last.add(Self.hostConditionsSQL, [.ints(Array(involved)), .text(request.owner), .int(now)])
            let idle = request.claim > 0 && result.claimed.isEmpty ? last.add(Self.idleSQL, [.int(now)]) : nil
            let lastAnswers = try send(last, commit: true)
            if let conditions { (result.contendedHosts, result.pausedHosts) = hostConditions(lastAnswers[conditions].rows, now: now) }
            if let idle {
                let row = lastAnswers[idle].rows[0]
                result.unfinished = (row.bool(0) ? 1 : 0, row.bool(1) ? 1 : 0)
                result.nextWake = [row.optionalInt(2), row.optionalInt(3)].compactMap { $0 }.min().map { $0 - skew }
            }
            return result
        }
        if swept { lastExpiry = Self.localNow() + clockOffset + skew }
        if let last = claimedHosts.last { claimCursor = last }  // also the last host looked at, when none gave a job
        return answer
    }

    static let evictedSQL = "SELECT evicted_at FROM workers WHERE owner = $1 FOR SHARE"

    /// The advisory lock of the worker sweeping expired leases and silent workers ("haulswep").
    static let sweepLock = 0x6861_756C_7377_6570

    // MARK: Workers

    /// Registers `owner` on its first exchange; later, about once a second, moves its heartbeat
    /// (a transaction of its own, committed before the exchange), and throws `WorkerEvicted` when
    /// another worker took its work back meanwhile. A worker forgotten while it held nothing
    /// registers again.
    func beatIfDue(owner: String, name: String) throws {
        let aboutNow = Self.localNow() + clockOffset + skew
        guard registeredOwner != owner || aboutNow - lastHeartbeat >= Self.heartbeatInterval else { return }
        let registered = registeredOwner == owner
        let beatAt = try write { now -> Int in
            let name = name.isEmpty ? owner : name
            let register = """
                INSERT INTO workers (owner, name, started_at, heartbeat_at) VALUES ($1, $2, $3, $3)
                ON CONFLICT (owner) DO UPDATE SET heartbeat_at = $3
                """
            guard registered else {
                try run(register, [.text(owner), .text(name), .int(now)])
                return now
            }
            let beat = try rows("""
                UPDATE workers SET heartbeat_at = $2 WHERE owner = $1
                RETURNING evicted_at, (SELECT value FROM queue_settings WHERE name = 'worker_timeout_ms')
                """, [.text(owner), .int(now)])
            if beat.first?.optionalInt(0) != nil { throw WorkerEvicted(owner: owner) }
            if let timeout = beat.first?.optionalInt(1) { workerTimeout = timeout }
            if beat.isEmpty { try run(register, [.text(owner), .text(name), .int(now)]) }
            return now
        }
        // A gap of more than half the timeout (and more than the beats' own spacing allows)
        // counts as a silence of this worker's too.
        if beatAt - lastHeartbeat > max(workerTimeout / 2, 2 * Self.heartbeatInterval + 500) { beatingSince = beatAt }
        registeredOwner = owner
        lastHeartbeat = beatAt
    }

    /// Evicts workers silent for longer than the queue's worker timeout that hold jobs or slots,
    /// ending their leases and slots now, and forgets silent ones that hold nothing; then returns
    /// every running job whose lease expired to the queue (or fails it, when it has used all its
    /// attempts).
    func sweep(now: Int) throws {
        let gone = try rows(Self.evictSilentSQL, [.int(now), .int(beatingSince)]).map { $0.string(0) }
        // Silent and holding nothing: forgotten. Evicted a day ago: its record is no longer needed.
        try run(Self.forgetSilentSQL, [.int(now)])
        try endLeases(ofOwners: gone, now: now)
        try expireLeases(now: now)
    }

    private static let workerTimeout = "(SELECT value FROM queue_settings WHERE name = 'worker_timeout_ms')"
    private static let holding = """
        (EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'running' AND j.lease_owner = w.owner)
         OR EXISTS (SELECT 1 FROM host_slots s WHERE s.owner = w.owner AND s.expires_at > $1))
        """
    /// Marks evicted the workers silent past the timeout (at `$1`) that hold jobs or slots, when
    /// the sweeper itself has been beating since `$2` at least a timeout ago (`beatingSince`).
    static let evictSilentSQL = """
        UPDATE workers w SET evicted_at = $1
        WHERE w.evicted_at IS NULL AND w.heartbeat_at < $1 - \(workerTimeout) AND $2::bigint <= $1 - \(workerTimeout)
            AND \(holding)
        RETURNING w.owner
        """
    static let forgetSilentSQL = """
        DELETE FROM workers w
        WHERE (w.evicted_at IS NULL AND w.heartbeat_at < $1 - \(workerTimeout) AND NOT \(holding))
            OR w.evicted_at < $1 - 86400000
        """
    static let endLeasesSQL = "UPDATE jobs SET lease_expires_at = $1 WHERE state = 'running' AND lease_owner = ANY($2::text[])"

    /// Makes the job leases of `owners` expire now and frees their slots (their processes are
    /// gone); `expireLeases(now:)` then hands the jobs back.
    private func endLeases(ofOwners owners: [String], now: Int) throws {
        guard !owners.isEmpty else { return }
        try run(Self.endLeasesSQL, [.int(now), .texts(owners)])
        try run("UPDATE host_slots SET expires_at = 0, owner = '', token = '' WHERE owner = ANY($1::text[])", [.texts(owners)])
    }

    func expireLeases(now: Int) throws {
        try run(Self.expireLeasesSQL, [.int(now)])
    }

    /// Hands back the running jobs whose lease ended by `$1`, their attempts not counted (see the
    /// SQLite queue's `expireLeases`): kills cannot use up a job's attempts, not even those of
    /// jobs claimed ahead and never requested. A job that never makes progress fails once its
    /// lease was lost `Lease.lostLeaseLimit(maxAttempts:)` times.
    static let expireLeasesSQL = """
            WITH expired AS (
                SELECT id, lease_token, received_bytes, attempts, attempt_started_at, attempt_start_bytes, updated_at,
                    received_bytes > coalesce(attempt_start_bytes, received_bytes) AS progressed,
                    received_bytes <= coalesce(attempt_start_bytes, received_bytes)
                        AND lost_leases + 1 >= greatest(\(Lease.lostLeaseFloor), 2 * max_attempts) AS last_loss
                FROM jobs WHERE state = 'running' AND lease_expires_at <= $1 FOR UPDATE SKIP LOCKED
            ),
            -- The open attempts' records, written now (their bytes: those gained since they began).
            closed AS (
                INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, error, bytes)
                SELECT e.id, e.attempts, e.lease_token, coalesce(e.attempt_started_at, e.updated_at), $1,
                    CASE WHEN e.progressed
                        THEN '\(Attempt.interruptedPrefix) the worker stopped without reporting (lease expired) after making progress'
                        WHEN e.last_loss THEN 'lease expired: the worker stopped without reporting'
                        ELSE '\(Attempt.interruptedPrefix) the worker stopped without reporting (lease expired)' END,
                    CASE WHEN e.progressed THEN e.received_bytes - e.attempt_start_bytes END
                FROM expired e
                RETURNING job_id
            )
            UPDATE jobs j SET
                attempts = j.attempts - CASE WHEN e.last_loss THEN 0 ELSE 1 END,
                state = CASE WHEN e.last_loss THEN 'failed' ELSE 'queued' END,
                last_error = CASE WHEN e.last_loss
                    THEN '\(Lease.lostLeasesReasonStart)' || (j.lost_leases + 1) || '\(Lease.lostLeasesReasonEnd)' ELSE j.last_error END,
                finished_at = CASE WHEN e.last_loss THEN $1 ELSE NULL END,
                lost_leases = CASE WHEN e.progressed THEN 0 ELSE j.lost_leases + 1 END,
                lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = $1
            -- "= ANY(ARRAY(…))" beside the join: the exchange runs on generic plans, which expect a
            -- third of the running jobs to have expired and may then hash the whole jobs table;
            -- the array is read by index. (closed is written whether or not it is read.)
            FROM expired e WHERE j.id = ANY(ARRAY(SELECT id FROM expired)) AND j.id = e.id
            """

    public func expireLeases(ofOwners owners: [String]) throws {
        guard !owners.isEmpty else { return }
        try write { now in
            try endLeases(ofOwners: owners, now: now)
            try run("DELETE FROM workers WHERE owner = ANY($1::text[])", [.texts(owners)])
            try expireLeases(now: now)
        }
    }

    public func leaseOwners() throws -> [String] {
        try rows("""
            SELECT lease_owner FROM jobs WHERE state = 'running' AND lease_owner IS NOT NULL
            UNION SELECT owner FROM host_slots WHERE owner <> '' AND expires_at > $1
            """, [.int(try serverNow())]).map { $0.string(0) }
    }

    public func runningJobsByOwner() throws -> [(owner: String, jobs: Int)] {
        try rows("""
            SELECT lease_owner, count(*) FROM jobs WHERE state = 'running' AND lease_owner IS NOT NULL GROUP BY lease_owner
            ORDER BY lease_owner
            """).map { (owner: $0.string(0), jobs: $0.int(1)) }
    }

    // MARK: Leases and progress

    /// `j.state = 'running'` for a statement that finds its jobs by the ids of a batch (joined
    /// with `unnest` of arrays), written so that the planner cannot match it to the predicate
    /// of the partial index jobs_running. These statements run on generic plans, which expect
    /// about one running job (the statistics are taken when few jobs run) and ten batch rows:
    /// with the predicate matched, they read every running job through jobs_running and, for
    /// each, the whole batch again. On a queue of 1,000,000 jobs, where autovacuum comes late
    /// and jobs_running holds the dead entries of every job run since, a completion of about
    /// 100 jobs took 32 ms a call (EXPLAIN ANALYZE: 9-14 ms for 100 with a fresh index, against
    /// 2.5 ms when each job is found by its id through jobs_pkey, as it is now).
    static let heldRunning = "j.state || '' = 'running'"

    /// Renews the job leases it is given that are still live under their tokens; returns the ids renewed.
    static let renewJobsSQL = """
        UPDATE jobs j SET lease_expires_at = $1
        FROM unnest($2::bigint[], $3::text[]) AS r(id, token)
        WHERE j.id = r.id AND j.lease_token = r.token AND \(PostgresJobStore.heldRunning) AND j.lease_expires_at > $4
        RETURNING j.id
        """

    static func renewJobsArgs(_ leases: [JobLeaseID], now: Int, leaseMilliseconds: Int) -> [Arg] {
        [.int(now + leaseMilliseconds), .ints(leases.map(\.jobID)), .texts(leases.map(\.token)), .int(now)]
    }

    /// The leases of `leases` that `renewed` (the ids a renewal returned) does not hold.
    static func lost(_ leases: [JobLeaseID], renewed: PostgresRows) -> [JobLeaseID] {
        let kept = Set(renewed.map { $0.int(0) })
        return leases.filter { !kept.contains($0.jobID) }
    }

    /// Writes the progress of running transfers: four columns, none indexed, so the update stays
    /// heap-only in the page's free space; the engine sends it about once a second a transfer.
    func recordProgress(_ updates: [Progress], now: Int) throws {
        guard !updates.isEmpty else { return }
        try run(Self.progressSQL, Self.progressArgs(updates, now: now))
    }

    static let progressSQL = """
        UPDATE jobs j SET received_bytes = p.received, expected_bytes = p.expected, etag = p.etag,
            last_modified = p.modified, partial_url = p.url, updated_at = $1
        FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[]::bigint[], $6::text[], $7::text[], $8::text[])
            AS p(id, token, received, expected, etag, modified, url)
        WHERE j.id = p.id AND j.lease_token = p.token AND \(PostgresJobStore.heldRunning)
        RETURNING j.id
        """

    static func progressArgs(_ updates: [Progress], now: Int) -> [Arg] {
        [.int(now), .ints(updates.map(\.jobID)), .texts(updates.map(\.token)), .ints(updates.map(\.receivedBytes)),
         .optionalInts(updates.map(\.expectedBytes)), .texts(updates.map(\.etag)), .texts(updates.map(\.lastModified)),
         .texts(updates.map(\.url))]
    }

    // MARK: Slots

    public func setHostCap(_ cap: Int, host: String?) throws {
        precondition(cap > 0, "a cap is at least 1")
        try write { _ in
            if let host {
                try run("INSERT INTO hosts (host, cap) VALUES ($1, $2) ON CONFLICT (host) DO UPDATE SET cap = $2",
                        [.text(host), .int(cap)])
            } else {
                try run("UPDATE queue_settings SET value = $1 WHERE name = 'default_host_cap'", [.int(cap)])
            }
        }
    }

    public func liveSlots() throws -> [String: Int] {
        let now = try serverNow()
        var slots: [String: Int] = [:]
        for row in try rows("""
            SELECT h.host, count(*) FROM host_slots s JOIN hosts h ON h.id = s.host_id WHERE s.expires_at > $1 GROUP BY h.host
            """, [.int(now)]) {
            slots[row.string(0)] = row.int(1)
        }
        return slots
    }

    static let capOfHost = "coalesce(h.cap, (SELECT value FROM queue_settings WHERE name = 'default_host_cap'))"

    /// Grants up to the wanted number of slots per host, in a few statements whatever the number
    /// of hosts, and without waiting for another claimer (a lock held to its commit would make
    /// every claimer wait for every other's). A slot is a row keyed (host, index), its index below
    /// the host's cap, so a host never has more live slots than its cap has indices. Rows are
    /// kept and reused, never deleted (a slot given back or expired is a row whose time has
    /// passed), so its writes change no index and leave no dead index entries behind. A claimer
    /// takes a free row `FOR UPDATE SKIP LOCKED` (one another claimer is taking, renewing or
    /// giving back is skipped, never waited on); a row that does not exist yet is made under a
    /// transaction-scoped advisory lock got without waiting, `ON CONFLICT DO NOTHING`. A host
    /// that still has live slots at an index beyond a lowered cap gets none until those are
    /// renewed away (no slot at such an index can be granted anew).
    ///
    /// `read`: what `grantReadsSQL`'s two statements returned, when they went ahead in a pipeline.
    /// Who waits for a slot is told (on the hosts' rows) by a statement added to `last`, the
    /// pipeline that ends the exchange.
    func grantSlots(_ wanted: [Int: Int], owner: String, now: Int, leaseMilliseconds: Int,
                    read: (caps: PostgresRows, slots: PostgresRows)? = nil, last: inout Pipeline) throws -> ([SlotLease], [Int: Int]) {
        let asked = wanted.filter { $0.value > 0 }
        guard !asked.isEmpty else { return ([], [:]) }
        var caps: [Int: Int] = [:]
        var limits: [Int: Int] = [:]
        var open: [Int] = []
        for row in try read?.caps ?? rows(Self.grantReadsSQL.caps, Self.grantReadsArgs(asked, now: now)) {
            caps[row.int(0)] = row.int(2)
            if let limit = row.optionalInt(3) { limits[row.int(0)] = limit }
            if !row.bool(1) { open.append(row.int(0)) }
        }
        guard !open.isEmpty else { return ([], caps) }
        open.sort()
        var live: [Int: Set<Int>] = [:], idle: [Int: Set<Int>] = [:]
        let openSet = Set(open)
        for row in try read?.slots ?? rows(Self.grantReadsSQL.slots, [.ints(open), .int(now)]) where openSet.contains(row.int(0)) {
            if row.bool(2) { live[row.int(0), default: []].insert(row.int(1)) } else { idle[row.int(0), default: []].insert(row.int(1)) }
        }
        var reuseHosts: [Int] = [], reuseIndices: [Int] = [], makeHosts: [Int] = [], makeIndices: [Int] = []
        for host in open {
            let cap = caps[host] ?? 1, used = live[host] ?? [], count = asked[host] ?? 0
            guard used.allSatisfy({ $0 < cap }) else { continue }  // beyond a lowered cap: wait
            // A host held below its cap by a worker it told it is overloaded (429, 503): no more
            // live slots in all than that limit.
            let room = max(0, min(cap, limits[host] ?? cap) - used.count)
            for index in (0..<cap).filter({ !used.contains($0) }).prefix(min(count, room)) {
                if idle[host]?.contains(index) == true {
                    reuseHosts.append(host)
                    reuseIndices.append(index)
                } else {
                    makeHosts.append(host)
                    makeIndices.append(index)
                }
            }
        }
        var granted: [SlotLease] = []
        let expiry = now + leaseMilliseconds
        // Both at once: they write different rows (slots that exist, slots that do not yet).
        var writes = Pipeline()
        if !reuseHosts.isEmpty {
            writes.add("""
                WITH free AS (
                    SELECT s.host_id, s.slot FROM host_slots s JOIN unnest($1::bigint[], $2::int[]) AS g(h, i)
                        ON s.host_id = g.h AND s.slot = g.i
                        JOIN hosts h ON h.id = s.host_id
                    WHERE s.expires_at <= $5 AND s.slot < \(Self.capOfHost)
                    FOR UPDATE OF s SKIP LOCKED
                )
                UPDATE host_slots s SET owner = $3, token = gen_random_uuid()::text, expires_at = $4
                FROM free WHERE s.host_id = free.host_id AND s.slot = free.slot
                RETURNING s.host_id, s.slot, s.token
                """, [.ints(reuseHosts), .ints(reuseIndices), .text(owner), .int(expiry), .int(now)])
        }
        if !makeHosts.isEmpty {
            writes.add("""
                INSERT INTO host_slots (host_id, slot, owner, token, expires_at)
                SELECT g.h, g.s, $3, gen_random_uuid()::text, $4 FROM unnest($1::bigint[], $2::int[]) AS g(h, s)
                    JOIN hosts h ON h.id = g.h
                WHERE g.s < \(Self.capOfHost) AND pg_try_advisory_xact_lock(\(Self.slotLockSpace) | (g.h << 16) | g.s)
                ON CONFLICT (host_id, slot) DO NOTHING
                RETURNING host_id, slot, token
                """, [.ints(makeHosts), .ints(makeIndices), .text(owner), .int(expiry)])
        }
        for answer in try send(writes) {
            for row in answer.rows { granted.append(SlotLease(hostID: row.int(0), index: row.int(1), token: row.string(2))) }
        }
        granted.sort { ($0.hostID, $0.index) < ($1.hostID, $1.index) }
        var got: [Int: Int] = [:]
        for slot in granted { got[slot.hostID, default: 0] += 1 }
        let short = open.filter { got[$0, default: 0] < asked[$0] ?? 0 }
        let served = open.filter { got[$0, default: 0] >= asked[$0] ?? 0 }
        // Who waits for a slot: the holders hear of it (and give one back when they can). A row
        // another claimer is writing is skipped: it says the same.
        last.add("""
            UPDATE hosts SET wanted_by = CASE WHEN id = ANY($1::bigint[]) THEN $3 ELSE NULL END,
                wanted_at = CASE WHEN id = ANY($1::bigint[]) THEN $4 ELSE wanted_at END
            WHERE id IN (
                SELECT id FROM hosts
                WHERE (id = ANY($1::bigint[]) AND (wanted_by IS DISTINCT FROM $3 OR wanted_at < $4::bigint - 500))
                    OR (id = ANY($2::bigint[]) AND wanted_by = $3)
                FOR NO KEY UPDATE SKIP LOCKED)
            """, [.ints(short), .ints(served), .text(owner), .int(now)])
        return (granted, caps)
    }

    /// A grant's reads: the caps and pauses of the hosts asked for, then their slots (`$1` the
    /// hosts, `$2` the time).
    static let grantReadsSQL = (
        caps: "SELECT h.id, h.paused_until > $2, \(capOfHost), CASE WHEN h.limit_until > $2 THEN h.current_limit END FROM hosts h WHERE h.id = ANY($1::bigint[])",
        slots: "SELECT host_id, slot, expires_at > $2 FROM host_slots WHERE host_id = ANY($1::bigint[])")

    static func grantReadsArgs(_ asked: [Int: Int], now: Int) -> [Arg] {
        [.ints(asked.filter { $0.value > 0 }.keys.sorted()), .int(now)]
    }

    /// The advisory-lock keys of slot indices: "hs" in the top 16 bits, then the host id, then
    /// the index (below 65,536).
    static let slotLockSpace = 0x6873 << 48

    /// Renews the slots it is given that are still live under their tokens and below their
    /// host's cap; returns the tokens renewed.
    static let renewSlotsSQL = """
        UPDATE host_slots s SET expires_at = $1
        FROM unnest($2::bigint[], $3::int[], $4::text[]) AS r(host_id, slot, token), hosts h
        WHERE s.host_id = r.host_id AND s.slot = r.slot AND s.token = r.token AND s.expires_at > $5
            AND h.id = s.host_id AND s.slot < \(capOfHost)
        RETURNING s.token
        """

    static func renewSlotsArgs(_ slots: [SlotLease], now: Int, leaseMilliseconds: Int) -> [Arg] {
        [.int(now + leaseMilliseconds), .ints(slots.map(\.hostID)), .ints(slots.map(\.index)), .texts(slots.map(\.token)), .int(now)]
    }

    /// The slots of `slots` that `renewed` (the tokens a renewal returned) does not hold.
    static func lost(_ slots: [SlotLease], renewed: PostgresRows) -> [SlotLease] {
        let kept = Set(renewed.map { $0.string(0) })
        return slots.filter { !kept.contains($0.token) }
    }

    func releaseSlots(_ slots: [SlotLease]) throws {
        guard !slots.isEmpty else { return }
        try run(Self.releaseSlotsSQL, Self.releaseSlotsArgs(slots))
    }

    static let releaseSlotsSQL = """
        UPDATE host_slots s SET expires_at = 0, owner = '', token = ''
        FROM unnest($1::bigint[], $2::int[], $3::text[]) AS r(host_id, slot, token)
        WHERE s.host_id = r.host_id AND s.slot = r.slot AND s.token = r.token
        """

    static func releaseSlotsArgs(_ slots: [SlotLease]) -> [Arg] {
        [.ints(slots.map(\.hostID)), .ints(slots.map(\.index)), .texts(slots.map(\.token))]
    }

    /// Which of `hosts` another worker wants a slot of while this one holds at least two more of
    /// its slots than that worker would hold once it took the host's free slots, and which are
    /// paused (until when, on this worker's clock). Each slot given back narrows the gap, so
    /// workers settle at shares that differ by one at most instead of passing a slot back and
    /// forth (two on a cap of 16: 8 each). The free slots count as the waiter's: slots given back
    /// wait for the waiter's next request, and a holder that went on giving while they waited
    /// gave too many (measured, two `haul run` on one host of cap 16: the first gave 10 of its 16
    /// within 50 ms, then took some back).
    /// Takes the hosts (`$1`), the worker (`$2`) and the time (`$3`); read by `hostConditions(_:now:)`.
    static let hostConditionsSQL = """
        SELECT h.id, h.wanted_by IS NOT NULL AND h.wanted_by <> $2 AND h.wanted_at >= $3::bigint - \(contentionWindow)
            AND (SELECT count(*) FILTER (WHERE s.owner = $2) - count(*) FILTER (WHERE s.owner = h.wanted_by)
                        - greatest(0, \(capOfHost) - count(*))
                    FROM host_slots s WHERE s.host_id = h.id AND s.expires_at > $3) > 1,
            h.paused_until
        FROM hosts h WHERE h.id = ANY($1::bigint[])
        """

    func hostConditions(_ rows: PostgresRows, now: Int) -> (Set<Int>, [Int: Int]) {
        var contended = Set<Int>()
        var paused: [Int: Int] = [:]
        for row in rows {
            if row.bool(1) { contended.insert(row.int(0)) }
            if row.int(2) > now { paused[row.int(0)] = row.int(2) - skew }
        }
        return (contended, paused)
    }

    /// How long a refused slot request counts as a worker waiting, in ms.
    static let contentionWindow = 2000

    public func pauseHost(_ host: String, until: Int, reason: String) throws {
        try run(Self.pauseHostSQL, [.text(host), .int(until), .text(reason)])
    }

    static let pauseHostSQL = """
        INSERT INTO hosts (host, paused_until, pause_reason) VALUES ($1, $2, $3)
        ON CONFLICT (host) DO UPDATE SET
            pause_reason = CASE WHEN $2 > hosts.paused_until THEN $3 ELSE hosts.pause_reason END,
            paused_until = greatest(hosts.paused_until, $2)
        """

    // MARK: Claiming ahead

    /// How many hosts with work a claim looks at, at least.
    static let hostsPerClaim = 32

    /// The next hosts with due work after this claimer's cursor (wrapping around), not every
    /// host: a claim costs as many index probes as it needs, whatever the number of hosts. The
    /// hosts with queued jobs come from a skip scan of jobs_claimable (its entries are in host
    /// order: one descent finds the next host that has a queued job), so hosts whose jobs are
    /// all done cost nothing: walked from the hosts table, one probe each, they cost a claim
    /// 1.8 ms at 1,001 hosts of which one had work (and would cost seconds at a million). Each
    /// found host is then checked for a due job and for a pause (one probe each, in the
    /// claimable index's order, so that it reads the index: as EXISTS, the planner may instead
    /// hash every due job of the queue; unordered, it may read past every job done to find one).
    static let hostsWithWorkSQL: String = {
        // `name`: the hosts with a queued job, in id order, after `start`, while `more` holds.
        func queued(_ name: String, after start: String, more: String) -> String {
            """
            \(name)(host_id) AS (
                (SELECT j.host_id FROM jobs j WHERE j.state = 'queued' AND j.host_id > \(start) ORDER BY j.host_id LIMIT 1)
                UNION ALL
                SELECT (SELECT j.host_id FROM jobs j WHERE j.state = 'queued' AND j.host_id > q.host_id ORDER BY j.host_id LIMIT 1)
                FROM \(name) q WHERE q.host_id IS NOT NULL\(more)
            )
            """
        }
        // A part's rows come in the skip scan's order, ids ascending, and no ORDER BY sorts them:
        // a sort would read every host with queued jobs before the LIMIT could stop the scan.
        func part(_ number: Int, _ hosts: String, _ comparison: String) -> String {
            """
            SELECT \(number) AS part, h.id, h.host, \(capOfHost) AS cap FROM \(hosts) q
                CROSS JOIN LATERAL (SELECT * FROM hosts h WHERE h.id = q.host_id LIMIT 1) AS h  -- LIMIT: read by id, never joined whole
                CROSS JOIN LATERAL (
                    SELECT 1 FROM jobs j WHERE j.host_id = h.id AND j.state = 'queued' AND j.next_attempt_at <= $1
                    ORDER BY j.next_attempt_at, j.id LIMIT 1
                ) AS due
            WHERE h.paused_until <= $1 AND h.id \(comparison) $2
            LIMIT $3
            """
        }
        return "WITH RECURSIVE " + queued("after_cursor", after: "$2", more: "") + ",\n"
            + queued("up_to_cursor", after: "0", more: " AND q.host_id <= $2") + "\n"
            + "SELECT id, host, cap, part FROM ((\(part(0, "after_cursor", ">"))) UNION ALL (\(part(1, "up_to_cursor", "<=")))) AS found LIMIT $3"
    }()

    func hostsWithWorkArgs(_ request: Exchange, now: Int) -> [Arg] {
        [.int(now), .int(claimCursor), .int(max(request.claim, Self.hostsPerClaim))]
    }

    /// Claims up to `request.claim` due jobs, spread round-robin over the hosts with work (from
    /// this claimer's cursor on, so successive claims move through every host), at most
    /// `claimAheadRounds` times a host's cap in the claimer's hands per host. `FOR UPDATE SKIP
    /// LOCKED`: claimers never take one job twice nor wait on each other. `found`: the hosts
    /// `hostsWithWorkSQL` returned, when it went ahead in a pipeline.
    func claimAhead(_ request: Exchange, now: Int, found prefetched: PostgresRows? = nil) throws -> (leases: [Lease], hosts: [Int]) {
        let hostRows = try prefetched ?? rows(Self.hostsWithWorkSQL, hostsWithWorkArgs(request, now: now))
        // After the cursor first (the server sends them so; sorted again to be sure).
        let found = hostRows.sorted { ($0.int(3), $0.int(0)) < ($1.int(3), $1.int(0)) }
        var open: [(id: Int, name: String, room: Int)] = []
        for row in found {
            let room = claimAheadRounds * row.int(2) - request.heldByHost[row.int(0), default: 0]
            if room > 0 { open.append((row.int(0), row.string(1), room)) }
        }
        // Quotas, one job per host per pass.
        var quota = [Int](repeating: 0, count: open.count)
        var left = request.claim
        var progressed = true
        while left > 0 && progressed {
            progressed = false
            for index in open.indices where left > 0 && quota[index] < open[index].room {
                quota[index] += 1
                left -= 1
                progressed = true
            }
        }
        var byHost: [Int: [Lease]] = [:]
        var given = [Int](repeating: 0, count: open.count)
        var ask = quota
        // Two rounds: what a host could not give (fewer due jobs than its share, or rows another
        // claimer holds) is offered to the hosts that gave all they were asked for.
        for round in 0..<2 {
            let asking = open.indices.filter { ask[$0] > 0 }
            guard !asking.isEmpty else { break }
            let claimed = try take(hosts: asking.map { open[$0].id }, counts: asking.map { ask[$0] }, request, now: now)
            var gotByIndex: [Int: Int] = [:]
            let position = Dictionary(uniqueKeysWithValues: open.indices.map { (open[$0].id, $0) })
            for lease in claimed {
                byHost[lease.job.hostID, default: []].append(lease)
                if let index = position[lease.job.hostID] { gotByIndex[index, default: 0] += 1 }
            }
            let full = asking.filter { gotByIndex[$0, default: 0] == ask[$0] }
            for index in asking { given[index] += gotByIndex[index, default: 0] }
            var short = request.claim - byHost.values.reduce(0) { $0 + $1.count }
            guard round == 0, short > 0, !full.isEmpty else { break }
            ask = [Int](repeating: 0, count: open.count)
            var progressed = true
            while short > 0 && progressed {
                progressed = false
                for index in full where short > 0 && given[index] + ask[index] < open[index].room {
                    ask[index] += 1
                    short -= 1
                    progressed = true
                }
            }
        }
        // Interleaved by host, in the order the hosts were visited.
        var leases: [Lease] = []
        var claimedFrom: [Int] = []
        let queues = open.compactMap { host in byHost[host.id].map { (host.id, $0) } }
        for (host, _) in queues { claimedFrom.append(host) }
        var depth = 0
        while leases.count < byHost.values.reduce(0, { $0 + $1.count }) {
            for (_, list) in queues where depth < list.count { leases.append(list[depth]) }
            depth += 1
        }
        // Nothing from the hosts looked at (all full in this claimer's hands): move on past them.
        if claimedFrom.isEmpty, let last = found.last?.int(0) { claimedFrom.append(last) }
        return (leases, claimedFrom)
    }

    /// Takes up to `counts[i]` due jobs of `hosts[i]`, for every i, in one statement: each gets a
    /// fresh lease token and its attempt counted and opened on its row (its record is written when
    /// it ends, or stays on the row when it finishes the job: migration 0007).
    private func take(hosts: [Int], counts: [Int], _ request: Exchange, now: Int) throws -> [Lease] {
        try rows(Self.takeSQL, [.ints(hosts), .ints(counts), .int(now), .int(request.maxAttempts), .text(request.owner),
                                .int(now + request.leaseMilliseconds)]).map { row in
            let job = Self.job(row)
            // `claims` after the job's columns: 1 after the job's first claim (migration 0008).
            return Lease(job: job, token: job.leaseToken ?? "", firstTry: row.int(Self.jobColumnCount) == 1)
        }
    }

    static let takeSQL = """
            WITH wanted AS (SELECT * FROM unnest($1::bigint[], $2::int[]) AS w(host_id, n)),
            picked AS (
                SELECT p.id FROM wanted w CROSS JOIN LATERAL (
                    SELECT id FROM jobs WHERE host_id = w.host_id AND state = 'queued' AND next_attempt_at <= $3
                    ORDER BY next_attempt_at, id LIMIT w.n FOR UPDATE SKIP LOCKED
                ) p
            ),
            taken AS (
                -- Tokens of 15 characters (56 random bits), which Swift keeps inside a string value
                -- (see JobQueue.newToken); fencing needs them unique per job, not across the queue.
                -- "= ANY(ARRAY(…))", not a join: the exchange runs on generic plans, which cannot
                -- know how few jobs were picked, and a join may then hash the whole jobs table.
                -- The attempt opens on the job's row (migration 0006); its record is written when it ends,
                -- or stays on the row when it finishes the job (migration 0007).
                -- claims: a claim by an older haul, which did not count it, set attempt_started_at,
                -- and counts as one here (migration 0008).
                UPDATE jobs j SET state = 'running', attempts = j.attempts + 1,
                    claims = j.claims + 1 + (j.claims = 0 AND j.attempt_started_at IS NOT NULL)::int,
                    max_attempts = coalesce($4, j.max_attempts),
                    lease_token = left(replace(gen_random_uuid()::text, '-', ''), 15), lease_owner = $5, lease_expires_at = $6, updated_at = $3,
                    attempt_started_at = $3, attempt_start_bytes = j.received_bytes
                WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
                RETURNING j.*
            )
            SELECT \(PostgresJobStore.jobColumns("taken", host: "(SELECT h.host FROM hosts h WHERE h.id = taken.host_id)")), taken.claims
            FROM taken
            ORDER BY taken.next_attempt_at, taken.id
            """

    /// Whether any job is queued, and any running (from the partial indexes: a count would read
    /// every queued job, and EXISTS, which drops the ORDER BY, may walk the table past every job done); then the soonest
    /// moment (server ms) a queued job may become claimable by its retry time and by its host's
    /// pause, each nil when there is none.
    static let idleSQL = """
        SELECT (SELECT 1 FROM jobs WHERE state = 'queued' ORDER BY host_id, next_attempt_at, id LIMIT 1) IS NOT NULL,
               (SELECT 1 FROM jobs WHERE state = 'running' ORDER BY lease_expires_at LIMIT 1) IS NOT NULL,
               (SELECT min(next_attempt_at) FROM jobs WHERE state = 'queued' AND next_attempt_at > 0 AND next_attempt_at > $1),
               (SELECT min(h.paused_until) FROM hosts h WHERE h.paused_until > $1
                    AND (SELECT 1 FROM jobs j WHERE j.host_id = h.id AND j.state = 'queued'
                         ORDER BY j.next_attempt_at, j.id LIMIT 1) IS NOT NULL)
        """
}
