import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// A job whose temp file another process still holds (a worker taken off a shared queue that has
/// not stopped yet) waits without using its attempts, and is fetched once the holder lets go.
final class TempInUseTests: XCTestCase {
    func testAJobWhoseTempFileIsHeldWaitsWithoutUsingAttempts() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(4_000, seed: 7)
        server.route("/held.bin", sequence: [
            { request in FaultServer.fileResponse(data, request: request, etag: nil).stalledAfterHeaders(.forever) },
            FaultServer.file(data),
        ])
        try h.add([server.url("/held.bin").absoluteString])
        // A worker that claimed the job and stalled: killed here (its attempt, lost before any
        // progress, is not counted), so the
        // next attempt looks for its temp file (a first attempt has none to look for).
        let stalled = try h.start(["run"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/held.bin", timeout: 10))
        kill(stalled.processIdentifier, SIGKILL)
        XCTAssertEqual(stalled.wait(timeout: 10).status, SIGKILL)
        // Hold the lock haul takes on the job's temp file, as a stalled worker would.
        let temp = try h.tempFile(h.out + "/held.bin", job: 1)
        let fd = open(temp.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(flock(fd, LOCK_EX | LOCK_NB), 0)
        let run = try h.start(["run", "--max-attempts", "2", "--json"])
        XCTAssertTrue(try RunHarness.poll(timeout: 20) {
            let log = try h.show(1)["attempt_log"] as? [[String: Any]] ?? []
            return log.contains { ($0["error"] as? String ?? "").contains("being written by another haul process") }
        }, "the held temp file never stopped an attempt")
        let held = try h.show(1)
        XCTAssertEqual(held["state"] as? String, "queued", "the job waits: \(held)")
        XCTAssertEqual(held["attempts"] as? Int, 0, "waiting used no attempt (nor did the kill)")
        close(fd)  // the holder stops
        let result = run.wait(timeout: 30)
        XCTAssertFalse(result.timedOut)
        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("held.bin"), data)
        XCTAssertEqual(server.requestCount(path: "/held.bin"), 2, "no request while the temp file was held")
        XCTAssertEqual(try h.show(1)["attempts"] as? Int, 1)
        XCTAssertEqual(h.tempFiles(), [])
    }
}
