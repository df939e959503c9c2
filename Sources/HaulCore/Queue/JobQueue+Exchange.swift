/// The engine's one round trip: outcomes, progress, renewals, slots and claims in one write
/// transaction (see `Exchange` for the guarantees).
extension JobQueue {
    public func exchange(_ request: Exchange) throws -> ExchangeResult {
        let now = clock()
        return try database.transaction(.write) {
            var result = ExchangeResult()
            // Renewals first: a lease that lapsed is not renewed, and its outcome below is
            // then judged under whoever holds the job now.
            result.lostJobs = try renew(request.renewJobs, now: now, leaseMilliseconds: request.leaseMilliseconds)
            result.lostSlots = try renewSlots(request.renewSlots, now: now, leaseMilliseconds: request.leaseMilliseconds)
            for pause in request.pauses {
                try pauseHost(pause.host, until: pause.until, reason: pause.reason)
            }
            for (hostID, limit) in request.limits {
                try database.run("UPDATE hosts SET current_limit = ?, limit_until = ? WHERE id = ?",
                                 limit, limit == nil ? 0 : now + Exchange.limitLifetime(request.leaseMilliseconds), hostID)
            }
            // A lease found gone by its progress is lost too (a job cancelled mid-transfer: its
            // transfer stops now, not after it placed its file).
            for lease in try recordProgress(request.progress) where !result.lostJobs.contains(lease) { result.lostJobs.append(lease) }
            var done = DoneTally()
            result.outcomes = try request.outcomes.map { try record($0, worker: request.worker, done: &done) }
            try count(done)
            try releaseSlots(request.releaseSlots)
            if now - lastExpiry >= Self.expiryInterval || request.claim > 0 && now - lastExpiry >= 100 {
                try expireLeases(now: now)
                lastExpiry = now
            }
            if request.claim > 0 {
                result.claimed = try claimAhead(request, now: now)
            }
            let wantSlots = request.slotsWanted(afterClaiming: result.claimed)
            if !wantSlots.isEmpty {
                (result.grantedSlots, result.caps) = try grantSlots(wantSlots, owner: request.owner, now: now,
                                                                    leaseMilliseconds: request.leaseMilliseconds)
            }
            let involved = Set(request.renewSlots.map(\.hostID)).union(request.heldByHost.keys).union(wantSlots.keys)
            if !involved.isEmpty {
                (result.contendedHosts, result.pausedHosts) = try hostConditions(involved, owner: request.owner, now: now)
            }
            if request.claim > 0 && result.claimed.isEmpty {
                result.unfinished = try unfinishedCount()
                result.nextWake = try nextWakeTime()
            }
            return result
        }
    }

    /// How often an exchange that claims nothing looks for expired leases, in ms.
    static let expiryInterval = 1000

    private func record(_ outcome: Outcome, worker: String, done: inout DoneTally) throws -> OutcomeResult {
        do {
            switch outcome {
            case .done(let jobID, let token, let status, let bytes, let placed):
                try complete(jobID: jobID, token: token, status: status, bytes: bytes, placed: placed,
                             placedBy: worker.isEmpty ? nil : worker, tally: &done)
                return .recorded
            case .kept(let jobID, let token, let bytes):
                try keep(jobID: jobID, token: token, bytes: bytes)
                return .recorded
            case .unchanged(let jobID, let token):
                try markUnchanged(jobID: jobID, token: token)
                return .recorded
            case .retry(let jobID, let token, let at, let status, let error, let progress):
                try recordProgress([progress])
                switch try reschedule(jobID: jobID, token: token, at: at, status: status, error: error, bytes: progress.receivedBytes) {
                case .queued: return .recorded
                case .failed(let reason): return .gaveUp(reason: reason)
                }
            case .fail(let jobID, let token, let status, let reason):
                try fail(jobID: jobID, token: token, status: status, reason: reason)
                return .recorded
            case .release(let jobID, let token, let reason, let progress, let notBefore):
                if let progress { try recordProgress([progress]) }
                return try release(jobID: jobID, token: token, reason: reason, notBefore: notBefore) ? .recorded : .stale
            }
        } catch is StaleLeaseError {
            return .stale
        }
    }

    // MARK: Slots

    /// Sets the cap of every host without one of its own (`host` nil), or of one host
    /// (lower-cased `host:port`, as jobs store it). Slots held beyond a lowered cap are refused
    /// at their next renewal.
    public func setHostCap(_ cap: Int, host: String? = nil) throws {
        precondition(cap > 0, "a cap is at least 1")
        try database.transaction(.write) {
            if let host {
                try database.run("""
                    INSERT INTO hosts (host, cap) VALUES (?1, ?2) ON CONFLICT (host) DO UPDATE SET cap = ?2
                    """, host, cap)
            } else {
                try database.run("UPDATE queue_settings SET value = ? WHERE name = 'default_host_cap'", cap)
            }
        }
    }

    /// Live slots by host name, over every process (for status and tests).
    public func liveSlots() throws -> [String: Int] {
        let now = clock()
        let rows = try database.rows("""
            SELECT h.host, count(*) FROM host_slots s JOIN hosts h ON h.id = s.host_id WHERE s.expires_at > ? GROUP BY h.host
            """, [now]) { ($0.string(0), $0.int(1)) }
        return Dictionary(rows, uniquingKeysWith: +)
    }

    /// The cap of the host `h` (a row of hosts) in SQL: its own, else the queue's default.
    static let capOfHost = "coalesce(h.cap, (SELECT value FROM queue_settings WHERE name = 'default_host_cap'))"

    private func hostCap(_ hostID: Int) throws -> Int {
        try database.statement("SELECT \(Self.capOfHost) FROM hosts h WHERE h.id = ?").firstRow([hostID], { $0.int(0) }) ?? 1
    }

    private func grantSlots(_ wanted: [Int: Int], owner: String, now: Int, leaseMilliseconds: Int) throws -> ([SlotLease], [Int: Int]) {
        let dead = try database.statement("DELETE FROM host_slots WHERE host_id = ? AND expires_at <= ?")
        let used = try database.statement("SELECT slot FROM host_slots WHERE host_id = ?")
        let paused = try database.statement("SELECT paused_until > ?1, CASE WHEN limit_until > ?1 THEN current_limit END FROM hosts WHERE id = ?2")
        let insert = try database.statement(
            "INSERT INTO host_slots (host_id, slot, owner, token, expires_at) VALUES (?, ?, ?, ?, ?)")
        let want = try database.statement("UPDATE hosts SET wanted_by = ?, wanted_at = ? WHERE id = ?")
        let served = try database.statement("UPDATE hosts SET wanted_by = NULL WHERE id = ? AND wanted_by = ?")
        var granted: [SlotLease] = []
        var caps: [Int: Int] = [:]
        for (hostID, count) in wanted.sorted(by: { $0.key < $1.key }) where count > 0 {
            let cap = try hostCap(hostID)
            caps[hostID] = cap
            guard let (isPaused, limit) = try paused.firstRow([now, hostID], { ($0.int(0) != 0, $0.optionalInt(1)) }), !isPaused else { continue }
            try dead.run([hostID, now])
            let taken = Set(try used.rows([hostID]) { $0.int(0) })
            var given = 0
            // Live slots at an index beyond a lowered cap count too, until they are renewed away;
            // a host held below its cap by a worker it told it is overloaded (429, 503) gets no
            // more live slots in all than that limit.
            let room = min(cap, limit ?? cap)
            for index in 0..<cap where given < count && taken.count + given < room && !taken.contains(index) {
                let token = Self.newToken()
                try insert.run([hostID, index, owner, token, now + leaseMilliseconds])
                granted.append(SlotLease(hostID: hostID, index: index, token: token))
                given += 1
            }
            if given < count {
                try want.run([owner, now, hostID])
            } else {
                try served.run([hostID, owner])
            }
        }
        return (granted, caps)
    }

    private func renewSlots(_ slots: [SlotLease], now: Int, leaseMilliseconds: Int) throws -> [SlotLease] {
        guard !slots.isEmpty else { return [] }
        let renew = try database.statement("""
            UPDATE host_slots SET expires_at = ?1 WHERE host_id = ?2 AND slot = ?3 AND token = ?4 AND expires_at > ?5
                AND slot < (SELECT \(Self.capOfHost) FROM hosts h WHERE h.id = ?2)
            """)
        var lost: [SlotLease] = []
        for slot in slots {
            try renew.run([now + leaseMilliseconds, slot.hostID, slot.index, slot.token, now])
            if database.changes == 0 { lost.append(slot) }
        }
        try releaseSlots(lost)  // beyond a lowered cap: free now
        return lost
    }

    private func releaseSlots(_ slots: [SlotLease]) throws {
        guard !slots.isEmpty else { return }
        let drop = try database.statement("DELETE FROM host_slots WHERE host_id = ? AND slot = ? AND token = ?")
        for slot in slots { try drop.run([slot.hostID, slot.index, slot.token]) }
    }

    /// Which of `hosts` another claimer wants a slot of while this one holds at least two more of
    /// its slots than that claimer would hold once it took the host's free slots, and which are
    /// paused. Each slot given back narrows the gap, so claimers settle at shares that differ by
    /// one at most instead of passing a slot back and forth (two on a cap of 16: 8 each). The
    /// free slots count as the waiter's: slots given back wait for the waiter's next request,
    /// and a holder that went on giving while they waited gave too many (measured on PostgreSQL,
    /// two `haul run` on one host of cap 16: the first gave 10 of its 16, then took some back).
    private func hostConditions(_ hosts: Set<Int>, owner: String, now: Int) throws -> (Set<Int>, [Int: Int]) {
        let read = try database.statement("""
            SELECT wanted_by, wanted_at, paused_until,
                (SELECT count(*) FILTER (WHERE s.owner = ?2) - count(*) FILTER (WHERE s.owner IS h.wanted_by)
                        - max(0, \(Self.capOfHost) - count(*))
                    FROM host_slots s WHERE s.host_id = h.id AND s.expires_at > ?3) > 1
            FROM hosts h WHERE id = ?1
            """)
        var contended = Set<Int>()
        var paused: [Int: Int] = [:]
        for host in hosts {
            guard let (wantedBy, wantedAt, pausedUntil, held) = try read.firstRow([host, owner, now], {
                ($0.optionalString(0), $0.int(1), $0.int(2), $0.int(3) != 0)
            }) else { continue }
            if held, let wantedBy, wantedBy != owner, wantedAt >= now - Self.contentionWindow { contended.insert(host) }
            if pausedUntil > now { paused[host] = pausedUntil }
        }
        return (contended, paused)
    }

    /// How long a refused slot request counts as a claimer waiting, in ms.
    static let contentionWindow = 2000

    // MARK: Claiming ahead

    /// Claims up to `request.claim` runnable jobs, round-robin over hosts (least recently
    /// claimed first), at most `claimAheadRounds` times a host's cap of them in the claimer's
    /// hands per host. Claims do not count against the cap; slots do.
    ///
    /// The hosts with queued jobs are read a page at a time, in that order, until the claim is
    /// made: reading them all at each claim held every one in memory (224 MB for 1,000,000
    /// hosts with queued jobs, 582 MB for 3,000,000). A page whose hosts have no job due yet
    /// (all waiting to be retried) leads to the next one, so such hosts never starve the rest.
    private func claimAhead(_ request: Exchange, now: Int) throws -> [Lease] {
        let page = try database.statement("""
            SELECT h.id, h.host, \(Self.capOfHost), h.last_claim
            FROM hosts h WHERE h.queued > 0 AND h.paused_until <= ? AND (h.last_claim, h.id) > (?, ?)
            ORDER BY h.last_claim, h.id LIMIT ?
            """)
        let pageSize = max(2 * request.claim, Self.hostsPerClaimPage)
        var leases: [Lease] = []
        var after = (claim: Int.min, id: Int.min)
        // A host claimed from moves behind every other: a later page meets it again, and skips it.
        var claimedFrom = Set<Int>()
        while leases.count < request.claim {
            let hostRows = try page.rows([now, after.claim, after.id, pageSize]) { ($0.int(0), $0.string(1), $0.int(2), $0.int(3)) }
            guard let last = hostRows.last else { break }
            after = (last.3, last.0)
            let open: [(id: Int, name: String, room: Int)] = hostRows.compactMap { row in
                guard !claimedFrom.contains(row.0) else { return nil }
                let room = claimAheadRounds * row.2 - request.heldByHost[row.0, default: 0]
                return room > 0 ? (row.0, row.1, room) : nil
            }
            let claimed = try claimRoundRobin(open, limit: request.claim - leases.count, owner: request.owner,
                                              leaseMilliseconds: request.leaseMilliseconds, maxAttempts: request.maxAttempts, now: now)
            for lease in claimed { claimedFrom.insert(lease.job.hostID) }
            leases += claimed
            if hostRows.count < pageSize { break }
        }
        return leases
    }

    /// Hosts read at a time by a claim (at least; twice the claim when that is more).
    static let hostsPerClaimPage = 256
}
