import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul export`: one record per job, as JSON lines or CSV, every field right, credentials never
/// shown, to standard output or a file, and quiet when its reader goes away.
final class ExportTests: XCTestCase {
    private let fields = ["id", "destination", "url", "final_url", "state", "bytes", "checksum", "file_sha256", "etag",
                          "last_modified", "content_type", "last_status", "attempts", "finished_at", "kept", "last_error", "placed_by"]

    /// A queue of five jobs after one run: 1 done (through a redirect, with credentials in its
    /// URL, a sha256 given, to a destination whose name holds a comma and a quote), 2 failed (404,
    /// with credentials), 3 done by keeping the file already there, 4 done and placed beside a
    /// file already there (`--if-exists rename`), 5 queued after a 503 whose reason holds a URL
    /// with credentials (set through the queue: haul's own reasons are redacted when made).
    private struct Scenario {
        let h: RunHarness
        let server: FaultServer
        let data: Data
        let started: Int
        let ended: Int
    }

    private func makeScenario() throws -> Scenario {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        let data = runTestData(7_000, seed: 13)
        server.route("/moved", FaultServer.Response.redirect(to: "/real.bin"))
        server.route("/real.bin", FaultServer.file(data, etag: "\"e-1\"", lastModified: "Tue, 01 Dec 2026 10:00:00 GMT",
                                                   contentType: "application/x-test"))
        server.route("/missing.bin", FaultServer.Response.status(404))
        server.route("/kept.bin", FaultServer.file(data))
        server.route("/taken.bin", FaultServer.file(Data("theirs".utf8), contentType: "text/plain"))
        for name in ["kept.bin", "taken.bin"] {
            XCTAssertTrue(FileManager.default.createFile(atPath: h.out + "/" + name, contents: Data("mine\n".utf8)))
        }
        let port = server.port
        try h.add(["http://user:secret@127.0.0.1:\(port)/moved out=a,\"b\".bin sha256=\(runTestSHA256(data))",
                   "http://user:secret@127.0.0.1:\(port)/missing.bin",
                   "http://127.0.0.1:\(port)/kept.bin"])
        let renamed = try h.run(["add", "http://127.0.0.1:\(port)/taken.bin", "-d", h.out, "--if-exists", "rename"])
        XCTAssertEqual(renamed.status, 0, renamed.stderrText)
        let started = Int(Date().timeIntervalSince1970) * 1000
        let run = try h.run(["run", "--checksum", "sha256", "--quiet"])
        XCTAssertEqual(run.status, 1, "job 2 fails: \(run.stderrText)")
        let ended = Int(Date().timeIntervalSince1970 + 1) * 1000
        try h.add(["http://127.0.0.1:\(port)/later.bin"])
        let queue = try JobQueue(path: h.db, mode: .mustExist)
        let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)).first)
        XCTAssertEqual(lease.jobID, 5)
        _ = try queue.reschedule(jobID: 5, token: lease.token, at: 0, status: 503, error: "HTTP 503 via http://proxy:secret@127.0.0.1:1/")
        return Scenario(h: h, server: server, data: data, started: started, ended: ended)
    }

    /// The records as the scenario must export them, as text: a JSON value's text, or nil for
    /// null. (finished_at is checked on its own: only its range is known.)
    private func expected(_ s: Scenario) -> [[String: String?]] {
        let port = s.server.port
        let sha = runTestSHA256(s.data)
        let none: String? = nil
        let worker: String? = ProcessInfo.processInfo.hostName
        return [
            ["id": "1", "destination": s.h.out + "/a,\"b\".bin", "url": "http://***@127.0.0.1:\(port)/moved",
             "final_url": "http://***@127.0.0.1:\(port)/real.bin", "state": "done", "bytes": "7000", "checksum": "sha256=\(sha)",
             "file_sha256": sha, "etag": "\"e-1\"", "last_modified": "Tue, 01 Dec 2026 10:00:00 GMT",
             "content_type": "application/x-test", "last_status": "200", "attempts": "1", "kept": "false", "last_error": none,
             "placed_by": worker],
            ["id": "2", "destination": s.h.out + "/missing.bin", "url": "http://***@127.0.0.1:\(port)/missing.bin",
             "final_url": none, "state": "failed", "bytes": "0", "checksum": none, "file_sha256": none, "etag": none,
             "last_modified": none, "content_type": none, "last_status": "404", "attempts": "1", "kept": "false",
             "last_error": "HTTP 404 Not Found", "placed_by": none],
            // A kept file: its size, one attempt (which records the keeping), no request made.
            ["id": "3", "destination": s.h.out + "/kept.bin", "url": "http://127.0.0.1:\(port)/kept.bin", "final_url": none,
             "state": "done", "bytes": "5", "checksum": none, "file_sha256": none, "etag": none, "last_modified": none,
             "content_type": none, "last_status": none, "attempts": "1", "kept": "true", "last_error": none, "placed_by": none],
            ["id": "4", "destination": s.h.out + "/taken.1.bin", "url": "http://127.0.0.1:\(port)/taken.bin",
             "final_url": "http://127.0.0.1:\(port)/taken.bin", "state": "done", "bytes": "6", "checksum": none,
             "file_sha256": runTestSHA256(Data("theirs".utf8)), "etag": none, "last_modified": none, "content_type": "text/plain",
             "last_status": "200", "attempts": "1", "kept": "false", "last_error": none, "placed_by": worker],
            ["id": "5", "destination": s.h.out + "/later.bin", "url": "http://127.0.0.1:\(port)/later.bin", "final_url": none,
             "state": "queued", "bytes": "0", "checksum": none, "file_sha256": none, "etag": none, "last_modified": none,
             "content_type": none, "last_status": "503", "attempts": "1", "kept": "false",
             "last_error": "HTTP 503 via http://***@127.0.0.1:1/", "placed_by": none],
        ]
    }

    /// The JSON value of `key` as the text `expected` gives it (nil for null; kept must be a
    /// JSON bool, numbers whole).
    private func text(_ object: [String: Any], _ key: String) -> String? {
        guard let value = object[key], !(value is NSNull) else { return nil }
        switch value {
        case let string as String: return string
        case let value where key == "kept": return (value as? Bool).map { $0 ? "true" : "false" } ?? "not a bool: \(value)"
        case let value: return (value as? Int).map(String.init) ?? "not a whole number: \(value)"
        }
    }

    private func assertFinished(_ value: String?, _ s: Scenario, id: Int, file: StaticString = #filePath, line: UInt = #line) {
        guard id != 5 else { return XCTAssertNil(value, "a queued job has not finished", file: file, line: line) }
        let parser = ISO8601DateFormatter()
        guard let value, value.hasSuffix("Z"), value.count == 20, let date = parser.date(from: value) else {
            return XCTFail("job \(id): finished_at is not ISO 8601 UTC to the second: \(value ?? "null")", file: file, line: line)
        }
        let milliseconds = Int(date.timeIntervalSince1970 * 1000)
        XCTAssertTrue(milliseconds >= s.started && milliseconds <= s.ended, "job \(id) finished at \(value), outside the run",
                      file: file, line: line)
    }

    func testJSONLinesAndCSVGiveEveryFieldOfEveryJobWithoutCredentials() throws {
        let s = try makeScenario()
        defer { s.server.stop() }
        let expected = expected(s)

        let jsonl = try s.h.run(["export"])
        XCTAssertEqual(jsonl.status, 0, jsonl.stderrText)
        XCTAssertEqual(jsonl.stderrText, "")
        XCTAssertTrue(jsonl.stdoutText.hasSuffix("}\n"), jsonl.stdoutText)
        let objects = jsonl.stdoutLines.compactMap(runTestJSON)
        XCTAssertEqual(objects.count, jsonl.stdoutLines.count, "every line is one JSON object: \(jsonl.stdoutText)")
        XCTAssertEqual(objects.count, 5, jsonl.stdoutText)
        for (index, object) in objects.enumerated() {
            XCTAssertEqual(Set(object.keys), Set(fields), "job \(index + 1)")
            for (key, value) in expected[index] {
                XCTAssertEqual(text(object, key), value, "job \(index + 1): \(key)")
            }
            assertFinished(text(object, "finished_at"), s, id: index + 1)
        }
        // The keys come in the documented order.
        let firstLine = try XCTUnwrap(jsonl.stdoutLines.first)
        let positions = fields.map { firstLine.range(of: "\"\($0)\":")?.lowerBound }
        XCTAssertEqual(positions.compactMap { $0 }, positions.compactMap { $0 }.sorted(), firstLine)
        XCTAssertEqual(try s.h.show(1)["finished_at"] as? String, text(objects[0], "finished_at"))
        XCTAssertEqual(objects[1]["kept"] as? Bool, false, "kept is a JSON bool")
        XCTAssertEqual(objects[2]["kept"] as? Bool, true)

        let csv = try s.h.run(["export", "--format", "csv"])
        XCTAssertEqual(csv.status, 0, csv.stderrText)
        let rows = try parseCSV(csv.stdoutText)
        XCTAssertEqual(rows.first, fields, "the header row")
        XCTAssertEqual(rows.count, 6, csv.stdoutText)
        for (index, row) in rows.dropFirst().enumerated() {
            XCTAssertEqual(row.count, fields.count, "row \(index + 1): \(row)")
            let record = Dictionary(uniqueKeysWithValues: zip(fields, row))
            for (key, value) in expected[index] {
                XCTAssertEqual(record[key], value ?? "", "csv row \(index + 1): \(key)")
            }
            XCTAssertEqual(record["finished_at"], text(objects[index], "finished_at") ?? "", "csv row \(index + 1)")
        }
        // The destination with a comma and a quote, quoted with its quote doubled; rows end in CRLF.
        XCTAssertTrue(csv.stdoutText.contains(",\"\(s.h.out)/a,\"\"b\"\".bin\","), csv.stdoutText)
        XCTAssertTrue(csv.stdoutText.hasPrefix(fields.joined(separator: ",") + "\r\n"), csv.stdoutText)
        XCTAssertEqual(csv.stdoutText.components(separatedBy: "\r\n").count, 7, "six rows, each ending in CRLF")

        for (name, result) in [("jsonl", jsonl), ("csv", csv)] {
            XCTAssertFalse(result.stdoutText.contains("secret") || result.stdoutText.contains("user:"), "\(name) showed a credential")
            XCTAssertFalse(result.stderrText.contains("secret"), name)
        }
        // `export --help` names every field the header row has, in that order.
        let help = try s.h.run(["export", "--help"]).stdoutText.replacingOccurrences(of: "\n", with: " ")
        let list = try XCTUnwrap(help.range(of: "Fields, in order:").map { help[$0.upperBound...] }, help)
        let named = try XCTUnwrap(rows.first).map { list.range(of: "(?<![a-z_])\($0)(?![a-z_])", options: .regularExpression)?.lowerBound }
        XCTAssertFalse(named.contains(nil), "export --help leaves out fields: \(zip(rows.first ?? [], named).filter { $0.1 == nil }.map(\.0))")
        XCTAssertEqual(named.compactMap { $0 }, named.compactMap { $0 }.sorted(), "export --help lists the fields in another order")
    }

    func testStateFiltersAndOutputGoesToAFile() throws {
        let s = try makeScenario()
        defer { s.server.stop() }

        let failed = try s.h.run(["export", "--state", "failed"])
        XCTAssertEqual(failed.status, 0, failed.stderrText)
        XCTAssertEqual(failed.stdoutLines.compactMap(runTestJSON).compactMap { $0["id"] as? Int }, [2], failed.stdoutText)
        let done = try s.h.run(["export", "--state", "done", "--format", "csv"])
        XCTAssertEqual(try parseCSV(done.stdoutText).dropFirst().map { $0.first }, ["1", "3", "4"], done.stdoutText)
        let none = try s.h.run(["export", "--state", "cancelled", "--format", "csv"])
        XCTAssertEqual(try parseCSV(none.stdoutText), [fields], "no job: the header row alone")

        // -o FILE holds what standard output gets, made with the umask; -o - is standard output.
        let whole = try s.h.run(["export", "--format", "csv"]).stdout
        let path = s.h.temp.file("jobs.csv")
        let toFile = try s.h.run(["export", "--format", "csv", "-o", path])
        XCTAssertEqual(toFile.status, 0, toFile.stderrText)
        XCTAssertEqual(toFile.stdout, Data(), "nothing on standard output")
        XCTAssertEqual(toFile.stderrText, "")
        XCTAssertEqual(FileManager.default.contents(atPath: path), whole)
        let mask = umask(0o022)
        umask(mask)
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        XCTAssertEqual(mode, 0o666 & ~Int(mask), String(mode, radix: 8))
        // Exported again, a shorter export replaces the file.
        XCTAssertEqual(try s.h.run(["export", "--state", "failed", "--output", path]).status, 0)
        XCTAssertEqual(FileManager.default.contents(atPath: path), failed.stdout)
        XCTAssertEqual(try s.h.run(["export", "-o", "-"]).stdout, try s.h.run(["export"]).stdout)
    }

    func testMistakesExit64AndAnUnwritableFileFailsInOneLine() throws {
        let s = try makeScenario()
        defer { s.server.stop() }
        for (arguments, message) in [(["--state", "finished"], "unknown state 'finished' (expected one of: queued, running, done, failed, cancelled)"),
                                     (["--format", "xml"], "unknown format 'xml' (expected one of: jsonl, csv)"),
                                     (["extra"], "unexpected argument 'extra'")] {
            let result = try s.h.run(["export"] + arguments)
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains(message), "\(arguments): \(result.stderrText)")
            XCTAssertTrue(result.stderrText.contains("usage: haul export"), result.stderrText)
            XCTAssertEqual(result.stdout, Data())
        }

        let nowhere = s.h.temp.file("missing-folder/jobs.jsonl")
        let result = try s.h.run(["export", "-o", nowhere])
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderrLines, ["haul: cannot write \(nowhere): No such file or directory; does its folder exist?"])
        XCTAssertEqual(result.stdout, Data())
        let folder = s.h.temp.file("out")
        XCTAssertEqual(try s.h.run(["export", "-o", folder]).stderrLines,
                       ["haul: cannot write \(folder): Is a directory; name a file, not a folder"])

        // The queue itself is never emptied by -o.
        let before = FileManager.default.contents(atPath: s.h.db)
        let itself = try s.h.run(["export", "-o", s.h.db])
        XCTAssertEqual(itself.status, 1)
        XCTAssertEqual(itself.stderrLines.count, 1, itself.stderrText)
        XCTAssertTrue(itself.stderrText.contains("is the queue database"), itself.stderrText)
        XCTAssertEqual(FileManager.default.contents(atPath: s.h.db), before)
        XCTAssertEqual(try s.h.counts()["done"], 3)
    }

    /// A full disk behind the output is reported once, naming it, and is a failure.
    func testAWriteErrorIsReportedOnce() throws {
        guard FileManager.default.fileExists(atPath: "/dev/full") else { throw XCTSkip("no /dev/full") }
        let s = try makeScenario()
        defer { s.server.stop() }
        for arguments in [["-o", "/dev/full"], ["--format", "csv", "-o", "/dev/full"]] {
            let result = try s.h.run(["export"] + arguments)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertEqual(result.stderrLines, ["haul: cannot write /dev/full: No space left on device; free some space and export again"])
        }
    }

    /// `haul export | head -1`: the reader takes a line and goes; haul ends by SIGPIPE, quietly,
    /// though it had far more than a chunk still to write.
    func testAReaderThatGoesAwayEndsItQuietly() throws {
        let h = try RunHarness(self)
        try h.add((0..<4_000).map { "http://127.0.0.1:9/some/long/path/to/a/file/number-\($0).bin" })
        let output = Pipe()
        let child = try HaulProcess.start(h.haul, ["export", "--db", h.db], stdout: .pipe(output))
        var first = Data()
        while !first.contains(0x0A) {
            let piece = output.fileHandleForReading.availableData
            if piece.isEmpty { break }
            first.append(piece)
        }
        try output.fileHandleForReading.close()
        let result = child.wait(timeout: 120)

        let line = String(decoding: first.prefix { $0 != 0x0A }, as: UTF8.self)
        XCTAssertEqual(runTestJSON(line)?["id"] as? Int, 1, line)
        XCTAssertTrue(result.signal == SIGPIPE, "status \(result.status), signal \(result.signal.map(String.init) ?? "none")")
        XCTAssertEqual(result.stderrText, "", "nothing on stderr")
    }

    /// RFC 4180 rows: fields split at commas, quoted fields with doubled quotes, rows ending in
    /// CRLF (a bare LF or CR outside quotes is an error here, as is anything after a closing quote).
    private func parseCSV(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var bytes = Array(text.utf8)[...]
        struct Malformed: Error {}
        func fail(_ why: String) throws -> Never {
            XCTFail("not RFC 4180 CSV (\(why)): \(text.prefix(300))", file: file, line: line)
            throw Malformed()
        }
        var fieldBytes: [UInt8] = []
        while let byte = bytes.first {
            bytes = bytes.dropFirst()
            switch byte {
            case UInt8(ascii: "\""):
                guard fieldBytes.isEmpty else { try fail("a quote inside an unquoted field") }
                while true {
                    guard let next = bytes.first else { try fail("an unclosed quote") }
                    bytes = bytes.dropFirst()
                    if next == UInt8(ascii: "\"") {
                        if bytes.first == UInt8(ascii: "\"") { fieldBytes.append(next); bytes = bytes.dropFirst(); continue }
                        break
                    }
                    fieldBytes.append(next)
                }
                guard let after = bytes.first, after == UInt8(ascii: ",") || after == UInt8(ascii: "\r") else {
                    try fail("text after a closing quote")
                }
            case UInt8(ascii: ","):
                row.append(String(decoding: fieldBytes, as: UTF8.self))
                fieldBytes = []
            case UInt8(ascii: "\r"):
                guard bytes.first == UInt8(ascii: "\n") else { try fail("CR without LF") }
                bytes = bytes.dropFirst()
                row.append(String(decoding: fieldBytes, as: UTF8.self))
                fieldBytes = []
                rows.append(row)
                row = []
            case UInt8(ascii: "\n"):
                try fail("a bare LF")
            default:
                fieldBytes.append(byte)
            }
        }
        guard fieldBytes.isEmpty, row.isEmpty else { try fail("a last row without CRLF") }
        return rows
    }
}
