/// How a claimer asks for work.
public struct ClaimRequest: Sendable {
    /// At most this many jobs.
    public var limit: Int
    /// At most this many running jobs with live leases per host, counted over every process.
    public var perHostCap: Int
    /// How long the lease lasts unless renewed, in milliseconds.
    public var leaseMilliseconds: Int
    /// Written into each lease (see `LeaseOwner`).
    public var owner: String
    /// When set, replaces the claimed jobs' maximum number of attempts.
    public var maxAttempts: Int?

    public init(limit: Int, perHostCap: Int, leaseMilliseconds: Int = 60_000, owner: String = "", maxAttempts: Int? = nil) {
        self.limit = limit
        self.perHostCap = perHostCap
        self.leaseMilliseconds = leaseMilliseconds
        self.owner = owner
        self.maxAttempts = maxAttempts
    }
}

extension JobQueue {
    /// Claims up to `request.limit` runnable jobs in one write transaction.
    ///
    /// Runnable: queued, next attempt time reached, host not paused, and the host has fewer
    /// running jobs with live leases than `perHostCap` — counted in the database, so claimers in
    /// other processes are included (less the claimer's own `finished` leases). Hosts are
    /// visited round-robin (least recently claimed first), so a host with a million jobs does
    /// not starve one with ten. Each claimed job gets a fresh lease token, and its attempt is
    /// counted and opened on its row now (its record is written when it ends, or stays on the
    /// row when it finishes the job).
    ///
    /// This is the claim of a claimer without slots (tests, tools): its running jobs are its cap.
    /// `haul run` claims through `exchange`, where slots hold the cap and claimed jobs wait in
    /// hand; the two kinds of claimer should not share one queue's hosts.
    public func claim(_ request: ClaimRequest) throws -> [Lease] {
        guard request.limit > 0, request.perHostCap > 0 else { return [] }
        let now = clock()
        return try database.transaction(.write) {
            try expireLeases(now: now)
            var running: [Int: Int] = [:]
            for (host, count) in try database.rows(
                "SELECT host_id, count(*) FROM jobs WHERE state = 'running' GROUP BY host_id", [], { ($0.int(0), $0.int(1)) }) {
                running[host] = count
            }
            let hostRows = try database.rows(
                "SELECT id, host FROM hosts WHERE queued > 0 AND paused_until <= ? ORDER BY last_claim", [now]) { ($0.int(0), $0.string(1)) }
            let open = hostRows.map { (id: $0.0, name: $0.1, room: request.perHostCap - running[$0.0, default: 0]) }
            return try claimRoundRobin(open.filter { $0.room > 0 }, limit: request.limit, owner: request.owner,
                                       leaseMilliseconds: request.leaseMilliseconds, maxAttempts: request.maxAttempts, now: now)
        }
    }

    /// Claims up to `limit` queued jobs that are due, from `hosts` (in the order given: least
    /// recently claimed first) one job per host per pass, at most `room` from each, so a batch is
    /// spread fairly; each gets a fresh lease token and its attempt counted and opened, and
    /// each claimed host moves behind every other host with work. Call inside a write transaction.
    func claimRoundRobin(_ hosts: [(id: Int, name: String, room: Int)], limit: Int, owner: String, leaseMilliseconds: Int,
                         maxAttempts: Int?, now: Int) throws -> [Lease] {
        // Reads the candidates whole (?4: their host's name), so taking one needs no RETURNING:
        // SQLite gathers a RETURNING clause's rows in a temporary table, which made the take
        // about twice as expensive as the update itself.
        // The claims made of the job so far last, after its columns: 0 until a claim (migration
        // 0018); a claim by an older haul, which did not count it, set attempt_started_at, and
        // counts as one. The take writes that count and one more (?7), read in this transaction.
        let pick = try database.statement("""
            SELECT \(Job.columns(host: "?4")), claims + (claims = 0 AND attempt_started_at IS NOT NULL)
            FROM jobs WHERE host_id = ?1 AND state = 'queued' AND next_attempt_at <= ?2
            ORDER BY next_attempt_at, id LIMIT ?3
            """)
        let take = try database.statement("""
            UPDATE OR FAIL jobs SET state = 'running', attempts = attempts + 1,
                claims = ?7,
                max_attempts = coalesce(?1, max_attempts),
                lease_token = ?2, lease_owner = ?3, lease_expires_at = ?4, updated_at = ?5,
                attempt_started_at = ?5, attempt_start_bytes = received_bytes
            WHERE id = ?6 AND state = 'queued'
            """)
        // A claim counts itself (migrations 0012 and 0015): the queued counters drop here, once
        // per batch and host, by what the claimed rows held.
        let touchHost = try database.statement("UPDATE OR FAIL hosts SET last_claim = ?, queued = queued - ? WHERE id = ?")
        var sequence = try database.statement("SELECT coalesce(max(last_claim), 0) FROM hosts WHERE queued > 0")
            .firstRow([], { $0.int(0) }) ?? 0
        var leases: [Lease] = []
        var open = hosts
        var candidates: [Int: ArraySlice<(job: Job, claims: Int)>] = [:]
        var lastClaim: [Int: (sequence: Int, taken: Int)] = [:]
        var expectedBytes = 0, receivedBytes = 0, unknownSize = 0
        while leases.count < limit && !open.isEmpty {
            var stillOpen: [(id: Int, name: String, room: Int)] = []
            for host in open where leases.count < limit {
                if candidates[host.id] == nil {
                    candidates[host.id] = ArraySlice(try pick.rows([host.id, now, min(host.room, limit - leases.count), host.name]) {
                        (job: Job(row: $0), claims: $0.int(Job.columnCount))
                    })
                }
                guard let (queued, claims) = candidates[host.id]?.popFirst() else { continue }
                let token = Self.newToken()
                // Bound value by value: once a file, every run.
                take.reset()
                try take.bind(maxAttempts, at: 1)
                try take.bind(token, at: 2)
                try take.bind(owner, at: 3)
                try take.bind(now + leaseMilliseconds, at: 4)
                try take.bind(now, at: 5)
                try take.bind(queued.id, at: 6)
                try take.bind(claims + 1, at: 7)
                try take.runBound()
                guard database.changes == 1 else { continue }
                // The attempt is open on the job's row (migration 0016); its record is written
                // when it ends (`closeAttempt`, `expireLeases`), or stays on the row when it
                // finishes the job (`complete`, migration 0017).
                let job = queued.claimed(token: token, owner: owner, expiresAt: now + leaseMilliseconds,
                                         maxAttempts: maxAttempts, now: now)
                sequence += 1
                lastClaim[host.id] = (sequence, (lastClaim[host.id]?.taken ?? 0) + 1)
                expectedBytes += queued.expectedBytes ?? 0
                receivedBytes += queued.receivedBytes
                if queued.expectedBytes == nil { unknownSize += 1 }
                leases.append(Lease(job: job, token: token, firstTry: claims == 0))
                if host.room > 1, candidates[host.id]?.isEmpty == false { stillOpen.append((host.id, host.name, host.room - 1)) }
            }
            open = stillOpen
        }
        for (host, claim) in lastClaim { try touchHost.run([claim.sequence, claim.taken, host]) }
        if !leases.isEmpty {
            try addTotals(state: JobState.queued.rawValue, jobs: -leases.count, expected: -expectedBytes, received: -receivedBytes,
                          unknownSize: -unknownSize)
        }
        return leases
    }

    /// Returns every running job whose lease has expired to the queue, and writes the record of
    /// its open attempt, which is not counted: the worker stopped without reporting, which is
    /// not the job's doing. A job claimed ahead by a worker that was killed was never requested
    /// at all (before, a restart loop spent five attempts of jobs no server saw), and one whose
    /// bytes grew past those its attempt began from (a large file coming in) resumes. Only a job
    /// that never makes progress, its lease lost `Lease.lostLeaseLimit(maxAttempts:)` times (`lost_leases`),
    /// fails: one that stops its worker every time still ends. Its last attempt is then counted.
    func expireLeases(now: Int) throws {
        // The jobs whose lease expired (few, found through the jobs_running index): counted
        // where they go once they went (running jobs are not counted).
        let expired = try database.statement("SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at <= ?")
            .rows([now]) { $0.int(0) }
        guard !expired.isEmpty else { return }
        // Whether the job's bytes grew past those its open attempt began from (NULL for an
        // attempt opened before that was recorded: no progress). The record is written now.
        let progressed = "received_bytes > coalesce(attempt_start_bytes, received_bytes)"
        let lastLoss = "(NOT (\(progressed)) AND lost_leases + 1 >= max(\(Lease.lostLeaseFloor), 2 * max_attempts))"
        try database.run("""
            INSERT OR FAIL INTO attempts (job_id, number, lease_token, started_at, finished_at, error, bytes)
            SELECT id, attempts, lease_token, coalesce(attempt_started_at, updated_at), ?1,
                CASE WHEN \(progressed)
                    THEN '\(Attempt.interruptedPrefix) the worker stopped without reporting (lease expired) after making progress'
                    WHEN \(lastLoss) THEN 'lease expired: the worker stopped without reporting'
                    ELSE '\(Attempt.interruptedPrefix) the worker stopped without reporting (lease expired)' END,
                CASE WHEN \(progressed) THEN received_bytes - attempt_start_bytes END
            FROM jobs WHERE state = 'running' AND lease_expires_at <= ?1 ORDER BY id
            """, now)
        try database.run("""
            UPDATE OR FAIL jobs SET
                attempts = attempts - CASE WHEN \(lastLoss) THEN 0 ELSE 1 END,
                state = CASE WHEN \(lastLoss) THEN 'failed' ELSE 'queued' END,
                last_error = CASE WHEN \(lastLoss)
                    THEN '\(Lease.lostLeasesReasonStart)' || (lost_leases + 1) || '\(Lease.lostLeasesReasonEnd)' ELSE last_error END,
                finished_at = CASE WHEN \(lastLoss) THEN ?1 ELSE NULL END,
                lost_leases = CASE WHEN \(progressed) THEN 0 ELSE lost_leases + 1 END,
                lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1
            WHERE state = 'running' AND lease_expires_at <= ?1
            """, now)
        for id in expired { try countArrival(of: id) }
    }

    /// Makes the leases of the given owners expire now, so their jobs are claimable at once
    /// (used when the owning process is known to be gone).
    public func expireLeases(ofOwners owners: [String]) throws {
        guard !owners.isEmpty else { return }
        let now = clock()
        try database.transaction(.write) {
            for owner in owners {
                try database.run("UPDATE OR FAIL jobs SET lease_expires_at = ? WHERE state = 'running' AND lease_owner = ?", now, owner)
                try database.run("DELETE FROM host_slots WHERE owner = ?", owner)
            }
            try expireLeases(now: now)
        }
    }

    /// How many running jobs each lease owner holds.
    public func runningJobsByOwner() throws -> [(owner: String, jobs: Int)] {
        try database.rows("""
            SELECT lease_owner, count(*) FROM jobs WHERE state = 'running' AND lease_owner IS NOT NULL GROUP BY lease_owner
            """) { (owner: $0.string(0), jobs: $0.int(1)) }
    }

    /// The distinct owners of running jobs' leases and of host slots.
    public func leaseOwners() throws -> [String] {
        try database.rows("""
            SELECT lease_owner FROM jobs WHERE state = 'running' AND lease_owner IS NOT NULL
            UNION SELECT owner FROM host_slots
            """) { $0.string(0) }
    }
}
