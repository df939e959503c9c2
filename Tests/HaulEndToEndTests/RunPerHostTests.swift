import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul run --per-host N`: never more than N transfers to one host, while hosts run in parallel.
final class RunPerHostTests: XCTestCase {
    func testPerHostCapHoldsOverThreeHosts() throws {
        let h = try RunHarness(self)
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try ["127.0.0.1", "127.0.0.2", "127.0.0.3"].map { try FaultServer(host: $0, tracker: tracker) }
        defer { for server in servers { server.stop() } }
        @Sendable func body(_ host: String, _ path: String) -> Data { Data("\(host) \(path)\n".utf8) }
        for server in servers {
            let host = server.host
            // Slow enough that transfers overlap.
            server.setFallback { request in FaultServer.Response.ok(body(host, request.path)).delayed(0.02) }
        }
        var lines: [String] = []
        for (index, server) in servers.enumerated() {
            for file in 0..<100 {
                lines.append("\(server.url("/f\(file)").absoluteString) out=h\(index)/f\(file)")
            }
        }
        try h.add(lines)

        let result = try h.run(["run", "--per-host", "2", "-j", "16", "--max-attempts", "2", "--quiet"], timeout: 60)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        for (index, server) in servers.enumerated() {
            XCTAssertLessThanOrEqual(server.maxConcurrent, 2, "\(server.hostKey) had \(server.maxConcurrent) requests at once")
            XCTAssertEqual(server.allRequests.count, 100, "\(server.hostKey)")
            for file in 0..<100 where h.contents("h\(index)/f\(file)") != body(server.host, "/f\(file)") {
                XCTFail("h\(index)/f\(file) is wrong or missing")
            }
        }
        XCTAssertGreaterThanOrEqual(tracker.maxConcurrent, 2, "the transfers never overlapped")
        XCTAssertEqual(try h.counts()["done"], 300)
        XCTAssertEqual(h.tempFiles(), [])
    }

    /// Two `haul run`s on one queue: the cap is counted in the database, so it holds over both
    /// (each process's own connection limit alone would allow twice as many).
    func testPerHostCapHoldsOverTwoProcesses() throws {
        let h = try RunHarness(self)
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try ["127.0.0.1", "127.0.0.2", "127.0.0.3"].map { try FaultServer(host: $0, tracker: tracker) }
        defer { for server in servers { server.stop() } }
        @Sendable func body(_ host: String, _ path: String) -> Data { Data("\(host) \(path) twice\n".utf8) }
        for server in servers {
            let host = server.host
            server.setFallback { request in FaultServer.Response.ok(body(host, request.path)).delayed(0.02) }
        }
        var lines: [String] = []
        for (index, server) in servers.enumerated() {
            for file in 0..<50 {
                lines.append("\(server.url("/f\(file)").absoluteString) out=h\(index)/f\(file)")
            }
        }
        try h.add(lines)

        let arguments = ["run", "--per-host", "2", "-j", "16", "--max-attempts", "2", "--quiet"]
        let first = try h.start(arguments)
        let second = try h.start(arguments)
        let results = [first.wait(timeout: 60), second.wait(timeout: 60)]

        for result in results {
            XCTAssertFalse(result.timedOut)
            XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        }
        for (index, server) in servers.enumerated() {
            XCTAssertLessThanOrEqual(server.maxConcurrent, 2, "\(server.hostKey) had \(server.maxConcurrent) requests at once")
            XCTAssertEqual(server.allRequests.count, 50, "\(server.hostKey): each file is fetched once")
            for file in 0..<50 where h.contents("h\(index)/f\(file)") != body(server.host, "/f\(file)") {
                XCTFail("h\(index)/f\(file) is wrong or missing")
            }
        }
        XCTAssertGreaterThanOrEqual(tracker.maxConcurrent, 2, "the transfers never overlapped")
        XCTAssertEqual(try h.counts()["done"], 150)
        XCTAssertEqual(h.tempFiles(), [])
    }
}
