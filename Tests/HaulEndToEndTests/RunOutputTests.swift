import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// What `haul run` prints: JSON lines with --json, one line per finished job otherwise, and never
/// the credentials of a URL.
final class RunOutputTests: XCTestCase {
    private static let secret = "s3cr3t-Pa55"

    func testJSONLinesEndWithSummaryAndHideCredentials() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(20_000, seed: 41)
        let private_ = runTestData(7_000, seed: 42)
        server.route("/ok.bin", FaultServer.file(data, etag: "\"o\""))
        server.route("/private.bin", FaultServer.file(private_, etag: "\"p\""))
        server.route("/flaky.bin", sequence: [FaultServer.Response.status(500).handler, FaultServer.file(data)])
        server.route("/sneaky", FaultServer.Response.redirect(to: "file://admin:\(Self.secret)@localhost/etc/passwd"))
        let withCredentials = "http://user:\(Self.secret)@127.0.0.1:\(server.port)"
        try h.add([
            server.url("/ok.bin").absoluteString,
            "\(withCredentials)/private.bin",
            server.url("/flaky.bin").absoluteString,
            server.url("/gone.bin").absoluteString,
            "\(withCredentials)/sneaky out=sneaky",
            "\(withCredentials)/missing.bin",
        ])

        let result = try h.run(["run", "--json", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("private.bin"), private_, "the URL with credentials is still downloaded")
        XCTAssertEqual(h.contents("ok.bin"), data)
        XCTAssertEqual(h.contents("flaky.bin"), data)
        let lines = result.stdoutLines
        let events = lines.map { line -> [String: Any] in
            guard let object = runTestJSON(line) else { XCTFail("not a JSON object: \(line)"); return [:] }
            return object
        }
        XCTAssertEqual(events.last?["event"] as? String, "summary", "the last line is the summary")
        XCTAssertEqual(events.filter { $0["event"] as? String == "summary" }.count, 1)
        let summary = events.last ?? [:]
        XCTAssertEqual(summary["done"] as? Int, 3)
        XCTAssertEqual(summary["failed"] as? Int, 3)
        XCTAssertEqual(events.filter { $0["event"] as? String == "done" }.count, 3)
        XCTAssertEqual(events.filter { $0["event"] as? String == "failed" }.count, 3)
        XCTAssertEqual(events.filter { $0["event"] as? String == "retry" }.count, 1, "the 500 is retried once")

        // No output of any command shows the secret.
        var outputs = [("run --json", result)]
        for arguments in [["status"], ["status", "--json"], ["list"], ["list", "--json"], ["show", "2"], ["show", "2", "--json"],
                          ["show", "5"], ["show", "5", "--json"], ["show", "6", "--json"]] {
            let shown = try h.run(arguments)
            XCTAssertEqual(shown.status, 0, "haul \(arguments.joined(separator: " ")): \(shown.stderrText)")
            outputs.append((arguments.joined(separator: " "), shown))
        }
        for (name, output) in outputs {
            XCTAssertFalse(output.stdoutText.contains(Self.secret), "haul \(name) printed the secret: \(output.stdoutText)")
            XCTAssertFalse(output.stderrText.contains(Self.secret), "haul \(name) printed the secret: \(output.stderrText)")
        }
        let list = try XCTUnwrap(outputs.first { $0.0 == "list" }?.1)
        XCTAssertTrue(list.stdoutText.contains("http://***@127.0.0.1:\(server.port)/private.bin"), "list shows the URL redacted: \(list.stdoutText)")
        let sneaky = try h.show(5)
        XCTAssertEqual(sneaky["state"] as? String, "failed")
        XCTAssertTrue((sneaky["last_error"] as? String ?? "").contains("refused"), "\(sneaky)")
    }

    func testPlainOutputPrintsOneDoneLinePerFileAndHidesCredentials() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let files = (0..<4).map { runTestData(3_000 + $0, seed: 50 + UInt64($0)) }
        for (index, data) in files.enumerated() { server.route("/p\(index).bin", FaultServer.file(data)) }
        server.route("/flaky.bin", sequence: [FaultServer.Response.status(503).handler, FaultServer.file(files[0])])
        let withCredentials = "http://user:\(Self.secret)@127.0.0.1:\(server.port)"
        try h.add([
            server.url("/p0.bin").absoluteString,
            server.url("/p1.bin").absoluteString,
            "\(withCredentials)/p2.bin",
            "\(withCredentials)/p3.bin",
            "\(withCredentials)/flaky.bin",
            "\(withCredentials)/nope.bin",
        ])

        // stderr is a pipe, not a terminal: plain mode.
        let result = try h.run(["run", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        for (index, data) in files.enumerated() { XCTAssertEqual(h.contents("p\(index).bin"), data) }
        XCTAssertEqual(h.contents("flaky.bin"), files[0])
        let doneLines = result.stdoutLines.filter { $0.hasPrefix("done") }
        XCTAssertEqual(doneLines.count, 5, result.stdoutText)
        for name in ["p0.bin", "p1.bin", "p2.bin", "p3.bin", "flaky.bin"] {
            XCTAssertEqual(doneLines.filter { $0.contains("/\(name)") && $0.contains(h.out + "/" + name) }.count, 1,
                           "one done line for \(name): \(result.stdoutText)")
        }
        XCTAssertEqual(result.stdoutLines.filter { $0.hasPrefix("failed") }.count, 1, result.stdoutText)
        XCTAssertEqual(result.stdoutLines.filter { $0.hasPrefix("retry") }.count, 1, "the 503 is retried once: " + result.stdoutText)
        XCTAssertTrue(result.stdoutText.contains("***@"), "credentials are shown redacted: \(result.stdoutText)")
        XCTAssertFalse(result.stdoutText.contains(Self.secret), result.stdoutText)
        XCTAssertFalse(result.stderrText.contains(Self.secret), result.stderrText)
    }

    /// The exit status follows the jobs this run worked on: a job failed by an earlier run is
    /// noted in the summary, and does not make a later, successful run exit 1.
    func testExitStatusCountsOnlyTheJobsThisRunWorkedOn() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        server.route("/a.bin", FaultServer.file(runTestData(1_000, seed: 1)))
        server.route("/b.bin", FaultServer.file(runTestData(1_000, seed: 2)))
        try h.add([server.url("/gone.bin").absoluteString, server.url("/a.bin").absoluteString])
        let first = try h.run(["run"])
        XCTAssertEqual(first.status, 1, "this run failed a job: \(first.stdoutText)")
        XCTAssertFalse(first.stdoutText.contains("note:"), first.stdoutText)

        try h.add([server.url("/b.bin").absoluteString])
        let second = try h.run(["run"])
        XCTAssertEqual(second.status, 0, "every job this run worked on ended done: \(second.stdoutText)")
        XCTAssertTrue(second.stdoutText.contains("note: 1 job in the queue failed, not in this run"), second.stdoutText)
        let json = try h.run(["run", "--json"])
        XCTAssertEqual(json.status, 0)
        XCTAssertEqual(runTestJSON(json.stdoutLines.last ?? "")?["failed_earlier"] as? Int, 1, json.stdoutText)
    }

    /// Failures that differ only in their details (here each file's digest) are grouped by kind
    /// in the summary and in `status`; each job keeps its whole reason.
    func testFailuresAreGroupedByKindAndEachJobKeepsItsDetail() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let wrong = String(repeating: "ab", count: 32)
        for index in 1...3 { server.route("/m\(index).bin", FaultServer.file(runTestData(1_000 + index, seed: UInt64(60 + index)))) }
        try h.add((1...3).map { "\(server.url("/m\($0).bin").absoluteString) sha256=\(wrong)" })

        let result = try h.run(["run"])

        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stdoutText.contains("  3 × sha256 mismatch: expected HEX, got HEX"), result.stdoutText)
        let failures = try XCTUnwrap(try h.status()["top_failures"] as? [[String: Any]])
        XCTAssertEqual(failures.count, 1, "\(failures)")
        XCTAssertEqual(failures.first?["count"] as? Int, 3)
        let job = try h.show(2)
        XCTAssertEqual(job["error_kind"] as? String, "sha256 mismatch: expected HEX, got HEX")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("expected \(wrong), got "), "\(job)")
    }
}
