import Foundation
import HaulCore
import HaulTestSupport
import Synchronization
import XCTest

/// A host that says it is overloaded (503, 429) gets fewer transfers at once: halved at each
/// such answer, grown back one at a time after successes — and `status` shows the limit.
final class OverloadTests: XCTestCase {
    /// A host that answers 503 whenever it has more than 2 requests at once, with a cap of 8:
    /// haul comes down to what it can take, so few answers are 503s; every file is done, and
    /// `status` shows the host's limit while the run holds it.
    func testAnOverloadedHostGetsFewerTransfersAndStatusShowsItsLimit() throws {
        let h = try RunHarness(self)
        let tracker = FaultServer.ConcurrencyTracker()
        let server = try FaultServer(host: "127.0.0.1", tracker: tracker)
        defer { server.stop() }
        let data = runTestData(2_000, seed: 12)
        let refused = Mutex(0)
        server.setFallback { request in
            guard tracker.inFlight <= 2 else {
                refused.withLock { $0 += 1 }
                return .status(503)
            }
            return FaultServer.fileResponse(data, request: request).delayed(0.02)
        }
        try h.add((1...150).map { server.url("/o\($0).bin").absoluteString })

        let child = try h.start(["run", "--per-host", "8", "--max-attempts", "20"])
        XCTAssertTrue(server.waitForRequests(count: 40, timeout: 30))
        let status = try h.status()
        let result = child.wait(timeout: 90)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(try h.counts()["done"], 150)
        let total = server.requestCount()
        let share = Double(refused.withLock { $0 }) / Double(total)
        if ProcessInfo.processInfo.environment["HAUL_CAPTURE"] != nil { print("503 share: \(refused.withLock { $0 }) of \(total)") }
        XCTAssertLessThan(share, 0.25, "\(refused.withLock { $0 }) of \(total) answers were 503s")
        let limited = try XCTUnwrap(status["limited_hosts"] as? [[String: Any]], "\(status)")
        XCTAssertEqual(limited.first?["host"] as? String, "127.0.0.1:\(server.port)", "\(status)")
        XCTAssertLessThan(limited.first?["limit"] as? Int ?? 99, 8, "\(status)")
        XCTAssertEqual(limited.first?["cap"] as? Int, 8)
    }
}
