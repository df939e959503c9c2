import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// One end-to-end scenario for `haul run`: a fresh temp folder holding the database (`haul.db`)
/// and the output folder (`out/`), and the built `haul` binary to run against them.
final class RunHarness {
    let temp: TempDirectory
    let haul: URL
    /// The output folder (`-d`).
    let out: String
    let db: String

    /// `database`: the queue's location when it is not `haul.db` in the temp folder (a
    /// `postgres://` URL).
    init(_ testCase: XCTestCase, database: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws {
        haul = try testCase.haulExecutable(file: file, line: line)
        temp = try testCase.makeTempDirectory(prefix: "haul-run")
        out = try temp.makeDirectory("out")
        db = database ?? temp.file("haul.db")
    }

    /// Runs `haul ARGUMENTS --db DB` to completion in the temp folder.
    @discardableResult
    func run(_ arguments: [String], timeout: TimeInterval = 30) throws -> ProcessResult {
        let result = try HaulProcess.run(haul, arguments + ["--db", db], currentDirectory: temp.path, timeout: timeout)
        XCTAssertFalse(result.timedOut, "haul \(arguments.joined(separator: " ")) ran past \(timeout) s and was killed; stderr: \(result.stderrText)")
        return result
    }

    /// Starts `haul ARGUMENTS --db DB` and returns at once; `stdin`: its standard input, written
    /// by the test (else it reads nothing).
    func start(_ arguments: [String], stdin: Pipe? = nil) throws -> RunningProcess {
        try HaulProcess.start(haul, arguments + ["--db", db], currentDirectory: temp.path, stdinPipe: stdin)
    }

    /// Queues `lines` (`URL [out=…] [sha256=…]`) into `out/`; fails the test unless all are accepted.
    func add(_ lines: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let list = try temp.write("urls-\(UUID().uuidString).txt", Data((lines.joined(separator: "\n") + "\n").utf8))
        let result = try run(["add", "-i", list, "-d", out])
        XCTAssertEqual(result.status, 0, "haul add failed: \(result.stderrText)", file: file, line: line)
    }

    /// `haul status --json`, parsed.
    func status(file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let result = try run(["status", "--json"])
        XCTAssertEqual(result.status, 0, result.stderrText, file: file, line: line)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any], file: file, line: line)
    }

    /// Jobs per state, from `haul status --json`.
    func counts(file: StaticString = #filePath, line: UInt = #line) throws -> [String: Int] {
        try XCTUnwrap(try status(file: file, line: line)["counts"] as? [String: Int], file: file, line: line)
    }

    /// `haul show ID --json`, parsed (the job, with `attempt_log`).
    func show(_ id: Int, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let result = try run(["show", String(id), "--json"])
        XCTAssertEqual(result.status, 0, result.stderrText, file: file, line: line)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any], file: file, line: line)
    }

    /// The temp file haul names for job `id` going to `destination` in this harness's (SQLite) queue.
    func tempFile(_ destination: String, job id: Int) throws -> TempFile {
        TempFile(destination: destination, jobID: id, queue: try JobQueue(path: db, mode: .mustExist).identity())
    }

    /// Every haul temp file (`.haul-*.part`) under the output folder, as paths relative to it.
    func tempFiles() -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: out) else { return [] }
        return walker.compactMap { $0 as? String }.filter {
            let name = ($0 as NSString).lastPathComponent
            return name.hasPrefix(TempFile.prefix) && name.hasSuffix(TempFile.suffix)
        }.sorted()
    }

    /// The size of the one temp file under the output folder (0 when there is none).
    func tempFileSize() -> Int {
        guard let name = tempFiles().first,
              let size = try? FileManager.default.attributesOfItem(atPath: out + "/" + name)[.size] as? NSNumber
        else { return 0 }
        return size.intValue
    }

    /// The bytes at `out/NAME`, or nil when there is no such file.
    func contents(_ name: String) -> Data? {
        FileManager.default.contents(atPath: out + "/" + name)
    }

    /// The regular files under the output folder (relative paths), temp files included.
    func outputFiles() -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: out) else { return [] }
        return walker.compactMap { $0 as? String }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: out + "/" + $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }.sorted()
    }

    /// Polls `condition` every 20 ms until it holds or `timeout` passes (for what no server
    /// event signals, such as bytes reaching a file). Returns whether it held.
    @discardableResult
    static func poll(timeout: TimeInterval, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }
}

/// Test data: `count` seeded pseudo-random bytes.
func runTestData(_ count: Int, seed: UInt64) -> Data {
    var generator = SeededGenerator(seed: seed)
    return Data(generator.bytes(count))
}

/// The sha256 of `data`, as lower-case hex.
func runTestSHA256(_ data: Data) -> String {
    var hasher = HaulCore.SHA256()
    hasher.update(data)
    return hasher.finalize()
}

/// Parses a JSON object line; nil when it is not one.
func runTestJSON(_ line: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
}

extension FaultServer.Request {
    var rangeHeader: String? { header("Range") }
    var ifRangeHeader: String? { header("If-Range") }
}
