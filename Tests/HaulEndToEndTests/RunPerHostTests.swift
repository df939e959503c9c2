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

extension RunPerHostTests {
    /// While a run holds a host at its cap, `haul status` tells the transfers (slots held) from
    /// the jobs claimed ahead, and the cap given with `--per-host` is kept with the queue.
    func testStatusTellsTransfersFromJobsClaimedAhead() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let gate = FaultServer.Gate()
        server.setFallback { request in
            gate.wait(timeout: 20)
            return FaultServer.Response.ok(Data(request.path.utf8))
        }
        try h.add((0..<10).map { server.url("/f\($0)").absoluteString })
        let run = try h.start(["run", "--per-host", "3", "-j", "8"])
        XCTAssertTrue(server.waitForInFlight(atLeast: 3), "the run did not reach its cap")
        let status = try h.status()
        gate.open()
        XCTAssertEqual(status["transferring"] as? Int, 3, "\(status)")
        let counts = status["counts"] as? [String: Any]
        XCTAssertGreaterThan(counts?["running"] as? Int ?? 0, 3, "jobs are claimed ahead of their slots: \(status)")
        let result = run.wait(timeout: 30)
        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertLessThanOrEqual(server.maxConcurrent, 3)
        XCTAssertEqual(try h.status()["transferring"] as? Int, 0, "every slot is given back at the end")
    }
}
