import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul run` under a low limit on open files (`ulimit -n`), as many systems start programs with
/// a soft limit of 1,024: the run raises its soft limit to the hard one, and refuses to start,
/// with one clear line and nothing taken off the queue, when even the hard limit is too low.
final class OpenFileLimitTests: XCTestCase {
    private static let prlimit = "/usr/bin/prlimit"

    /// Serves `count` small files and queues them.
    private func queued(_ h: RunHarness, count: Int) throws -> FaultServer {
        let server = try FaultServer(host: "127.0.0.1")
        let data = runTestData(2_000, seed: 21)
        server.setFallback { request in FaultServer.fileResponse(data, request: request) }
        try h.add((1...count).map { server.url("/n\($0).bin").absoluteString })
        return server
    }

    /// `haul ARGUMENTS --db DB` under `prlimit --nofile=SOFT:HARD`.
    private func runLimited(_ h: RunHarness, soft: Int, hard: Int, _ arguments: [String]) throws -> ProcessResult {
        guard FileManager.default.isExecutableFile(atPath: Self.prlimit) else { throw XCTSkip("\(Self.prlimit) (util-linux) is missing") }
        let result = try HaulProcess.run(URL(fileURLWithPath: Self.prlimit), ["--nofile=\(soft):\(hard)", h.haul.path] + arguments + ["--db", h.db],
                                         currentDirectory: h.temp.path, timeout: 60)
        XCTAssertFalse(result.timedOut, "haul \(arguments.joined(separator: " ")) ran past 60 s; stderr: \(result.stderrText)")
        // Raising a hard limit needs privilege (CAP_SYS_RESOURCE): without it prlimit itself fails.
        if result.stderrText.hasPrefix("prlimit:") { throw XCTSkip("prlimit could not set the limits: \(result.stderrText)") }
        return result
    }

    /// A soft limit of 200 with a hard limit of 4,096 and 64 transfers at once: before, the
    /// sockets and temp files ran out of descriptors and every job failed as "host unreachable".
    func testALowSoftLimitIsRaisedToTheHardLimit() throws {
        let h = try RunHarness(self)
        let server = try queued(h, count: 300)
        defer { server.stop() }

        let result = try runLimited(h, soft: 200, hard: 4096, ["run", "-j", "64", "--per-host", "64", "--max-attempts", "1"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(try h.counts()["done"], 300)
        XCTAssertEqual(h.outputFiles().count, 300)
    }

    /// A hard limit of 900 cannot hold 100 transfers' sockets and temp files besides libcurl's
    /// idle connections and the files waiting to be placed: the run stops before taking any job,
    /// says why on one line, and every job stays queued for a run with a lower -j, which then
    /// runs under the same limit.
    func testAHardLimitTooLowForTheTransfersIsRefusedBeforeAnyJobIsTaken() throws {
        let h = try RunHarness(self)
        let server = try queued(h, count: 20)
        defer { server.stop() }

        let refused = try runLimited(h, soft: 700, hard: 900, ["run", "-j", "100"])

        XCTAssertEqual(refused.status, 1, refused.stdoutText + refused.stderrText)
        let lines = refused.stderrLines
        XCTAssertEqual(lines.count, 1, "one line: \(lines)")
        let line = lines.first ?? ""
        for part in ["100 transfers at once (-j)", "only 900", "lower -j"] {
            XCTAssertTrue(line.contains(part), "'\(part)' in: \(line)")
        }
        XCTAssertEqual(server.requestCount(), 0, "nothing fetched")
        XCTAssertEqual(try h.counts()["queued"], 20, "nothing taken off the queue")

        // get refuses before it queues anything (a run that cannot start adds no job).
        let get = try runLimited(h, soft: 700, hard: 900, ["get", "-j", "100", "-d", h.out, server.url("/extra.bin").absoluteString])
        XCTAssertEqual(get.status, 1, get.stdoutText + get.stderrText)
        XCTAssertTrue(get.stderrText.contains("lower -j") && !get.stderrText.contains("queued:"), get.stderrText)
        XCTAssertEqual(try h.counts()["queued"], 20, "get queued a job it could not run")

        let fewer = try runLimited(h, soft: 700, hard: 900, ["run", "-j", "4"])
        XCTAssertEqual(fewer.status, 0, fewer.stdoutText + fewer.stderrText)
        XCTAssertEqual(try h.counts()["done"], 20)
    }
}
