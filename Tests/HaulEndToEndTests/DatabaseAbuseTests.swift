import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// Databases haul cannot use, through the binary: not SQLite, cut short, read-only (the file, or
/// its folder), locked by another writer past the busy timeout. Every command — `run` and `get`
/// included — must say so in one line naming the file and what to do, exit 1, and leave the
/// file as it was. (A text file and a newer haul's database are covered by CLITests; the same
/// files opened in-process by MigrationTests.)
final class DatabaseAbuseTests: XCTestCase {
    /// Every command that opens the database, for a queue whose job 1 exists.
    private func everyCommand(_ db: String, out: String) -> [[String]] {
        [
            ["add", "--db", db, "-d", out, "http://127.0.0.1:9/new"],
            ["run", "--db", db, "--stall", "2"],
            ["get", "--db", db, "-d", out, "http://127.0.0.1:9/new"],
            ["get", "--db", db],
            ["status", "--db", db],
            ["list", "--db", db, "--json"],
            ["show", "--db", db, "1"],
            ["retry", "--db", db, "--failed"],
            ["cancel", "--db", db, "1"],
        ]
    }

    /// A valid queue of `count` jobs at `path`, checkpointed into the one file (no -wal).
    private func makeQueue(_ path: String, count: Int, in directory: TempDirectory) throws {
        let list = try directory.write("urls-\(count).txt", Data((0..<count).map {
            "https://example.org/some/longer/path/to/a/file-\($0).bin"
        }.joined(separator: "\n").utf8))
        let added = try haul(["add", "--db", path, "-d", directory.path, "-i", list], in: directory.path)
        XCTAssertEqual(added.status, 0, added.stderrText)
        try FileManager.default.removeItem(atPath: list)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-wal"), "haul add left a -wal file")
    }

    func testRandomBytesAndTruncatedDatabasesAreRefusedByEveryCommandUntouched() throws {
        let directory = try makeTempDirectory()
        let out = try directory.makeDirectory("out")
        var random = SeededGenerator(seed: 0xAB05E)
        let full = directory.file("full.db")
        try makeQueue(full, count: 3000, in: directory)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: full))
        XCTAssertGreaterThan(bytes.count, 8 * 16384, "the queue should span many pages")
        try FileManager.default.removeItem(atPath: full)
        let files: [(String, Data, String)] = [
            ("random.db", Data(random.bytes(4096)), "is not a SQLite database"),
            ("random-header.db", Data("SQLite format 3\0".utf8) + Data(random.bytes(40_000)), "damaged"),
            ("half.db", bytes.prefix(bytes.count / 2), "damaged"),
            ("short.db", bytes.prefix(bytes.count - 16384), "damaged"),
        ]
        for (name, content, phrase) in files {
            let path = try directory.write(name, content)
            for arguments in everyCommand(path, out: out) {
                let result = try haul(arguments, in: directory.path, timeout: 20)
                assertOneLineFailure(result, naming: path, [phrase], "\(arguments[0]) on \(name)")
                XCTAssertEqual(FileManager.default.contents(atPath: path), content, "\(arguments) changed \(name)")
            }
        }
        XCTAssertEqual(directory.contents(), ["half.db", "out", "random-header.db", "random.db", "short.db"],
                       "a command left files beside the databases")
        XCTAssertEqual(names(in: out), [], "a command on a broken database wrote to the output folder")
    }

    /// Another program's SQLite database (a mistyped --db) gets no haul table from any command,
    /// `add` and `get` included; an empty file is a queue only to the commands that add jobs:
    /// the others say there is no haul database and leave it empty.
    func testAnotherProgramsDatabaseAndAnEmptyFileAreNotMadeQueues() throws {
        let directory = try makeTempDirectory()
        let out = try directory.makeDirectory("out")
        let other = directory.file("other.db")
        do {
            let database = try Database(path: other, migrations: [])
            try database.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine')")
        }
        XCTAssertEqual(unlink(other + "-wal") == 0 || errno == ENOENT, true)
        let content = try XCTUnwrap(FileManager.default.contents(atPath: other))
        for arguments in everyCommand(other, out: out) {
            let result = try haul(arguments, in: directory.path, timeout: 20)
            assertOneLineFailure(result, naming: other, ["another program", "not a haul queue", "--db"], "\(arguments[0]) on other.db")
            XCTAssertEqual(FileManager.default.contents(atPath: other), content, "\(arguments) changed another program's database")
        }
        let empty = try directory.write("empty.db", Data())
        for arguments in everyCommand(empty, out: out) where !["add", "get"].contains(arguments[0]) {
            let result = try haul(arguments, in: directory.path, timeout: 20)
            assertOneLineFailure(result, naming: empty, ["no haul database", "haul add"], "\(arguments[0]) on empty.db")
            XCTAssertEqual(FileManager.default.contents(atPath: empty), Data(), "\(arguments) wrote to an empty file")
        }
        let added = try haul(["add", "--db", empty, "-d", out, "http://127.0.0.1:9/new"], in: directory.path)
        XCTAssertEqual(added.status, 0, "add makes a queue of an empty file: \(added.stderrText)")
        XCTAssertEqual(try haul(["show", "--db", empty, "1"], in: directory.path).status, 0)
        XCTAssertEqual(names(in: out), [], "a command wrote to the output folder")
    }

    func testReadOnlyDatabaseFileAndFolderAreRefusedUntouched() throws {
        let directory = try makeTempDirectory()
        let out = try directory.makeDirectory("out")
        let folder = try directory.makeDirectory("queue")
        let db = folder + "/q.db"
        try makeQueue(db, count: 3, in: directory)
        let content = try XCTUnwrap(FileManager.default.contents(atPath: db))
        let haulBinary = try haulExecutable()
        defer {
            chmod(folder, 0o755)
            chmod(db, 0o600)
        }

        for (fileMode, folderMode) in [(0o444, 0o755), (0o600, 0o555)] as [(mode_t, mode_t)] {
            XCTAssertEqual(chmod(db, fileMode), 0)
            XCTAssertEqual(chmod(folder, folderMode), 0)
            let label = "file \(String(fileMode, radix: 8)), folder \(String(folderMode, radix: 8))"
            let probe = fileMode == 0o444 ? db : folder
            for arguments in everyCommand(db, out: out) {
                let result = try run(try Restricted.withoutOverride(haulBinary, arguments, probe: probe), in: directory.path)
                assertOneLineFailure(result, naming: db, ["read-only", "fix its permissions"], "\(arguments[0]), \(label)")
                XCTAssertEqual(FileManager.default.contents(atPath: db), content, "\(arguments) changed the database, \(label)")
                XCTAssertEqual(names(in: folder), ["q.db"], "\(arguments) left files beside the database, \(label)")
            }
        }
        XCTAssertEqual(names(in: out), [])
        chmod(folder, 0o755)
        chmod(db, 0o600)
        try assertDatabaseSound(db)
    }

    /// A database on a read-only file system (EROFS: not even root may write): the same clear
    /// refusal from every command, the file untouched.
    func testDatabaseOnAReadOnlyFileSystemIsRefusedUntouched() throws {
        let directory = try makeTempDirectory()
        let out = try directory.makeDirectory("out")
        let disk = try SmallDisk.mount(at: try directory.makeDirectory("ro"), bytes: 1 << 20)
        defer { disk.unmount(); withExtendedLifetime(directory) {} }
        let db = disk.path + "/q.db"
        try makeQueue(db, count: 3, in: directory)
        let content = try XCTUnwrap(FileManager.default.contents(atPath: db))
        try disk.remount(readOnly: true)

        for arguments in everyCommand(db, out: out) {
            let result = try haul(arguments, in: directory.path)
            assertOneLineFailure(result, naming: db, ["read-only", "fix its permissions"], arguments[0])
            XCTAssertEqual(FileManager.default.contents(atPath: db), content, "\(arguments) changed the database")
        }
        XCTAssertEqual(names(in: disk.path), ["q.db"])
        XCTAssertEqual(names(in: out), [])
        try disk.remount(readOnly: false)
        try assertDatabaseSound(db)
    }

    /// Another process holds the write lock longer than the busy timeout (made short with
    /// HAUL_BUSY_TIMEOUT): every command that writes waits that long, then says the file is
    /// locked and to try again; the other writer's transaction and the queue are unharmed.
    func testDatabaseLockedPastTheBusyTimeoutIsAClearErrorWithoutDamage() throws {
        let directory = try makeTempDirectory()
        let out = try directory.makeDirectory("out")
        let db = directory.file("q.db")
        try makeQueue(db, count: 3, in: directory)
        let writer = try Database(path: db, mode: .mustExist)
        try writer.execute("BEGIN IMMEDIATE")
        try writer.execute("UPDATE jobs SET max_attempts = 7 WHERE id = 2")

        let writing: [[String]] = [
            ["add", "--db", db, "-d", out, "http://127.0.0.1:9/new"],
            ["run", "--db", db],
            ["get", "--db", db, "-d", out, "http://127.0.0.1:9/new"],
            ["retry", "--db", db, "--failed"],
            ["cancel", "--db", db, "1"],
        ]
        for arguments in writing {
            let result = try haul(arguments, in: directory.path, environment: ["HAUL_BUSY_TIMEOUT": "0.5"], timeout: 20)
            assertOneLineFailure(result, naming: db, ["locked by another process", "try again"], arguments[0])
            XCTAssertGreaterThanOrEqual(result.seconds, 0.5, "\(arguments[0]) did not wait for the lock")
            XCTAssertLessThan(result.seconds, 5, "\(arguments[0]) ignored HAUL_BUSY_TIMEOUT (the default is 10 s)")
        }
        // Readers are not held up, and see the queue as it was.
        let status = try haul(["status", "--db", db, "--json"], in: directory.path, environment: ["HAUL_BUSY_TIMEOUT": "0.5"])
        XCTAssertEqual(status.status, 0, status.stderrText)
        XCTAssertEqual(try json(status.stdoutText, as: [String: Any].self)["total"] as? Int, 3)

        try writer.execute("COMMIT")
        XCTAssertEqual(try writer.scalarInt("SELECT max_attempts FROM jobs WHERE id = 2"), 7, "the other writer's change was lost")
        XCTAssertEqual(try writer.scalarInt("SELECT count(*) FROM jobs WHERE state = 'queued'"), 3)
        XCTAssertEqual(names(in: out), [])
        try assertDatabaseSound(db)
        let added = try haul(["add", "--db", db, "-d", out, "http://127.0.0.1:9/new"], in: directory.path)
        XCTAssertEqual(added.status, 0, "once the lock is gone, add works: \(added.stderrText)")
    }

    func testABadBusyTimeoutIsAClearError() throws {
        let directory = try makeTempDirectory()
        for value in ["soon", "-1", "nan", "1e9"] {
            let result = try haul(["status", "--db", directory.file("q.db")], in: directory.path,
                                  environment: ["HAUL_BUSY_TIMEOUT": value])
            XCTAssertEqual(result.status, 1, "\(value): \(result.stderrText)")
            XCTAssertEqual(result.stderrLines.count, 1, result.stderrText)
            XCTAssertTrue(result.stderrText.contains("HAUL_BUSY_TIMEOUT") && result.stderrText.contains("'\(value)'"), result.stderrText)
        }
        XCTAssertEqual(directory.contents(), [])
    }
}
