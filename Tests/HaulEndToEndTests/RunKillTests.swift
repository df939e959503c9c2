import Foundation
import HaulCore
import HaulTestSupport
import Synchronization
import XCTest

/// `haul run` stopped mid-transfer, by SIGKILL or SIGINT, then started again: nothing lost, the
/// partial file resumed with Range, no temp file left behind.
final class RunKillTests: XCTestCase {
    private static let etag = "\"big-1\""

    /// A 2 MB file served slowly (about 3 s) on the first request, at full speed afterwards.
    private func serveBig(_ server: FaultServer, _ data: Data) {
        server.route("/big.bin", sequence: [
            { request in
                FaultServer.fileResponse(data, request: request, etag: Self.etag).slowBody(bytesPerChunk: 32_768, delay: 0.05)
            },
            FaultServer.file(data, etag: Self.etag),
        ])
    }

    func testSIGKILLMidTransferThenRunAgainResumes() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let big = runTestData(2_000_000, seed: 31)
        let small = runTestData(5_000, seed: 32)
        serveBig(server, big)
        server.route("/small.bin", FaultServer.file(small, etag: "\"s\""))
        try h.add([server.url("/big.bin").absoluteString, server.url("/small.bin").absoluteString])

        let child = try h.start(["run", "--max-attempts", "3"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/big.bin", timeout: 10))
        // A good part of the body on disk (a kill in the first milliseconds may fairly start over).
        let started = RunHarness.poll(timeout: 10) { h.tempFileSize() >= 256 * 1024 }
        kill(child.processIdentifier, SIGKILL)
        let killed = child.wait(timeout: 10)
        XCTAssertTrue(started, "the transfer never got going")
        XCTAssertEqual(killed.status, SIGKILL)
        let kept = h.tempFileSize()
        XCTAssertTrue(kept > 0 && kept < big.count, "temp file holds \(kept) bytes")
        XCTAssertEqual(try h.counts()["running"], 1, "the killed run still holds its lease")
        XCTAssertEqual(try h.status()["abandoned"] as? Int, 1, "status tells that the running job's haul is gone")
        let text = try h.run(["status"]).stdoutText
        XCTAssertTrue(text.contains("abandoned: 1 of the running job's haul is gone; the next `haul run` takes it back"), text)

        let again = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(again.status, 0, again.stdoutText + again.stderrText)
        XCTAssertEqual(h.contents("big.bin"), big)
        XCTAssertEqual(h.contents("small.bin"), small)
        XCTAssertEqual(h.tempFiles(), [])
        XCTAssertEqual(h.outputFiles(), ["big.bin", "small.bin"])
        let resumed = try XCTUnwrap(server.requests(path: "/big.bin").last)
        XCTAssertEqual(resumed.rangeHeader, "bytes=\(kept)-")
        XCTAssertEqual(resumed.ifRangeHeader, Self.etag)
        XCTAssertEqual(try h.counts()["done"], 2)
    }

    /// Three `haul run` in a row killed with SIGKILL while their first requests wait for an
    /// answer, each with jobs claimed ahead that no server ever saw: none of those kills spends
    /// an attempt (with --max-attempts 2, the second kill failed every job the runs had claimed),
    /// and a fourth run does every job.
    func testKillsDoNotSpendTheAttemptsOfTheJobsTheRunHeld() throws {
        final class Slow: Sendable { let on = Mutex(true) }
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let slow = Slow()
        let data = runTestData(3_000, seed: 33)
        server.setFallback { request in
            var response = FaultServer.fileResponse(data, request: request)
            if slow.on.withLock({ $0 }) { response.delayBeforeHeaders = 30 }
            return response
        }
        try h.add((1...30).map { server.url("/j\($0).bin").absoluteString })
        for life in 1...3 {
            let child = try h.start(["run", "-j", "2", "--per-host", "2", "--max-attempts", "2"])
            let asked = RunHarness.poll(timeout: 10) { server.requestCount() >= 2 * life }
            kill(child.processIdentifier, SIGKILL)
            XCTAssertEqual(child.wait(timeout: 10).status, SIGKILL)
            XCTAssertTrue(asked, "life \(life): the run sent no request")
        }
        slow.on.withLock { $0 = false }
        let last = try h.run(["run", "-j", "2", "--per-host", "2", "--max-attempts", "2"])
        XCTAssertEqual(last.status, 0, last.stdoutText + last.stderrText)
        XCTAssertEqual(try h.counts()["done"], 30)
        XCTAssertEqual(h.tempFiles(), [])
    }

    func testSIGINTHandsTheJobBackAndKeepsTheTempFile() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let big = runTestData(2_000_000, seed: 33)
        serveBig(server, big)
        try h.add([server.url("/big.bin").absoluteString])

        let child = try h.start(["run", "--max-attempts", "3"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/big.bin", timeout: 10))
        let started = RunHarness.poll(timeout: 10) { h.tempFileSize() > 0 }
        kill(child.processIdentifier, SIGINT)
        let stopped = child.wait(timeout: 10)
        XCTAssertTrue(started, "the transfer never got going")

        XCTAssertFalse(stopped.timedOut)
        XCTAssertEqual(stopped.status, 130, stopped.stdoutText + stopped.stderrText)
        let counts = try h.counts()
        XCTAssertEqual(counts["queued"], 1, "\(counts)")
        XCTAssertEqual(counts["running"], 0, "\(counts)")
        let job = try h.show(1)
        XCTAssertEqual(job["attempts"] as? Int, 0, "an interrupted attempt is not counted")
        let kept = h.tempFileSize()
        XCTAssertTrue(kept > 0 && kept < big.count, "temp file holds \(kept) bytes")
        XCTAssertEqual(h.contents("big.bin"), nil)

        let again = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(again.status, 0, again.stdoutText + again.stderrText)
        XCTAssertEqual(h.contents("big.bin"), big)
        XCTAssertEqual(h.outputFiles(), ["big.bin"])
        let resumed = try XCTUnwrap(server.requests(path: "/big.bin").last)
        XCTAssertEqual(server.requestCount(path: "/big.bin"), 2)
        XCTAssertEqual(resumed.rangeHeader, "bytes=\(kept)-")
        XCTAssertEqual(resumed.ifRangeHeader, Self.etag)
    }
}
