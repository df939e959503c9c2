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
    /// The claimer's own leases whose transfers have ended but whose results are not recorded
    /// yet. They send no more requests, so they do not count against their host's cap — as
    /// long as the lease still holds; a lease taken back in the meantime excuses nothing.
    public var finished: [Lease]

    public init(limit: Int, perHostCap: Int, leaseMilliseconds: Int = 60_000, owner: String = "", maxAttempts: Int? = nil,
                finished: [Lease] = []) {
        self.limit = limit
        self.perHostCap = perHostCap
        self.leaseMilliseconds = leaseMilliseconds
        self.owner = owner
        self.maxAttempts = maxAttempts
        self.finished = finished
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
    /// counted and recorded now.
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
            if !request.finished.isEmpty {
                let stillHeld = try database.statement(
                    "SELECT host_id FROM jobs WHERE id = ? AND state = 'running' AND lease_token = ?")
                for lease in request.finished {
                    if let host = try stillHeld.firstRow([lease.jobID, lease.token], { $0.int(0) }) {
                        running[host, default: 0] -= 1
                    }
                }
            }
            let hostRows = try database.rows(
                "SELECT id, host FROM hosts WHERE queued > 0 AND paused_until <= ? ORDER BY last_claim", [now]) { ($0.int(0), $0.string(1)) }
            let hosts = hostRows.map(\.0)
            let hostNames = Dictionary(hostRows, uniquingKeysWith: { first, _ in first })
            let pick = try database.statement("""
                SELECT id FROM jobs WHERE host_id = ? AND state = 'queued' AND next_attempt_at <= ?
                ORDER BY next_attempt_at, id LIMIT ?
                """)
            // Takes the job and returns it as `Job.init(row:)` reads it (?7: its host's name).
            let take = try database.statement("""
                UPDATE jobs SET state = 'running', attempts = attempts + 1,
                    max_attempts = coalesce(?1, max_attempts),
                    lease_token = ?2, lease_owner = ?3, lease_expires_at = ?4, updated_at = ?5
                WHERE id = ?6 AND state = 'queued'
                RETURNING \(Job.columns(host: "?7"))
                """)
            let record = try database.statement(
                "INSERT INTO attempts (job_id, number, lease_token, started_at) VALUES (?, ?, ?, ?)")
            let touchHost = try database.statement("UPDATE hosts SET last_claim = ? WHERE id = ?")
            var leases: [Lease] = []
            // Round-robin order: each claimed host moves behind every other host with work.
            var sequence = try database.scalarInt("SELECT coalesce(max(last_claim), 0) FROM hosts WHERE queued > 0")
            // Round-robin: one job per host per pass, so the batch itself is spread fairly.
            var open = hosts.map { ($0, request.perHostCap - running[$0, default: 0]) }.filter { $0.1 > 0 }
            var candidates: [Int: [Int]] = [:]
            var lastClaim: [Int: Int] = [:]
            while leases.count < request.limit && !open.isEmpty {
                var stillOpen: [(Int, Int)] = []
                for (host, room) in open where leases.count < request.limit {
                    if candidates[host] == nil {
                        candidates[host] = try pick.rows([host, now, min(room, request.limit)]) { $0.int(0) }
                    }
                    guard let id = candidates[host]?.first else { continue }
                    candidates[host]?.removeFirst()
                    let token = Self.newToken()
                    let expires = now + request.leaseMilliseconds
                    guard let job = try take.firstRow([request.maxAttempts, token, request.owner, expires, now, id,
                                                       hostNames[host] ?? ""], Job.init) else { continue }
                    try record.run([id, job.attempts, token, now])
                    sequence += 1
                    lastClaim[host] = sequence
                    leases.append(Lease(job: job, token: token))
                    if room > 1, candidates[host]?.isEmpty == false { stillOpen.append((host, room - 1)) }
                }
                open = stillOpen
            }
            for (host, claim) in lastClaim { try touchHost.run([claim, host]) }
            return leases
        }
    }

    /// Returns every running job whose lease has expired to the queue — or fails it, when it
    /// has used all its attempts — and closes its open attempt record.
    func expireLeases(now: Int) throws {
        try database.run("""
            UPDATE attempts SET finished_at = ?1, error = 'lease expired: the worker stopped without reporting'
            WHERE finished_at IS NULL AND job_id IN
                (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at <= ?1)
            """, now)
        try database.run("""
            UPDATE jobs SET
                state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                last_error = CASE WHEN attempts >= max_attempts
                    THEN 'gave up after ' || attempts || CASE attempts WHEN 1 THEN ' attempt' ELSE ' attempts' END || '; the last one''s worker stopped without reporting (lease expired)'
                    ELSE last_error END,
                finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END,
                lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1
            WHERE state = 'running' AND lease_expires_at <= ?1
            """, now)
    }

    /// Makes the leases of the given owners expire now, so their jobs are claimable at once
    /// (used when the owning process is known to be gone).
    public func expireLeases(ofOwners owners: [String]) throws {
        guard !owners.isEmpty else { return }
        let now = clock()
        try database.transaction(.write) {
            for owner in owners {
                try database.run("UPDATE jobs SET lease_expires_at = ? WHERE state = 'running' AND lease_owner = ?", now, owner)
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
