import HaulCore

/// Checks of a queue database that every test may make after any operation.
public enum QueueInvariants {
    /// Differences between the trigger-kept counters (`job_totals`, `hosts.queued`) and what the
    /// jobs table actually holds; empty when they agree.
    public static func counterMismatches(in database: Database) throws -> [String] {
        var problems: [String] = []
        let totals = try database.rows(
            "SELECT state, jobs, expected_bytes, received_bytes, unknown_size FROM job_totals ORDER BY state") {
            [$0.string(0), String($0.int(1)), String($0.int(2)), String($0.int(3)), String($0.int(4))]
        }
        // Running jobs are not counted there (migration 0012): that row stays at zero.
        let actual = try database.rows("""
            SELECT s.state, count(j.id), coalesce(sum(j.expected_bytes), 0), coalesce(sum(j.received_bytes), 0),
                   count(j.id) - count(j.expected_bytes)
            FROM (SELECT 'queued' AS state UNION ALL SELECT 'running' UNION ALL SELECT 'done'
                  UNION ALL SELECT 'failed' UNION ALL SELECT 'cancelled') s
            LEFT JOIN jobs j ON j.state = s.state AND j.state <> 'running'
            GROUP BY s.state ORDER BY s.state
            """) { [$0.string(0), String($0.int(1)), String($0.int(2)), String($0.int(3)), String($0.int(4))] }
        if totals != actual { problems.append("job_totals \(totals) but the jobs table holds \(actual)") }
        let hosts = try database.rows("""
            SELECT h.host, h.queued, (SELECT count(*) FROM jobs j WHERE j.host_id = h.id AND j.state = 'queued')
            FROM hosts h ORDER BY h.id
            """) { ($0.string(0), $0.int(1), $0.int(2)) }
        for (host, counted, actual) in hosts where counted != actual {
            problems.append("hosts.queued for \(host) is \(counted) but \(actual) jobs are queued")
        }
        return problems
    }

    /// The rows of `PRAGMA integrity_check`: `["ok"]` for a sound database.
    public static func integrityCheck(_ database: Database) throws -> [String] {
        try database.rows("PRAGMA integrity_check") { $0.string(0) }
    }

    /// Running jobs per host (host key → count).
    public static func runningPerHost(_ database: Database) throws -> [String: Int] {
        var result: [String: Int] = [:]
        for (host, count) in try database.rows("""
            SELECT h.host, count(*) FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.state = 'running' GROUP BY h.host
            """, [], { ($0.string(0), $0.int(1)) }) {
            result[host] = count
        }
        return result
    }
}
