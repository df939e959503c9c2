import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// Schema migrations: fresh databases, upgrades from every earlier version, the compiled copy of
/// Migrations/, and files haul must refuse without touching.
final class MigrationTests: XCTestCase {
    /// The top-level Migrations/ folder, found from this file's place in the package.
    private var migrationsFolder: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // HaulCoreTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // package root
            .appendingPathComponent("Migrations", isDirectory: true)
    }

    private func schema(_ database: Database) throws -> [String] {
        try database.rows("""
            SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema
            WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name
            """) { $0.string(0) }
    }

    // MARK: - The compiled copy

    func testEmbeddedMigrationsEqualTheFilesByteForByte() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: migrationsFolder.path)
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        XCTAssertFalse(names.isEmpty, "no .sql files in \(migrationsFolder.path)")
        XCTAssertEqual(Migration.embedded.map(\.name), names, "the binary must carry exactly the files of Migrations/, in order")
        for (migration, name) in zip(Migration.embedded, names) {
            let file = try Data(contentsOf: migrationsFolder.appendingPathComponent(name))
            XCTAssertEqual(Array(migration.sql.utf8), Array(file), "\(name): compiled SQL differs from the file")
            XCTAssertEqual(migration.version, Int(name.prefix { $0.isNumber }), "\(name): version is not the file's number")
        }
    }

    func testMigrationVersionsAreUniqueAndConsecutiveFromOne() {
        let versions = Migration.embedded.map(\.version)
        XCTAssertEqual(versions, Array(1...(versions.max() ?? 0)), "migrations are numbered 1, 2, 3… in order, with no gap")
    }

    // MARK: - Applying

    func testEmptyDatabaseGetsEveryMigration() throws {
        let directory = try makeTempDirectory()
        let database = try Database(path: directory.file("haul.db"))
        let applied = try Migrator.appliedVersions(database)
        XCTAssertEqual(applied.map(\.version), Migration.embedded.map(\.version))
        XCTAssertEqual(applied.map(\.name), Migration.embedded.map(\.name))
        for table in ["jobs", "hosts", "attempts", "job_totals", "schema_migrations"] {
            XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", [table]), 1,
                           "table \(table) missing")
        }
        XCTAssertEqual(try database.rows("SELECT state FROM job_totals ORDER BY state") { $0.string(0) },
                       ["cancelled", "done", "failed", "queued", "running"])
        XCTAssertEqual(try database.scalarInt("SELECT sum(jobs) + sum(expected_bytes) + sum(received_bytes) + sum(unknown_size) FROM job_totals"), 0)
        XCTAssertEqual(try database.rows("PRAGMA journal_mode") { $0.string(0) }, ["wal"])
        XCTAssertEqual(try QueueInvariants.integrityCheck(database), ["ok"])
    }

    func testOpeningTwiceAppliesNothingTheSecondTime() throws {
        let directory = try makeTempDirectory()
        let path = directory.file("haul.db")
        let firstTimes: [Int]
        do {
            let database = try Database(path: path)
            firstTimes = try database.rows("SELECT applied_at FROM schema_migrations ORDER BY version") { $0.int(0) }
        }
        let database = try Database(path: path)
        XCTAssertEqual(try database.rows("SELECT applied_at FROM schema_migrations ORDER BY version") { $0.int(0) }, firstTimes)
        XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM job_totals"), 5, "migration 2's rows inserted twice")
    }

    /// A database at every earlier version, holding jobs in every state, is upgraded to the same
    /// schema as a new one, with counters that match its rows.
    func testUpgradeFromEveryEarlierVersionKeepsRowsAndFillsCounters() throws {
        let directory = try makeTempDirectory()
        let fresh = try Database(path: directory.file("fresh.db"))
        let freshSchema = try schema(fresh)
        XCTAssertGreaterThan(Migration.embedded.count, 1, "nothing to upgrade from")
        for applied in 1..<Migration.embedded.count {
            let path = directory.file("v\(applied).db")
            do {
                let old = try Database(path: path, migrations: Array(Migration.embedded.prefix(applied)))
                let oldVersions = Migration.embedded.prefix(applied).map(\.version)
                XCTAssertEqual(try Migrator.appliedVersions(old).map(\.version), oldVersions)
                // Rows written the way a haul of that version would: plain SQL, no counters.
                try old.execute("""
                    INSERT INTO hosts (id, host) VALUES (1, 'a.example:443'), (2, 'b.example:80'), (3, 'c.example:443');
                    INSERT INTO jobs (url, host_id, destination, destination_key, state, expected_bytes, received_bytes, created_at, updated_at) VALUES
                        ('https://a.example/1', 1, '/d/1', 1, 'queued',    NULL,  0,   1, 1),
                        ('https://a.example/2', 1, '/d/2', 2, 'queued',    100,   10,  1, 1),
                        ('https://a.example/3', 1, '/d/3', 3, 'running',   200,   50,  1, 1),
                        ('https://a.example/4', 1, '/d/4', 4, 'done',      300,   300, 1, 1),
                        ('http://b.example/5',  2, '/d/5', 5, 'queued',    NULL,  0,   1, 1),
                        ('http://b.example/6',  2, '/d/6', 6, 'failed',    NULL,  7,   1, 1),
                        ('http://b.example/7',  2, '/d/7', 7, 'cancelled', 1000,  5,   1, 1),
                        ('http://b.example/8',  2, '/d/8', 8, 'done',      400,   400, 1, 1);
                    """)
                // The running job's attempt is open: before 0016, a record without an end; from
                // 0016 on, on the job's row.
                try old.execute(applied >= 16 ? """
                    UPDATE jobs SET attempts = 1, lease_token = 't3', attempt_started_at = 5, attempt_start_bytes = 50
                        WHERE url = 'https://a.example/3';
                    """ : """
                    UPDATE jobs SET attempts = 1, lease_token = 't3' WHERE url = 'https://a.example/3';
                    INSERT INTO attempts (job_id, number, lease_token, started_at, bytes)
                        SELECT id, 1, 't3', 5, 50 FROM jobs WHERE url = 'https://a.example/3';
                    """)
                // A done job finished before 0017: its attempt's record is in attempts.
                try old.execute("""
                    UPDATE jobs SET attempts = 1, last_status = 200, finished_at = 8 WHERE url = 'https://a.example/4';
                    INSERT INTO attempts (job_id, number, lease_token, started_at, finished_at, status, bytes)
                        SELECT id, 1, 't4', 7, 8, 200, 300 FROM jobs WHERE url = 'https://a.example/4';
                    """)
                // Before 0006 the one checksum was a sha256, in its own column, as bare hex.
                let checksumColumn = oldVersions.contains(6) ? "checksum" : "sha256"
                let checksumValue = oldVersions.contains(6) ? "sha256=" + Self.sha256 : Self.sha256
                try old.run("UPDATE jobs SET \(checksumColumn) = ? WHERE url IN ('https://a.example/1', 'http://b.example/6')", checksumValue)
                if applied >= 2 {
                    // From version 2 on, haul's own add keeps the counters of inserted rows.
                    try old.execute("""
                        UPDATE job_totals SET
                            jobs           = (SELECT count(*) FROM jobs WHERE jobs.state = job_totals.state),
                            expected_bytes = (SELECT coalesce(sum(expected_bytes), 0) FROM jobs WHERE jobs.state = job_totals.state),
                            received_bytes = (SELECT coalesce(sum(received_bytes), 0) FROM jobs WHERE jobs.state = job_totals.state),
                            unknown_size   = (SELECT count(*) FROM jobs WHERE jobs.state = job_totals.state AND expected_bytes IS NULL);
                        UPDATE hosts SET queued = (SELECT count(*) FROM jobs WHERE jobs.host_id = hosts.id AND jobs.state = 'queued');
                        """)
                }
                if applied >= 12 {
                    // From version 12 on, running jobs are not counted in job_totals.
                    try old.execute("UPDATE job_totals SET jobs = 0, expected_bytes = 0, received_bytes = 0, unknown_size = 0 WHERE state = 'running'")
                }
                if applied >= 13 {
                    // From version 13 on, haul's own add records the jobs' folders.
                    try old.execute("INSERT INTO job_folders (folder) VALUES ('/d/')")
                }
            }
            let database = try Database(path: path)
            XCTAssertEqual(try Migrator.appliedVersions(database).map(\.version), Migration.embedded.map(\.version), "from v\(applied)")
            XCTAssertEqual(try schema(database), freshSchema, "schema upgraded from v\(applied) differs from a new database's")
            let totals = try database.rows(
                "SELECT state, jobs, expected_bytes, received_bytes, unknown_size FROM job_totals ORDER BY state") {
                "\($0.string(0)) \($0.int(1)) \($0.int(2)) \($0.int(3)) \($0.int(4))"
            }
            XCTAssertEqual(totals, [
                "cancelled 1 1000 5 0",
                "done 2 700 700 0",
                "failed 1 0 7 1",
                "queued 3 100 10 2",
                "running 0 0 0 0",
            ], "from v\(applied): running jobs are counted from the jobs table, not here")
            XCTAssertEqual(try database.rows("SELECT host, queued FROM hosts ORDER BY id") { "\($0.string(0)) \($0.int(1))" },
                           ["a.example:443 2", "b.example:80 1", "c.example:443 0"], "from v\(applied)")
            try assertCountersConsistent(database)
            // The folders of jobs added before 0013 are recorded, for the sweep of orphaned temp files.
            XCTAssertEqual(try JobQueue(database: database).jobFolders(), ["/d"], "from v\(applied)")
            // A queue that held jobs when 0014 ran keeps the temp file names it had (identity 0).
            if applied < 14 { XCTAssertEqual(try JobQueue(database: database).identity(), 0, "from v\(applied)") }
            // A sha256 stored before 0006 is still the job's checksum.
            let checksums = try database.rows("SELECT url, checksum FROM jobs WHERE checksum IS NOT NULL ORDER BY id") {
                "\($0.string(0)) \($0.string(1))"
            }
            XCTAssertEqual(checksums, ["https://a.example/1 sha256=\(Self.sha256)", "http://b.example/6 sha256=\(Self.sha256)"], "from v\(applied)")
            // The open attempt moved onto its job's row (0016), and is still listed as open.
            let queue = JobQueue(database: database)
            let running = try XCTUnwrap(try queue.jobs(url: "https://a.example/3").first)
            let open = try queue.attempts(jobID: running.id)
            XCTAssertEqual(open.map(\.openRecord),
                           ["1 5 open 50"], "from v\(applied)")
            XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM attempts WHERE finished_at IS NULL"), 0, "from v\(applied)")
            // The upgraded database works as a queue, and keeps its counters.
            let leases = try queue.claim(ClaimRequest(limit: 10, perHostCap: 10))
            XCTAssertEqual(Set(leases.map(\.job.url)), ["https://a.example/1", "https://a.example/2", "http://b.example/5"])
            let claimed = try XCTUnwrap(leases.first { $0.job.url == "https://a.example/1" }?.job.checksum, "from v\(applied)")
            XCTAssertEqual(Checksum(stored: claimed), Checksum(.sha256, hex: Self.sha256), "from v\(applied)")
            try assertCountersConsistent(database)
            try assertStateCheckIsComparisons(database, "upgraded from v\(applied)")
            XCTAssertEqual(try queue.status().counts[.running], 4)
            XCTAssertEqual(try QueueInvariants.integrityCheck(database), ["ok"])
            // The done job's record, written before 0017, is listed once, before a refetch and after.
            let done = try XCTUnwrap(try queue.jobs(url: "https://a.example/4").first)
            let record = { try queue.attempts(jobID: done.id).map(\.record) }
            XCTAssertEqual(try record(), ["1 7 8 200 300"], "from v\(applied)")
            XCTAssertEqual(try queue.refetch([Refetch(jobID: done.id, adopt: nil, conditional: false)]), 1)
            XCTAssertEqual(try record(), ["1 7 8 200 300"], "from v\(applied)")
        }
    }

    /// A queue made before queues had an identity keeps 0 when it holds jobs, so its temp files
    /// keep their names (and partial downloads resume after the upgrade); an empty one gets a
    /// random identity.
    func testUpgradedQueueWithJobsKeepsTheTempFileNamesItHad() throws {
        let directory = try makeTempDirectory()
        let withJobs = directory.file("jobs.db")
        try makeOldQueue(at: withJobs, before: "0014", migrations: 13) { _ in }
        XCTAssertEqual(try JobQueue(path: withJobs).identity(), 0)
        let empty = directory.file("empty.db")
        _ = try Database(path: empty, migrations: Array(Migration.embedded.prefix { $0.name < "0014" }))
        XCTAssertNotEqual(try JobQueue(path: empty).identity(), 0)
    }

    /// A queue at `path` with the migrations named before `version` (`migrations` of them) and
    /// one queued job, 1 (https://a.example/x, host 1), inserted by hand; `more` adds to it.
    private func makeOldQueue(at path: String, before version: String, migrations: Int, _ more: (Database) throws -> Void) throws {
        let before = Array(Migration.embedded.prefix { $0.name < version })
        XCTAssertEqual(before.count, migrations)
        let old = try Database(path: path, migrations: before)
        try old.execute("INSERT INTO hosts (id, host) VALUES (1, 'a.example:443')")
        try old.execute("""
            INSERT INTO jobs (id, url, host_id, destination, destination_key, created_at, updated_at)
            VALUES (1, 'https://a.example/x', 1, '/d/x', 1, 1, 1)
            """)
        try more(old)
    }

    /// A job queued before 0018 (claims) may have been tried already: its next claim is not a
    /// first try, so it looks for an earlier attempt's temp file. A job added after is one.
    func testJobsQueuedBeforeClaimsWereCountedAreNotFirstTries() throws {
        let directory = try makeTempDirectory()
        let path = directory.file("jobs.db")
        try makeOldQueue(at: path, before: "0018", migrations: 17) { old in
            // The queue keeps its counts itself since 0015: the host's and the state's, by hand.
            try old.execute("UPDATE hosts SET queued = 1")
            try old.execute("UPDATE job_totals SET jobs = jobs + 1, unknown_size = unknown_size + 1 WHERE state = 'queued'")
        }
        let queue = try JobQueue(path: path)
        let old = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 4)).first)
        XCTAssertEqual(old.jobID, 1)
        XCTAssertFalse(old.firstTry)
        let added = try XCTUnwrap(try add(["https://a.example/y"], to: queue, in: directory.path).first?.jobID)
        let new = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 4)).first)
        XCTAssertEqual(new.jobID, added)
        XCTAssertTrue(new.firstTry)
    }

    /// An older haul on the same queue claims without counting claims, but sets
    /// attempt_started_at: the next claim of such a job is not a first try, and counts both.
    func testAClaimByAnOlderHaulIsCountedByTheNext() throws {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(path: directory.file("jobs.db"))
        let ids = try add(["https://a.example/1", "https://a.example/2"], to: queue, in: directory.path).compactMap(\.jobID)
        // The older haul's claim of the first, handed back uncounted (its columns as it left them).
        try queue.database.execute("UPDATE jobs SET attempt_started_at = 5, attempt_start_bytes = 0 WHERE id = \(ids[0])")
        let leases = try queue.claim(ClaimRequest(limit: 2, perHostCap: 4)).sorted { $0.jobID < $1.jobID }
        XCTAssertEqual(leases.map(\.jobID), ids)
        XCTAssertEqual(leases.map(\.firstTry), [false, true])
        XCTAssertEqual(try queue.database.rows("SELECT claims FROM jobs ORDER BY id") { $0.int(0) }, [2, 1])
    }

    func testStateCheckHoldsWithoutATemporaryTable() throws {
        let directory = try makeTempDirectory()
        // The connection that ran the migrations, and one opened afterwards.
        try assertStateCheckIsComparisons(try Database(path: directory.file("haul.db")), "the migrating connection")
        try assertStateCheckIsComparisons(try Database(path: directory.file("haul.db")), "a later connection")
        // A connection open at version 10 while another process migrates reads the new
        // definition on its next statement.
        let path = directory.file("shared.db")
        let before = try Database(path: path, migrations: Array(Migration.embedded.prefix(10)))
        XCTAssertTrue(try before.rows("EXPLAIN UPDATE jobs SET state = 'running' WHERE id = 2") { $0.string(1) }.contains("OpenEphemeral"),
                      "version 10 codes the check as a temporary table (else this test shows nothing)")
        _ = try Database(path: path)
        // Its next statement that reads the database finds the schema changed and reloads it
        // (EXPLAIN alone reads nothing).
        XCTAssertEqual(try before.scalarInt("SELECT count(*) FROM jobs"), 0)
        try assertStateCheckIsComparisons(before, "a connection open during the migration")
    }

    /// Asserts that jobs.state's CHECK still refuses an unknown state, and that a statement
    /// setting the state builds no temporary b-tree for it (SQLite codes `IN` lists of more than
    /// two values that way, anew on every run; migration 0011).
    private func assertStateCheckIsComparisons(_ database: Database, _ label: String,
                                               file: StaticString = #filePath, line: UInt = #line) throws {
        let program = try database.rows("EXPLAIN UPDATE jobs SET state = 'running' WHERE id = 1") { $0.string(1) }
        XCTAssertFalse(program.isEmpty, label, file: file, line: line)
        XCTAssertFalse(program.contains("OpenEphemeral"), "\(label): setting jobs.state builds a temporary table", file: file, line: line)
        // In a transaction rolled back at the end: the row is never counted, so it leaves no trace.
        try database.execute("BEGIN IMMEDIATE")
        defer { try? database.execute("ROLLBACK") }
        do {
            try database.execute("""
                INSERT INTO jobs (id, url, host_id, destination, destination_key, created_at, updated_at)
                VALUES (999999, 'https://check.example/x', 1, '/d/check', 999999, 1, 1)
                """)
            XCTAssertThrowsError(try database.execute("UPDATE jobs SET state = 'paused' WHERE id = 999999"), label, file: file, line: line) { error in
                XCTAssertTrue(String(describing: error).contains("CHECK"), "\(label): \(error)", file: file, line: line)
            }
            try database.execute("UPDATE jobs SET state = 'cancelled' WHERE id = 999999")
        }
    }

    /// The sha256 of "abc", as a database of any version holds it for a job.
    private static let sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

    // MARK: - Files haul must refuse, untouched

    /// Asserts that opening `path` throws `expected` and leaves the file's bytes and the folder's
    /// listing exactly as they were.
    private func assertRefusedUntouched(_ path: String, in directory: TempDirectory, expected: DatabaseError,
                                        mode: Database.OpenMode = .createIfMissing,
                                        file: StaticString = #filePath, line: UInt = #line) {
        let before = contentsOf(path)
        let listing = directory.contents()
        XCTAssertThrowsError(try Database(path: path, mode: mode), file: file, line: line) { error in
            XCTAssertEqual(error as? DatabaseError, expected, "got \(error)", file: file, line: line)
            XCTAssertTrue(String(describing: error).contains("untouched"), "\(error)", file: file, line: line)
        }
        XCTAssertEqual(contentsOf(path), before, "the file was changed", file: file, line: line)
        XCTAssertEqual(directory.contents(), listing, "files appeared or vanished next to the database", file: file, line: line)
    }

    func testUnknownMigrationIsRefusedAndTheFileLeftUntouched() throws {
        let directory = try makeTempDirectory()
        let path = directory.file("newer.db")
        do {
            let database = try Database(path: path)
            try database.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 1)")
            try database.execute("CREATE TABLE future_things (x INTEGER)")
        }
        assertRefusedUntouched(path, in: directory,
                               expected: .unknownMigration(path: path, version: 999, name: "0999_future.sql"))
        // Also for a read-only command, and a second time (nothing was "repaired" by the first try).
        assertRefusedUntouched(path, in: directory,
                               expected: .unknownMigration(path: path, version: 999, name: "0999_future.sql"), mode: .mustExist)
    }

    /// A newer haul's database that is not (or no longer) in WAL mode — e.g. converted by the
    /// sqlite3 shell — is refused before its journal mode is switched.
    func testUnknownMigrationInARollbackJournalDatabaseIsLeftUntouched() throws {
        let directory = try makeTempDirectory()
        let path = directory.file("newer.db")
        do {
            let database = try Database(path: path)
            try database.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 1)")
            try database.execute("PRAGMA journal_mode = DELETE")
        }
        assertRefusedUntouched(path, in: directory,
                               expected: .unknownMigration(path: path, version: 999, name: "0999_future.sql"))
    }

    func testRandomBytesAreNotADatabaseAndLeftUntouched() throws {
        let directory = try makeTempDirectory()
        var random = SeededGenerator(seed: 0x5EED)
        for size in [1, 2, 100, 4096, 100_000] {
            let path = try directory.write("random-\(size).db", Data(random.bytes(size)))
            assertRefusedUntouched(path, in: directory, expected: .notADatabase(path: path))
        }
    }

    func testTextFileIsNotADatabaseAndLeftUntouched() throws {
        let directory = try makeTempDirectory()
        let text = String(repeating: "https://example.org/file.iso\n", count: 500)
        let path = try directory.write("urls.txt", Data(text.utf8))
        assertRefusedUntouched(path, in: directory, expected: .notADatabase(path: path))
        assertRefusedUntouched(path, in: directory, expected: .notADatabase(path: path), mode: .mustExist)
        // `echo > haul.db` leaves one newline: SQLite itself would take a 1-byte file for an
        // empty database and overwrite it.
        let newline = try directory.write("newline.db", Data("\n".utf8))
        assertRefusedUntouched(newline, in: directory, expected: .notADatabase(path: newline))
    }

    func testTruncatedDatabaseIsAClearErrorAndLeftUntouched() throws {
        let directory = try makeTempDirectory()
        let original = directory.file("full.db")
        do {
            let queue = try JobQueue(path: original)
            let resolver = DestinationResolver(directory: directory.path)
            let lines = try (0..<3000).map { try line("https://example.org/some/longer/path/file-\($0).bin", in: resolver) }
            _ = try queue.add(lines)
        }
        let full = try XCTUnwrap(contentsOf(original))
        XCTAssertGreaterThan(full.count, 4 * 16384, "the database should span several pages")
        for keep in [50, 100, 16384, full.count / 2, full.count - 16384] {
            let path = try directory.write("truncated-\(keep).db", full.prefix(keep))
            let before = contentsOf(path)
            XCTAssertThrowsError(try Database(path: path, mode: .mustExist), "kept \(keep) bytes") { error in
                XCTAssertEqual(error as? DatabaseError, .notADatabase(path: path), "kept \(keep) bytes: \(error)")
                XCTAssertTrue(String(describing: error).contains("damaged"), "\(error)")
            }
            XCTAssertEqual(contentsOf(path), before, "kept \(keep) bytes: file changed")
        }
    }

    func testMissingFileWithMustExistIsAnErrorAndNothingIsCreated() throws {
        let directory = try makeTempDirectory()
        let path = directory.file("absent.db")
        XCTAssertThrowsError(try Database(path: path, mode: .mustExist)) { error in
            XCTAssertEqual(error as? DatabaseError, .missing(path: path))
        }
        XCTAssertEqual(directory.contents(), [])
    }
}
