import Foundation
import HaulCore
@testable import HaulPostgres
import HaulTestSupport
import Testing

/// The exchange runs on generic plans (planned once per connection, not on every call): each of
/// its statements must then still find rows by index, whatever the queue's statistics say.
@Suite(.enabled(if: PostgresCluster.unavailableReason == nil, Comment(rawValue: PostgresCluster.unavailableReason ?? "")))
struct PostgresPlanTests {
    @Test(arguments: [1, 4, 200])
    func theExchangesStatementsReadNoTableWholeOnGenericPlans(hosts: Int) throws {
        let fixture = try StoreFixture(.postgres)
        let store = try fixture.open()
        // 20,000 jobs of a few hosts with many jobs each (the shape that tempts the planner to
        // hash a table) or of many hosts, most done, a few hundred running (their attempts open
        // on their rows), each ended attempt recorded in attempts (as in a queue whose jobs finished
        // before migration 0007); with fresh statistics.
        try fixture.add((0..<20_000).map { "http://127.0.0.\($0 % hosts % 100 + 2):\(8000 + $0 % hosts / 100)/f\($0)" }, to: store)
        let connection = try PostgresConnection(url: fixture.location)
        try connection.execute("""
            UPDATE jobs SET state = CASE WHEN id % 50 = 0 THEN 'running' ELSE 'done' END, attempts = 1, lease_token = 't' || id,
                lease_expires_at = CASE WHEN id % 50 = 0 THEN 1 END, attempt_started_at = 0, attempt_start_bytes = 0
            WHERE id <= 15000;
            INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at)
                SELECT id, 1, 't' || id, 0, 1 FROM jobs WHERE id <= 15000 AND state = 'done';
            ANALYZE
            """)
        try connection.execute("SET plan_cache_mode = force_generic_plan")
        for statement in Self.statements {
            try connection.execute("PREPARE \(statement.name) AS \(statement.sql)")
            let plan = try connection.query("EXPLAIN EXECUTE \(statement.name)(\(statement.arguments))").map { $0.string(0) }
                .joined(separator: "\n")
            for table in ["jobs", "attempts"] {
                #expect(!plan.contains("Seq Scan on \(table)"), "\(statement.name) reads \(table) whole:\n\(plan)")
            }
            // A batch given by ids finds each job by its id, not by reading every running job
            // (and the batch again for each: see PostgresJobStore.heldRunning).
            if ["renew_jobs", "progress", "complete"].contains(statement.name) {
                #expect(!plan.contains("jobs_running"), "\(statement.name) reads the running jobs:\n\(plan)")
            }
        }
    }

    /// `haul get` starts its run once its first lines are queued: a worker then plans its
    /// statements (once per session) on a nearly empty table. As `add` grows the table, the
    /// server's statistics follow it (see `PostgresJobStore.analyzeJobsIfGrown`), so those
    /// statements are planned again and find rows by index once the table is large.
    @Test func statementsPlannedOnASmallQueueArePlannedAgainOnceItGrew() throws {
        let fixture = try StoreFixture(.postgres)
        let store = try fixture.open()
        let urls = (0..<20_000).map { "http://127.0.0.2:8000/f\($0)" }
        try fixture.add(Array(urls[..<200]), to: store)
        let connection = try PostgresConnection(url: fixture.location)
        try connection.execute("SET plan_cache_mode = force_generic_plan")
        func plans() throws -> [(name: String, plan: String)] {
            try Self.statements.map { statement in
                (statement.name, try connection.query("EXPLAIN EXECUTE \(statement.name)(\(statement.arguments))").map { $0.string(0) }
                    .joined(separator: "\n"))
            }
        }
        for statement in Self.statements { try connection.execute("PREPARE \(statement.name) AS \(statement.sql)") }
        _ = try plans()  // planned on 200 jobs
        for start in stride(from: 200, to: urls.count, by: 1_024) {  // as get's import adds them
            try fixture.add(Array(urls[start..<min(start + 1_024, urls.count)]), to: store)
        }
        for (name, plan) in try plans() {
            #expect(!plan.contains("Seq Scan on jobs"), "\(name) reads jobs whole, planned when the table was small:\n\(plan)")
        }
        let pages = try connection.query("""
            SELECT relpages, pg_relation_size(oid) / current_setting('block_size')::bigint FROM pg_class WHERE oid = 'jobs'::regclass
            """)[0]
        #expect(pages.int(0) * 2 >= pages.int(1), "the statistics know the table's size")
    }

    /// The exchange's statements with arguments to plan them with.
    static var statements: [(name: String, sql: String, arguments: String)] {
        [
            ("evicted", PostgresJobStore.evictedSQL, "'w'"),
            ("renew_jobs", PostgresJobStore.renewJobsSQL, "1, '{1,2}', '{t,u}', 0"),
            ("renew_slots", PostgresJobStore.renewSlotsSQL, "1, '{1}', '{0}', '{t}', 0"),
            ("progress", PostgresJobStore.progressSQL, "0, '{1}', '{t}', '{5}', '{10}', '{e}', '{m}', '{u}'"),
            ("complete", PostgresJobStore.completeSQL,
             "0, '{1}', '{t}', '{200}', '{5}', '{/p}', '{5}', '{1}', '{2}', '{3}', '{e}', '{m}', '{text/plain}', '{u}', '{s}', 'w'"),
            ("release_slots", PostgresJobStore.releaseSlotsSQL, "'{1}', '{0}', '{t}'"),
            ("hosts_with_work", PostgresJobStore.hostsWithWorkSQL, "0, 0, 32"),
            ("take", PostgresJobStore.takeSQL, "'{1,2}', '{16,16}', 0, NULL, 'w', 1"),
            ("host_conditions", PostgresJobStore.hostConditionsSQL, "'{1,2}', 'w', 0"),
            ("idle", PostgresJobStore.idleSQL, "0"),
            ("expire_leases", PostgresJobStore.expireLeasesSQL, "5"),
            ("evict_silent", PostgresJobStore.evictSilentSQL, "1000000, 0"),
            ("forget_silent", PostgresJobStore.forgetSilentSQL, "1000000"),
            ("end_leases", PostgresJobStore.endLeasesSQL, "5, '{a,b}'"),
        ]
    }

    /// Finding the hosts with work reads the hosts that have queued jobs, not every host: with
    /// 2,000 hosts whose jobs are all done beside 3 with queued jobs, a handful of host rows.
    @Test func findingHostsWithWorkReadsOnlyHostsWithQueuedJobs() throws {
        let fixture = try StoreFixture(.postgres)
        let store = try fixture.open()
        try fixture.add((0..<2_003).map { "http://h\($0).example/f" }, to: store)
        let connection = try PostgresConnection(url: fixture.location)
        try connection.execute("UPDATE jobs SET state = 'done' WHERE host_id > 3; ANALYZE")
        try connection.execute("SET plan_cache_mode = force_generic_plan")
        try connection.execute("PREPARE hosts_with_work AS \(PostgresJobStore.hostsWithWorkSQL)")
        let found = try connection.query("EXECUTE hosts_with_work(\(Int64.max / 2), 0, 32)").map { $0.int(0) }
        // Host rows read: the rows of every scan of hosts, times its loops.
        let plan = try connection.query("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE hosts_with_work(\(Int64.max / 2), 0, 32)")
            .map { $0.string(0) }
        let read = plan.filter { $0.contains(" on hosts ") }.reduce(0) { total, line in
            let numbers = line.split(separator: " ").compactMap { word -> Int? in
                let parts = word.split(separator: "=")
                guard parts.count == 2, parts[0] == "rows" || parts[0] == "loops" else { return nil }
                return Int(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: ")")))
            }
            return total + (numbers.count == 2 ? numbers[0] * numbers[1] : 1_000_000)
        }
        #expect(found.sorted() == [1, 2, 3])
        #expect(read <= 10, "read \(read) host rows to find 3 hosts with work among 2,003:\n\(plan.joined(separator: "\n"))")
    }

    /// JIT compilation cost the sweep's statements (estimated above `jit_above_cost` on generic
    /// plans) 15–40 ms of the server's time on every call, for work of well under a millisecond:
    /// the store's sessions run without it.
    @Test func theStoresSessionRunsWithoutJIT() throws {
        let fixture = try StoreFixture(.postgres)
        let store = try PostgresJobStore(url: fixture.location)
        #expect(try store.connection.query("SHOW jit").first?.string(0) == "off")
    }
}
