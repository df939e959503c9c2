import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// haul in a shell pipeline and under a supervisor: a reader that goes away ends it quietly, as
/// it ends Unix tools; one stop request delivered twice (to the process, then to its group, as
/// `timeout` does) is still a clean stop.
final class PipeAndSignalTests: XCTestCase {
    private enum Stream { case stdout, stderr }

    /// Runs haul with `closed` connected to a pipe nobody reads any more (its read end closed
    /// before haul starts, so the first write fails with EPIPE); returns how it ended and what
    /// it wrote to the other stream.
    private func run(_ h: RunHarness, _ arguments: [String], closed: Stream) throws -> (status: Int32, signalled: Bool, other: String) {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        close(ends[0])
        let gone = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
        let child = try HaulProcess.start(h.haul, arguments + ["--db", h.db], currentDirectory: h.temp.path,
                                          stdout: closed == .stdout ? .handle(gone) : .capture,
                                          stderr: closed == .stderr ? .handle(gone) : .capture)
        try gone.close()
        let result = child.wait(timeout: 120)
        return (result.status, result.signalled, closed == .stdout ? result.stderrText : result.stdoutText)
    }

    /// Every command whose stdout (or, for an error, stderr) reader is gone ends by SIGPIPE, as
    /// `ls | head` ends `ls`, with no backtrace or crash report on the other stream.
    func testEveryCommandEndsQuietlyWhenItsReaderIsGone() throws {
        let h = try RunHarness(self)
        let server = try FaultServer()
        defer { server.stop() }
        server.setFallback { _ in FaultServer.Response.ok(Data("x".utf8)) }
        try h.add((0..<50).map { server.url("/f\($0)").absoluteString })
        let cases: [([String], Stream)] = [
            (["--help"], .stdout), (["status"], .stdout), (["list"], .stdout), (["show", "1"], .stdout),
            (["status", "--json"], .stdout), (["add", server.url("/extra").absoluteString, "-d", h.out], .stdout),
            (["run", "--json"], .stdout), (["run", "--bogus"], .stderr), (["show", "999"], .stderr),
        ]
        for (arguments, stream) in cases {
            let result = try run(h, arguments, closed: stream)
            let context = "haul \(arguments.joined(separator: " ")) with its \(stream) reader gone"
            XCTAssertTrue(result.signalled && result.status == SIGPIPE, "\(context): status \(result.status), signalled \(result.signalled)")
            for crash in ["Fatal error", "Crash", "backtrace", "#0 ", "Illegal instruction"] {
                XCTAssertFalse(result.other.contains(crash), "\(context): \(result.other)")
            }
        }
        XCTAssertEqual(try h.counts()["running"] ?? 0, 0, "a run whose reader went away leaves no job running for good")
    }

    /// Standard output on a full disk (/dev/full): every command says once that it could not
    /// write standard output and why, and exits 1, as `ls > /dev/full` does; a run still does
    /// its work (the jobs end done).
    func testEveryCommandFailsWhenStandardOutputCannotBeWritten() throws {
        let full = FileHandle(forWritingAtPath: "/dev/full")
        guard let full else { throw XCTSkip("no /dev/full") }
        let h = try RunHarness(self)
        let server = try FaultServer()
        defer { server.stop() }
        server.setFallback { _ in FaultServer.Response.ok(Data("x".utf8)) }
        try h.add((0..<5).map { server.url("/f\($0)").absoluteString })
        let cases: [[String]] = [
            ["--help"], ["--version"], ["status"], ["status", "--json"], ["list"], ["show", "1"],
            ["completions", "bash"], ["add", server.url("/extra").absoluteString, "-d", h.out], ["run"], ["verify"],
        ]
        for arguments in cases {
            let child = try HaulProcess.start(h.haul, arguments + (arguments[0].hasPrefix("-") ? [] : ["--db", h.db]),
                                              currentDirectory: h.temp.path, stdout: .handle(full), stderr: .capture)
            let result = child.wait(timeout: 60)
            let context = "haul \(arguments.joined(separator: " ")) > /dev/full"
            XCTAssertEqual(result.status, 1, "\(context): \(result.stderrText)")
            XCTAssertEqual(result.stderrLines.filter { $0.contains("cannot write standard output: No space left on device") }.count, 1,
                           "\(context): \(result.stderrText)")
        }
        XCTAssertEqual(try h.counts()["done"], 6, "the run did its work")
    }

    /// `timeout -s INT` signals haul and then its process group: one request to stop, arriving
    /// twice. The run stops cleanly (exit 130), hands its job back, and keeps the partial file.
    func testOneStopSignalledTwiceIsACleanStop() throws {
        let timeout = "/usr/bin/timeout"
        guard FileManager.default.isExecutableFile(atPath: timeout) else { throw XCTSkip("no \(timeout)") }
        let h = try RunHarness(self)
        let server = try FaultServer()
        defer { server.stop() }
        let big = runTestData(2_000_000, seed: 71)
        server.route("/big.bin") { request in
            FaultServer.fileResponse(big, request: request, etag: "\"t-1\"").slowBody(bytesPerChunk: 16_384, delay: 0.05)
        }
        try h.add([server.url("/big.bin").absoluteString])

        let result = try HaulProcess.run(URL(fileURLWithPath: timeout), ["--preserve-status", "-s", "INT", "1.5", h.haul.path, "run", "--db", h.db],
                                         currentDirectory: h.temp.path, timeout: 30)

        XCTAssertEqual(result.status, 130, result.stdoutText + result.stderrText)
        XCTAssertFalse(result.stderrText.contains("stopping at once"), "the echo of the signal counted as a second Ctrl-C: \(result.stderrText)")
        let counts = try h.counts()
        XCTAssertEqual(counts["running"] ?? 0, 0, "\(counts)")
        XCTAssertEqual(counts["queued"], 1, "\(counts)")
        XCTAssertGreaterThan(h.tempFileSize(), 0, "the partial file is kept to resume")

        // The interrupted attempt is shown as not counted; the one that finishes is attempt 1.
        let again = try h.run(["run", "--quiet"])
        XCTAssertEqual(again.status, 0, again.stderrText)
        let shown = try h.run(["show", "1"]).stdoutLines
        XCTAssertEqual(shown.filter { $0.hasPrefix("  not counted:") }.count, 1, shown.joined(separator: "\n"))
        XCTAssertEqual(shown.filter { $0.hasPrefix("  attempt ") }.map { $0.prefix(11) }, ["  attempt 1"], shown.joined(separator: "\n"))
    }
}
