import Foundation
import HaulCore
@testable import HaulPostgres
import HaulTestSupport
import Synchronization
import Testing

/// PostgresConnection's URL redaction and parameter encoding, which need no server.
struct PostgresURLTests {
    @Test func redactsThePasswordOfAURI() {
        #expect(PostgresConnection.redacted("postgres://haul:s3cret@127.0.0.1:5432/haul") == "postgres://haul@127.0.0.1:5432/haul")
        #expect(PostgresConnection.redacted("postgresql://u:p@db.example/q?sslmode=require") == "postgresql://u@db.example/q?sslmode=require")
        #expect(PostgresConnection.redacted("postgres://:p@host/db") == "postgres://host/db")
        // A raw "@" in the password: everything up to the last "@" before the path goes.
        #expect(PostgresConnection.redacted("postgres://u:p@ss@host/db") == "postgres://u@host/db")
        #expect(PostgresConnection.redacted("postgres://u:p@host?sslmode=disable") == "postgres://u@host?sslmode=disable")
        // Any case of the scheme (haul takes it as PostgreSQL's), and a "/" in the password.
        #expect(PostgresConnection.redacted("POSTGRES://haul:topsecret@127.0.0.1:5432/haul") == "POSTGRES://haul@127.0.0.1:5432/haul")
        #expect(PostgresConnection.redacted("Postgresql://u:p@host/db") == "Postgresql://u@host/db")
        #expect(PostgresConnection.redacted("postgres://haul:top/secret@host/db") == "postgres://haul@host/db")
        #expect(PostgresConnection.redacted("postgres://haul:top/sec@ret@host/db?sslmode=require") == "postgres://haul@host/db?sslmode=require")
    }

    @Test func redactsAPasswordParameter() {
        #expect(PostgresConnection.redacted("postgres://u@host/db?password=s3cret") == "postgres://u@host/db")
        #expect(PostgresConnection.redacted("postgres://u@host/db?sslmode=require&password=s3cret&connect_timeout=5")
            == "postgres://u@host/db?sslmode=require&connect_timeout=5")
        #expect(PostgresConnection.redacted("host=db user=u password='s3 cret' dbname=q") == "host=db user=u dbname=q")
        #expect(PostgresConnection.redacted("host=db password=s3cret") == "host=db")
        // The client key's password is one too.
        #expect(PostgresConnection.redacted("postgres://u@host/db?sslmode=require&sslpassword=K3Y") == "postgres://u@host/db?sslmode=require")
        #expect(PostgresConnection.redacted("host=db sslpassword=K3Y sslmode=require") == "host=db sslmode=require")
        #expect(PostgresConnection.passwords(in: "postgres://u:p@host/db?sslpassword=K3Y") == ["p", "K3Y"])
    }

    @Test func leavesURLsWithoutAPasswordAlone() {
        for url in ["postgres://haul@127.0.0.1:5432/haul", "postgres://host/db", "postgresql:///db?host=/tmp", "host=db dbname=q"] {
            #expect(PostgresConnection.redacted(url) == url)
        }
    }

    @Test func arrayLiteralsQuoteEveryElement() {
        #expect(PostgresValue.strings(["a", "b,c", "q\"uote", "back\\slash", nil, "NULL", ""]).text
            == #"{"a","b,c","q\"uote","back\\slash",NULL,"NULL",""}"#)
        #expect(PostgresValue.ints([1, -2, Int.max]).text == "{1,-2,9223372036854775807}")
        #expect(PostgresValue.strings([]).text == "{}")
        let literals: [PostgresValue] = [5, "x", nil, true, 1.5]
        #expect(literals == [.int(5), .string("x"), .null, .bool(true), .double(1.5)])
    }
}

/// PostgresConnection and PostgresMigrator against a real server: the test process's throwaway
/// cluster (PostgresCluster), one fresh database per test.
@Suite(.enabled(if: PostgresCluster.unavailableReason == nil, Comment(rawValue: PostgresCluster.unavailableReason ?? "")))
struct PostgresConnectionTests {
    private func freshDatabase() throws -> String {
        try PostgresCluster.shared().makeDatabase()
    }

    @Test func parametersRoundTrip() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        let text = "it's \"quoted\", back\\slash, $1 ; -- é 日本 🚚\nnew line\t{a,b}"
        let rows = try connection.query("SELECT $1::bigint, $2::bigint, $3::text, $4::text, $5::boolean, $6::boolean, $7::float8, $8::float8, $9::text",
                                        [.int(Int.min), .int(Int.max), .string(text), .null, .bool(true), .bool(false), .double(0.1), .double(-.infinity), ""])
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row.int(0) == Int.min)
        #expect(row.int(1) == Int.max)
        #expect(row.string(2) == text)
        #expect(row.optionalString(3) == nil)
        #expect(row.optionalInt(3) == nil)
        #expect(row.bool(4) == true)
        #expect(row.bool(5) == false)
        #expect(row.double(6) == 0.1)
        #expect(row.double(7) == -.infinity)
        #expect(row.string(8) == "")
        #expect(rows.columns.count == 9)
    }

    @Test func arraysRoundTripThroughUnnest() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        let values: [String?] = ["a,b", "\"q\"", "back\\slash\\", nil, "", "NULL", "{}", " spaced ", "é🚚", "x\"y\\z,"]
        let rows = try connection.query("SELECT x FROM unnest($1::text[]) WITH ORDINALITY AS t(x, n) ORDER BY n", [.strings(values)])
        #expect(rows.map { $0.optionalString(0) } == values)
        let numbers = [3, -1, 0, Int.max, Int.min]
        let numberRows = try connection.query("SELECT x FROM unnest($1::bigint[]) WITH ORDINALITY AS t(x, n) ORDER BY n", [.ints(numbers)])
        #expect(numberRows.map { $0.int(0) } == numbers)
        #expect(try connection.query("SELECT cardinality($1::bigint[])", [.ints([])]).first?.int(0) == 0)
    }

    @Test func textWithANulByteIsRefusedClearly() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        let error = try #require(throws: PostgresError.self) {
            try connection.query("SELECT $1::text", [.string("a\u{0}b")])
        }
        #expect(error.kind == .client)
        #expect(error.message.contains("NUL"))
        // The connection is still usable.
        #expect(try connection.query("SELECT 1").first?.int(0) == 1)
    }

    @Test func runCountsAffectedRows() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 10)")
        #expect(try connection.run("DELETE FROM t WHERE id > $1", [.int(7)]) == 3)
        #expect(try connection.run("UPDATE t SET id = id WHERE id = $1", [.int(100)]) == 0)
    }

    @Test func statementsArePreparedOncePerSQLText() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        for number in 0..<50 {
            _ = try connection.query("SELECT $1::bigint + 1", [.int(number)])
            try connection.run("SELECT $1::text", [.string("x\(number)")])
        }
        let names = try connection.query("SELECT name FROM pg_prepared_statements ORDER BY name").map { $0.string(0) }
        #expect(names == ["s1", "s2", "s3"])  // the two statements and this query
    }

    @Test func statementsDeallocatedOnTheServerArePreparedAgain() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        #expect(try connection.query("SELECT $1::bigint + 1", [.int(1)]).first?.int(0) == 2)
        try connection.execute("DEALLOCATE ALL")
        #expect(try connection.query("SELECT $1::bigint + 1", [.int(2)]).first?.int(0) == 3)
        // Inside a transaction the failure aborts it; the next transaction prepares it again.
        try connection.execute("DEALLOCATE ALL")
        let error = try #require(throws: PostgresError.self) {
            try connection.transaction { _ = try connection.query("SELECT $1::bigint + 1", [.int(3)]) }
        }
        #expect(error.sqlState == "26000")
        #expect(try connection.transaction { try connection.query("SELECT $1::bigint + 1", [.int(4)]).first?.int(0) } == 5)
        _ = try connection.query("SELECT $1::text", ["new"])  // a new name, not a reused one
    }

    @Test func aStatementFirstPreparedInARolledBackTransactionStillWorks() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try connection.transaction {
                _ = try connection.query("SELECT $1::bigint * 2", [.int(2)])
                throw Abort()
            }
        }
        #expect(try connection.query("SELECT $1::bigint * 2", [.int(21)]).first?.int(0) == 42)
    }

    @Test func errorsCarrySQLStateAndSQLButNotTheValues() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        let secret = "https://alice:s3cret-token@example.org/file"
        let sql = "SELECT $1::bigint"
        let error = try #require(throws: PostgresError.self) { try connection.query(sql, [.string(secret)]) }
        #expect(error.sqlState == "22P02")  // invalid_text_representation
        #expect(error.sql == sql)
        #expect(error.kind == .server)
        #expect(!error.description.contains("s3cret"))
        #expect(!error.explained(location: connection.location, busyTimeout: 5).contains("s3cret"))
        #expect(error.description.contains("bigint"))

        // A unique violation: the server's DETAIL quotes the key; it is not kept.
        try connection.execute("CREATE TABLE jobs (url text PRIMARY KEY)")
        try connection.run("INSERT INTO jobs VALUES ($1)", [.string(secret)])
        let duplicate = try #require(throws: PostgresError.self) {
            try connection.run("INSERT INTO jobs VALUES ($1)", [.string(secret)])
        }
        #expect(duplicate.isUniqueViolation)
        #expect(!duplicate.isRetryable)
        #expect(!duplicate.description.contains("s3cret"))
        #expect(!String(describing: duplicate as any Error).contains("s3cret"))

        // A short value the server quotes is replaced too.
        let short = try #require(throws: PostgresError.self) { try connection.query("SELECT $1::int", [.string("pw1")]) }
        #expect(!short.description.contains("pw1"))
        #expect(short.description.contains("\"***\""))
    }

    @Test func transactionRollsBackWhenItsBodyThrows() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try connection.transaction {
                try connection.run("INSERT INTO t VALUES (1)")
                throw Abort()
            }
        }
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*) FROM t").first?.int(0) == 0)
        let value = try connection.transaction {
            try connection.run("INSERT INTO t VALUES (2)")
            return 7
        }
        #expect(value == 7)
        #expect(try connection.query("SELECT id FROM t").map { $0.int(0) } == [2])
    }

    @Test func pipelinedStatementsRunInOrderAndSeeEarlierWrites() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        let results = try connection.transaction {
            try connection.pipeline([
                ("INSERT INTO t VALUES ($1, $2), ($3, $4)", [1, "a", 2, "b"]),
                ("UPDATE t SET v = v || $1 WHERE id = $2 RETURNING v", ["!", 2]),
                ("SELECT id, v FROM t ORDER BY id", []),
            ])
        }
        #expect(results.map(\.affected) == [2, 1, 2])
        #expect(results[1].rows.map { $0.string(0) } == ["b!"])
        #expect(results[2].rows.map { "\($0.int(0))\($0.string(1))" } == ["1a", "2b!"])
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*) FROM t").first?.int(0) == 2)
        #expect(try connection.pipeline([]).isEmpty)
    }

    @Test func aFailingPipelinedStatementThrowsItsErrorAndSkipsTheRest() throws {
        let url = try freshDatabase()
        let connection = try PostgresConnection(url: url)
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        let error = try #require(throws: PostgresError.self) {
            try connection.transaction {
                _ = try connection.pipeline([
                    ("INSERT INTO t VALUES ($1)", [1]),
                    ("INSERT INTO t VALUES ($1)", [1]),  // a duplicate key
                    ("INSERT INTO t VALUES ($1)", [3]),
                ], commit: true)
            }
        }
        #expect(error.sqlState == "23505")
        #expect(error.sql?.contains("INSERT INTO t") == true)
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*) FROM t").first?.int(0) == 0)
        // Outside a transaction the pipeline is one (implicit) transaction: all or nothing.
        #expect(throws: PostgresError.self) {
            try connection.pipeline([("INSERT INTO t VALUES ($1)", [5]), ("SELECT 1/$1::int", [0]), ("INSERT INTO t VALUES ($1)", [6])])
        }
        #expect(try connection.query("SELECT count(*) FROM t").first?.int(0) == 0)
        _ = try connection.pipeline([("INSERT INTO t VALUES ($1)", [5]), ("INSERT INTO t VALUES ($1)", [6])])
        #expect(try connection.query("SELECT id FROM t ORDER BY id").map { $0.int(0) } == [5, 6])
    }

    @Test func aPipelineThatCommitsEndsItsTransaction() throws {
        let url = try freshDatabase()
        let connection = try PostgresConnection(url: url)
        let other = try PostgresConnection(url: url)
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try connection.transaction {
                _ = try connection.pipeline([("INSERT INTO t VALUES ($1)", [1])], commit: true)
                // Committed already: another session sees the row, and throwing now undoes nothing.
                #expect(try other.query("SELECT count(*) FROM t").first?.int(0) == 1)
                #expect(!connection.isInTransaction)
                throw Abort()
            }
        }
        #expect(try connection.query("SELECT count(*) FROM t").first?.int(0) == 1)
        // A transaction that sent nothing commits nothing; one whose first statement opens it
        // holds what it wrote from other sessions until it commits.
        try connection.transaction {}
        try connection.transaction {
            try connection.run("INSERT INTO t VALUES ($1)", [2])
            #expect(connection.isInTransaction)
            #expect(try other.query("SELECT count(*) FROM t").first?.int(0) == 1)
        }
        #expect(try other.query("SELECT count(*) FROM t").first?.int(0) == 2)
    }

    @Test func transactionWhoseBodySwallowedAnErrorIsRolledBack() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        let error = try #require(throws: PostgresError.self) {
            try connection.transaction {
                try connection.run("INSERT INTO t VALUES (1)")
                _ = try? connection.run("INSERT INTO t VALUES (1)")
            }
        }
        #expect(error.kind == .client)
        #expect(try connection.query("SELECT count(*) FROM t").first?.int(0) == 0)
    }

    @Test func deadlockedTransactionsAreRetriedAndBothSucceed() throws {
        let url = try freshDatabase()
        let setup = try PostgresConnection(url: url)
        try setup.execute("CREATE TABLE t (id int PRIMARY KEY, n int NOT NULL); INSERT INTO t VALUES (1, 0), (2, 0)")
        let attempts = Tally()
        let locked = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        let finished = DispatchSemaphore(value: 0)
        let outcomes = Mutex<[String]>([])
        for side in 0..<2 {
            Thread {
                do {
                    let connection = try PostgresConnection(url: url)
                    try connection.execute("SET deadlock_timeout = '50ms'")
                    var tries = 0
                    let (first, second) = side == 0 ? (1, 2) : (2, 1)
                    try connection.transaction {
                        tries += 1
                        attempts.add()
                        try connection.run("UPDATE t SET n = n + 1 WHERE id = $1", [.int(first)])
                        if tries == 1 {
                            // Both hold their first row before either asks for its second: a deadlock.
                            locked[side].signal()
                            _ = locked[1 - side].wait(timeout: .now() + 10)
                        }
                        try connection.run("UPDATE t SET n = n + 1 WHERE id = $1", [.int(second)])
                    }
                    outcomes.withLock { $0.append("ok") }
                } catch {
                    outcomes.withLock { $0.append("\(error)") }
                }
                finished.signal()
            }.start()
        }
        for _ in 0..<2 { #expect(finished.wait(timeout: .now() + 60) == .success) }
        #expect(outcomes.withLock { $0 } == ["ok", "ok"])
        #expect(attempts.value >= 3, "one side must have been rolled back and run again")
        #expect(try setup.query("SELECT n FROM t ORDER BY id").map { $0.int(0) } == [2, 2])
    }

    @Test func refusedConnectionNamesTheRedactedLocationAndNoPassword() throws {
        let url = "postgres://haul:s3cret@127.0.0.1:1/x"
        let error = try #require(throws: PostgresError.self) { try PostgresConnection(url: url) }
        #expect(error.kind == .connect)
        #expect(error.isConnectionFailure)
        let line = error.explained(location: PostgresConnection.redacted(url), busyTimeout: 5)
        #expect(line.hasPrefix("cannot connect to the queue at postgres://haul@127.0.0.1:1/x: "))
        #expect(line.contains("--db or HAUL_DB"))
        #expect(!line.contains("s3cret"))
        #expect(!error.description.contains("s3cret"))
        #expect(!line.contains("\n"))

        // A URL libpq cannot parse: its message may quote the URL; the password is taken out.
        for bad in ["postgres://haul:s3cret@[::1/x", "postgres://haul:s3cret@127.0.0.1:port/x", "postgres://haul:s3%zzcret@127.0.0.1:1/x"] {
            let parse = try #require(throws: PostgresError.self) { try PostgresConnection(url: bad) }
            #expect(parse.kind == .connect)
            #expect(!parse.description.contains("s3cret") && !parse.description.contains("s3%zzcret"), "\(parse)")
        }
    }

    @Test func missingDatabaseIsExplained() throws {
        let cluster = try PostgresCluster.shared()
        let error = try #require(throws: PostgresError.self) { try PostgresConnection(url: cluster.url(database: "no_such_db")) }
        #expect(error.kind == .connect)
        #expect(error.explained(location: cluster.url(database: "no_such_db"), busyTimeout: 5).contains("no_such_db"))
    }

    @Test func throughputOfSmallStatements() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try connection.execute("CREATE TABLE t (id bigint PRIMARY KEY, url text NOT NULL, size bigint)")
        let clock = ContinuousClock.now
        try connection.transaction {
            for id in 0..<5_000 {
                try connection.run("INSERT INTO t (id, url, size) VALUES ($1, $2, $3)", [.int(id), .string("https://example.org/\(id)"), id % 3 == 0 ? nil : .int(id)])
            }
        }
        let inserted = ContinuousClock.now - clock
        let read = ContinuousClock.now
        let rows = try connection.query("SELECT id, url, size FROM t ORDER BY id")
        let sum = rows.reduce(0) { $0 + $1.int(0) + ($1.optionalInt(2) ?? 0) }
        let readTime = ContinuousClock.now - read
        #expect(rows.count == 5_000)
        #expect(sum > 0)
        print("PostgresConnection: 5,000 single-row inserts in \(inserted), 5,000 rows read in \(readTime)")
        #expect(inserted < .seconds(5))
    }

    // MARK: - Migrations

    @Test func embeddedMigrationsApplyOnceToAFreshDatabase() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        #expect(!Migration.postgresEmbedded.isEmpty)
        #expect(Migration.postgresEmbedded.map(\.version) == Array(1...Migration.postgresEmbedded.count))
        try PostgresMigrator().migrate(connection)
        try PostgresMigrator().migrate(connection)
        let applied = try PostgresMigrator.appliedVersions(connection)
        #expect(applied.map(\.version) == Migration.postgresEmbedded.map(\.version))
        #expect(applied.map(\.name) == Migration.postgresEmbedded.map(\.name))
        #expect(try connection.query("SELECT value FROM queue_settings WHERE name = 'default_host_cap'").first?.int(0) == 4)
        // The advisory lock was released.
        #expect(try connection.query("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()").first?.int(0) == 0)
    }

    /// A new database gets every migration in one transaction (now(), the recorded time, is the
    /// transaction's start); a database being upgraded, one transaction a migration.
    @Test func aNewDatabaseIsMigratedInOneTransactionAnUpgradeInOneAMigration() throws {
        let fresh = try PostgresConnection(url: freshDatabase())
        try PostgresMigrator().migrate(fresh)
        #expect(try fresh.query("SELECT count(*), count(DISTINCT applied_at) FROM schema_migrations").first
            .map { [$0.int(0), $0.int(1)] } == [Migration.postgresEmbedded.count, 1])
        let upgraded = try PostgresConnection(url: freshDatabase())
        try PostgresMigrator(migrations: Array(Migration.postgresEmbedded.prefix(5))).migrate(upgraded)
        try PostgresMigrator().migrate(upgraded)
        #expect(try upgraded.query("SELECT count(DISTINCT applied_at) FROM schema_migrations").first?.int(0)
                == 1 + Migration.postgresEmbedded.count - 5)
    }

    /// A migration that fails on a new database leaves it as it was: no table, no version.
    @Test func aFailedMigrationLeavesANewDatabaseEmpty() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        let migrator = PostgresMigrator(migrations: [
            Migration(version: 1, name: "0001_log.sql", sql: "CREATE TABLE log (version int NOT NULL);"),
            Migration(version: 2, name: "0002_broken.sql", sql: "INSERT INTO missing_table VALUES (2);"),
        ])
        let error = try #require(throws: PostgresError.self) { try migrator.migrate(connection) }
        #expect(error.sqlState == "42P01" && error.sql == "the migrations of a new database, 0001_log.sql, 0002_broken.sql",
                "\(error)")
        #expect(try connection.query("SELECT to_regclass('log') IS NULL").first?.bool(0) == true)
        #expect(try PostgresMigrator.appliedVersions(connection).isEmpty)
    }

    /// A queue made before job_folders (version 1) gets the folders of the jobs it holds, so the
    /// first run after the upgrade still sweeps them for orphaned temp files.
    @Test func upgradeRecordsTheFoldersOfJobsAddedBefore() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try PostgresMigrator(migrations: Array(Migration.postgresEmbedded.prefix(1))).migrate(connection)
        try connection.run("INSERT INTO hosts (host) VALUES ('a.example:443')")
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, created_at, updated_at)
            SELECT 'https://a.example/' || n, (SELECT id FROM hosts), d, n, 1, 1
            FROM (VALUES (1, '/d/1'), (2, '/d/2'), (3, '/d/sub/3'), (4, 'bare')) AS v(n, d)
            """)
        try PostgresMigrator().migrate(connection)
        #expect(try connection.query("SELECT folder FROM job_folders ORDER BY folder").map { $0.string(0) } == ["", "/d/", "/d/sub/"])
    }

    /// The event a test that starts work on another thread awaits: one connection to the
    /// database at `location` waits on a lock (pg_stat_activity), within 20 s (else `failure`).
    private func awaitOneWaitingOnALock(in location: String, _ failure: String) throws {
        let watcher = try PostgresConnection(url: location)
        let deadline = Date().addingTimeInterval(20)
        while try watcher.query("""
            SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
            """).first?.int(0) != 1 {
            try #require(Date() < deadline, Comment(rawValue: failure))
        }
    }

    /// A fresh database with the first `migrations` PostgreSQL migrations applied (nil: all) and
    /// one host, a.example:443 (no jobs); and a connection to it.
    private func queueOfOneHost(migrations: Int?) throws -> (location: String, connection: PostgresConnection) {
        let location = try freshDatabase()
        let connection = try PostgresConnection(url: location)
        let migrator = migrations.map { PostgresMigrator(migrations: Array(Migration.postgresEmbedded.prefix($0))) } ?? PostgresMigrator()
        try migrator.migrate(connection)
        try connection.run("INSERT INTO hosts (host) VALUES ('a.example:443')")
        return (location, connection)
    }

    /// A queue made before 0006 holds its running jobs' open attempts as records without an end:
    /// the upgrade moves them onto their jobs, where `show` still lists them as open.
    @Test func upgradeMovesOpenAttemptsOntoTheirJobs() throws {
        let (location, connection) = try queueOfOneHost(migrations: 5)
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, state, attempts, lease_token, created_at, updated_at)
            VALUES ('https://a.example/1', (SELECT id FROM hosts), '/d/1', 1, 'running', 2, 't1', 1, 1)
            """)
        try connection.execute("""
            INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, error)
                SELECT id, 1, 't0', 3, 4, 'lease expired: the worker stopped without reporting' FROM jobs;
            INSERT INTO attempts (job_id, number, lease_token, started_at, bytes) SELECT id, 2, 't1', 5, 50 FROM jobs
            """)
        try PostgresMigrator().migrate(connection)
        let store = try PostgresJobStore(url: location)
        let id = try #require(try connection.query("SELECT id FROM jobs").first?.int(0))
        let attempts = try store.attempts(jobID: id)
        #expect(attempts.map(\.openRecord)
                == ["1 3 4 -", "2 5 open 50"])
        #expect(try connection.query("SELECT count(*) FROM attempts WHERE finished_at IS NULL").first?.int(0) == 0)
    }

    /// A job queued before 0008 (claims) may have been tried already: its next claim is not a
    /// first try. A job added after is one.
    @Test func jobsQueuedBeforeClaimsWereCountedAreNotFirstTries() throws {
        let (location, connection) = try queueOfOneHost(migrations: 7)
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, created_at, updated_at)
            VALUES ('https://a.example/1', (SELECT id FROM hosts), '/d/1', 1, 1, 1)
            """)
        try PostgresMigrator().migrate(connection)
        let store = try PostgresJobStore(url: location)
        let resolver = DestinationResolver(directory: "/d")
        let line = try #require(try InputLine.parse(Array("https://a.example/2".utf8), resolver: resolver))
        _ = try store.add([line], maxAttempts: 5, profileID: nil, ifExists: .skip)
        var claim = Exchange(owner: "m/1/1", leaseMilliseconds: 60_000)
        claim.worker = "m"
        claim.claim = 2
        let leases = try store.exchange(claim).claimed.sorted { $0.jobID < $1.jobID }
        #expect(leases.map(\.job.url) == ["https://a.example/1", "https://a.example/2"])
        #expect(leases.map(\.firstTry) == [false, true])
    }

    /// A destination held by a job queued before 0009 (destinations in their own table) is
    /// still held after the upgrade: the same line again is that job, another URL for it is
    /// refused, and a name made from a URL gives way.
    @Test func destinationsQueuedBeforeTheyMovedAreStillHeld() throws {
        let (location, connection) = try queueOfOneHost(migrations: 8)
        let resolver = DestinationResolver(directory: "/d")
        let line = { (text: String) in try #require(try InputLine.parse(Array(text.utf8), resolver: resolver)) }
        let old = try line("https://a.example/x.iso")
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, created_at, updated_at)
            VALUES ($1, (SELECT id FROM hosts), $2, $3, 1, 1)
            """, [.string(old.url.string), .string(old.destination), .int(JobBatch.destinationKey(old.destination))])
        let id = try #require(try connection.query("SELECT id FROM jobs").first?.int(0))
        try PostgresMigrator().migrate(connection)
        let store = try PostgresJobStore(url: location)
        let outcomes = try store.add([old, try line("https://b.example/q out=x.iso"), try line("https://b.example/x.iso")],
                                     maxAttempts: 5, profileID: nil, ifExists: .skip)
        #expect(Array(outcomes.prefix(2)) == [.alreadyQueued(jobID: id), .rejected(.destinationTaken(byJob: id, url: old.url.string))])
        guard case .added(let suffixed) = outcomes[2] else { Issue.record("\(outcomes)"); return }
        #expect(try store.job(id: suffixed)?.destination == JobBatch.suffixed("/d/x.iso", for: "https://b.example/x.iso"))
        #expect(try connection.query("SELECT count(*) FROM jobs").first?.int(0) == 2)
    }

    /// A batch an older haul commits while 0009 runs still holds its destination after it: the
    /// migration waits for the add under way before it copies the keys.
    @Test func aBatchCommittedWhileDestinationsMoveIsHeld() throws {
        let (location, connection) = try queueOfOneHost(migrations: 8)
        try connection.execute("BEGIN")
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, created_at, updated_at)
            VALUES ('https://a.example/x.iso', (SELECT id FROM hosts), '/d/x.iso', $1, 1, 1)
            """, [.int(JobBatch.destinationKey("/d/x.iso"))])
        let migrated = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { try PostgresMigrator().migrate(try PostgresConnection(url: location)) }
            migrated.withLock { $0 = result }
            done.signal()
        }
        try awaitOneWaitingOnALock(in: location, "the migration never waited for the add")
        try connection.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 20) == .success)
        try migrated.withLock { try $0?.get() }
        #expect(try connection.query("SELECT count(*) FROM job_destinations").first?.int(0) == 1)
    }

    /// A worker's database user given the rights on the queue's tables and nothing more (no right
    /// on a sequence) adds, claims and finishes jobs, as it could before 0009 drew the ids of new
    /// jobs with nextval().
    @Test func aUserWithRightsOnTheTablesOnlyAddsAndFinishes() throws {
        let location = try freshDatabase()
        _ = try PostgresJobStore(url: location)  // the owner makes the queue
        let store = try PostgresJobStore(url: try userWithRightsOnTheTablesOnly(of: location, try PostgresConnection(url: location)))
        let line = try #require(try InputLine.parse(Array("https://a.example/1".utf8), resolver: DestinationResolver(directory: "/d")))
        let added = try store.add([line], maxAttempts: 5, profileID: nil, ifExists: .skip)
        guard case .added(let id) = added.first else { Issue.record("\(added)"); return }
        var claim = Exchange(owner: "m/1/1", leaseMilliseconds: 60_000)
        claim.worker = "m"
        claim.claim = 1
        let lease = try #require(try store.exchange(claim).claimed.first)
        #expect(lease.jobID == id)
        var finish = Exchange(owner: "m/1/1", leaseMilliseconds: 60_000)
        finish.worker = "m"
        finish.outcomes = [.done(jobID: id, token: lease.token, status: 200, bytes: 7)]
        #expect(try store.exchange(finish).outcomes == [.recorded])
        #expect(try store.job(id: id)?.state == .done)
    }

    /// Such a user cannot bring the queue's schema up to date: it is told that the owner must,
    /// and the queue stays at its version until the owner opens it. Tables an upgrade adds are
    /// the user's too (the README's default privileges): it adds once the owner has upgraded.
    @Test func aUserWithRightsOnTheTablesOnlyIsToldTheOwnerUpgrades() throws {
        let (location, connection) = try queueOfOneHost(migrations: 8)
        let worker = try userWithRightsOnTheTablesOnly(of: location, connection)
        let error = try #require(throws: PostgresError.self) { try PostgresJobStore(url: worker) }
        #expect(error.kind == .upgradeNeedsOwner(name: Migration.postgresEmbedded[8].name))
        #expect(error.explained(location: "q", busyTimeout: 5).contains("run this haul once as the user that owns the queue's tables"))
        #expect(try connection.query("SELECT max(version) FROM schema_migrations").first?.int(0) == 8)
        _ = try PostgresJobStore(url: location)
        let line = try #require(try InputLine.parse(Array("https://a.example/1".utf8), resolver: DestinationResolver(directory: "/d")))
        let added = try PostgresJobStore(url: worker).add([line], maxAttempts: 5, profileID: nil, ifExists: .skip)
        guard case .added = added.first else { Issue.record("\(added)"); return }
    }

    /// A user that is not the owner but was given USAGE on the id sequence itself (the way round
    /// 0009's refusal) cannot make 0010 grant it to every user: GRANT only warns such a user, so
    /// the migration fails instead of being recorded as done, and stays for the owner.
    @Test func theGrantOfIdsIsNotRecordedWhenNothingWasGranted() throws {
        let (location, connection) = try queueOfOneHost(migrations: 9)
        let worker = try userWithRightsOnTheTablesOnly(of: location, connection)
        try connection.execute("GRANT USAGE ON SEQUENCE jobs_id_seq TO \(workerRole(of: location))")
        let error = try #require(throws: PostgresError.self) { try PostgresJobStore(url: worker) }
        #expect(error.kind == .upgradeNeedsOwner(name: Migration.postgresEmbedded[9].name))
        #expect(try connection.query("SELECT max(version) FROM schema_migrations").first?.int(0) == 9)
        _ = try PostgresJobStore(url: location)
        #expect(try connection.query("SELECT has_sequence_privilege('public', 'jobs_id_seq', 'USAGE')").first?.bool(0) == true)
    }

    /// A login given what the README gives a worker's user — USAGE on the schema, SELECT, INSERT,
    /// UPDATE, DELETE on the tables of the queue at `location`, and the same on the tables its
    /// owner makes later — and no other right: its URL.
    private func userWithRightsOnTheTablesOnly(of location: String, _ connection: PostgresConnection) throws -> String {
        let role = workerRole(of: location)
        try connection.execute("""
            CREATE ROLE \(role) LOGIN;
            GRANT USAGE ON SCHEMA public TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role);
            ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO \(role)
            """)
        return location.replacingOccurrences(of: "//haul@", with: "//\(role)@")
    }

    /// The login `userWithRightsOnTheTablesOnly` makes for the database at `location`.
    private func workerRole(of location: String) -> String {
        String(location.split(separator: "/").last ?? "") + "_worker"
    }

    /// An older haul on the same queue claims without counting claims, but sets
    /// attempt_started_at: the next claim of such a job is not a first try, and counts both.
    @Test func aClaimByAnOlderHaulIsCountedByTheNext() throws {
        let (location, connection) = try queueOfOneHost(migrations: nil)
        let store = try PostgresJobStore(url: location)
        let resolver = DestinationResolver(directory: "/d")
        let lines = try ["https://a.example/1", "https://a.example/2"].map {
            try #require(try InputLine.parse(Array($0.utf8), resolver: resolver))
        }
        _ = try store.add(lines, maxAttempts: 5, profileID: nil, ifExists: .skip)
        // The older haul's claim of job 1, handed back uncounted (its columns as it left them).
        try connection.run("UPDATE jobs SET attempt_started_at = 5, attempt_start_bytes = 0 WHERE url = 'https://a.example/1'")
        var claim = Exchange(owner: "m/1/1", leaseMilliseconds: 60_000)
        claim.worker = "m"
        claim.claim = 2
        let leases = try store.exchange(claim).claimed.sorted { $0.jobID < $1.jobID }
        #expect(leases.map(\.firstTry) == [false, true])
        #expect(try connection.query("SELECT claims FROM jobs ORDER BY id").map { $0.int(0) } == [2, 1])
    }

    /// A job finished before 0007 has its record in attempts, and none on its row: it is listed
    /// once after the upgrade, and still once after a refetch.
    @Test func upgradeListsAJobFinishedBeforeItOnce() throws {
        let (location, connection) = try queueOfOneHost(migrations: 6)
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, state, attempts, last_status, received_bytes,
                              attempt_started_at, finished_at, created_at, updated_at)
            VALUES ('https://a.example/1', (SELECT id FROM hosts), '/d/1', 1, 'done', 1, 200, 50, 5, 6, 1, 6)
            """)
        try connection.run("""
            INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, status, bytes)
                SELECT id, 1, 't1', 5, 6, 200, 50 FROM jobs
            """)
        try PostgresMigrator().migrate(connection)
        let store = try PostgresJobStore(url: location)
        let id = try #require(try connection.query("SELECT id FROM jobs").first?.int(0))
        let listed = { try store.attempts(jobID: id).map(\.record) }
        #expect(try listed() == ["1 5 6 200 50"])
        #expect(try store.refetch([Refetch(jobID: id, adopt: nil, conditional: false)]) == 1)
        #expect(try listed() == ["1 5 6 200 50"])
        #expect(try connection.query("SELECT count(*) FROM attempts").first?.int(0) == 1)
    }

    /// Two refetches of one done job at once write its finished attempt's record once: the
    /// second waits for the first's lock on the job, then finds it queued and writes nothing.
    /// (The first is played by a bare connection, holding the lock until the second waits.)
    @Test func concurrentRefetchesRecordTheFinishedAttemptOnce() throws {
        let (location, connection) = try queueOfOneHost(migrations: nil)
        try connection.run("""
            INSERT INTO jobs (url, host_id, destination, destination_key, state, attempts, last_status, received_bytes,
                              attempt_started_at, finished_at, done_attempt_token, created_at, updated_at)
            VALUES ('https://a.example/1', (SELECT id FROM hosts), '/d/1', 1, 'done', 1, 200, 50, 5, 6, 't1', 1, 6)
            """)
        let id = try #require(try connection.query("SELECT id FROM jobs").first?.int(0))
        try connection.execute("BEGIN")
        _ = try connection.query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", [.int(id)])
        let second = Mutex<Result<Int, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { try PostgresJobStore(url: location).refetch([Refetch(jobID: id, adopt: nil, conditional: false)]) }
            second.withLock { $0 = result }
            done.signal()
        }
        try awaitOneWaitingOnALock(in: location, "the second refetch never waited for the first")
        // The first refetch, as the store makes it, then its commit.
        try connection.execute("""
            INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, status, bytes)
                SELECT id, attempts, done_attempt_token, attempt_started_at, finished_at, last_status, received_bytes FROM jobs;
            UPDATE jobs SET state = 'queued', attempts = 0, finished_at = NULL, done_attempt_token = NULL;
            COMMIT
            """)
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(try second.withLock { try $0?.get() } == 0, "the job was no longer done")
        #expect(try connection.query("SELECT count(*) FROM attempts").first?.int(0) == 1)
    }

    @Test func embeddedMigrationsEqualTheFiles() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Migrations/postgres")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(Migration.postgresEmbedded.map(\.name) == names)
        for (migration, name) in zip(Migration.postgresEmbedded, names) {
            #expect(Array(migration.sql.utf8) == Array(try Data(contentsOf: folder.appendingPathComponent(name))), "\(name)")
        }
    }

    @Test func twoMigratorsAtOnceApplyEachMigrationOnce() throws {
        let url = try freshDatabase()
        let migrator = PostgresMigrator(migrations: [
            Migration(version: 1, name: "0001_log.sql", sql: "CREATE TABLE log (version int NOT NULL);"),
            Migration(version: 2, name: "0002_slow.sql", sql: "SELECT pg_sleep(0.3); INSERT INTO log VALUES (2);"),
            Migration(version: 3, name: "0003_more.sql", sql: "INSERT INTO log VALUES (3);"),
        ])
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let outcomes = Mutex<[String]>([])
        for _ in 0..<2 {
            Thread {
                do {
                    let connection = try PostgresConnection(url: url)
                    ready.signal()
                    go.wait()
                    try migrator.migrate(connection)
                    outcomes.withLock { $0.append("ok") }
                } catch {
                    outcomes.withLock { $0.append("\(error)") }
                }
                finished.signal()
            }.start()
        }
        for _ in 0..<2 { #expect(ready.wait(timeout: .now() + 30) == .success) }
        go.signal()
        go.signal()
        for _ in 0..<2 { #expect(finished.wait(timeout: .now() + 60) == .success) }
        #expect(outcomes.withLock { $0 } == ["ok", "ok"])
        let connection = try PostgresConnection(url: url)
        #expect(try connection.query("SELECT version FROM log ORDER BY version").map { $0.int(0) } == [2, 3])
        #expect(try PostgresMigrator.appliedVersions(connection).map(\.version) == [1, 2, 3])
    }

    @Test func unknownMigrationIsRefusedNamingItsVersionAndFile() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try PostgresMigrator().migrate(connection)
        try connection.run("INSERT INTO schema_migrations (version, name) VALUES (99, '0099_future.sql')")
        let error = try #require(throws: PostgresError.self) { try PostgresMigrator().migrate(connection) }
        #expect(error.kind == .unknownMigration(version: 99, name: "0099_future.sql"))
        let line = error.explained(location: connection.location, busyTimeout: 5)
        #expect(line.contains("99") && line.contains("0099_future.sql") && line.contains(connection.location))
        #expect(try connection.query("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()").first?.int(0) == 0)
    }

    /// A database whose schema holds another program's table and no haul migration gets no
    /// haul table: a mistyped --db is refused, naming the database, with the lock released.
    @Test func anotherProgramsDatabaseIsRefusedUntouched() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        try connection.execute("CREATE TABLE notes (id int)")
        let error = try #require(throws: PostgresError.self) { try PostgresMigrator().migrate(connection) }
        #expect(error.kind == .notAQueue)
        let line = error.explained(location: connection.location, busyTimeout: 5)
        #expect(line.contains(connection.location) && line.contains("not a haul queue"), "\(line)")
        #expect(try connection.query("SELECT string_agg(relname, ',') FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'").first?.string(0) == "notes")
        #expect(try connection.query("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()").first?.int(0) == 0)
    }

    /// The commands that only read or change existing jobs (`status`, `list`…) open a database
    /// without a queue refusing it, with nothing made there (they made every table, so a
    /// mistyped --db got a queue); the commands that add jobs make it.
    @Test func aDatabaseWithoutAQueueIsRefusedUnlessJobsAreAdded() throws {
        let url = try freshDatabase()
        let error = try #require(throws: PostgresError.self) { try PostgresJobStore(url: url, create: false) }
        #expect(error.kind == .noQueue)
        let connection = try PostgresConnection(url: url)
        #expect(error.explained(location: connection.location, busyTimeout: 5).contains("no haul queue in the database at \(connection.location)"))
        #expect(try connection.query("SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'").first?.int(0) == 0)
        #expect(try connection.query("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()").first?.int(0) == 0)
        _ = try PostgresJobStore(url: url)
        _ = try PostgresJobStore(url: url, create: false)  // now there is one
    }

    /// A migration that fails during an upgrade leaves the versions before it (a new database:
    /// `aFailedMigrationLeavesANewDatabaseEmpty`).
    @Test func failingMigrationLeavesTheDatabaseAtAWholeVersion() throws {
        let connection = try PostgresConnection(url: freshDatabase())
        let first = Migration(version: 1, name: "0001_a.sql", sql: "CREATE TABLE a (id int);")
        try PostgresMigrator(migrations: [first]).migrate(connection)
        let migrator = PostgresMigrator(migrations: [
            first,
            Migration(version: 2, name: "0002_bad.sql", sql: "CREATE TABLE b (id int); SELECT no_such_function();"),
        ])
        let error = try #require(throws: PostgresError.self) { try migrator.migrate(connection) }
        #expect(error.sqlState == "42883")
        #expect(try PostgresMigrator.appliedVersions(connection).map(\.version) == [1])
        #expect(try connection.query("SELECT to_regclass('b') IS NULL").first?.bool(0) == true)
        #expect(try connection.query("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()").first?.int(0) == 0)
    }
}

/// A counter several threads add to.
private final class Tally: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
