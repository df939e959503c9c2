import Foundation
import HaulCore
import HaulTestSupport
import Synchronization
import XCTest

/// A host that cannot be reached is the host's fault, not its jobs': it is paused with backoff
/// and probed with one request, and its jobs fail only once the host itself failed as often as
/// a job may be tried, and, for a host that answered earlier in the run, over at least
/// `--max-host-down`.
final class HostDownTests: XCTestCase {
    /// 200 jobs on a host that hangs up on every request, beside a healthy host: the dead host
    /// gets a handful of requests (not 200 × attempts), every one of its jobs fails with "host
    /// unreachable", and the healthy host's jobs are done.
    func testADeadHostGetsAFewRequestsNotOneHundredsAndItsJobsFailAsUnreachable() throws {
        let h = try RunHarness(self)
        let dead = try FaultServer(host: "127.0.0.1")
        let alive = try FaultServer(host: "127.0.0.2")
        defer { dead.stop(); alive.stop() }
        dead.setFallback { _ in .hangUp() }
        let data = runTestData(2_000, seed: 9)
        alive.setFallback(FaultServer.file(data))
        try h.add((1...200).map { dead.url("/d\($0).bin").absoluteString } + (1...10).map { alive.url("/a\($0).bin").absoluteString })

        let result = try h.run(["run", "--json", "--max-attempts", "3", "--per-host", "4"], timeout: 60)

        XCTAssertEqual(result.status, 1, result.stderrText)
        let requests = dead.requestCount()
        XCTAssertGreaterThanOrEqual(requests, 3, "the host is tried as often as a job may be")
        XCTAssertLessThanOrEqual(requests, 3 + 4, "a first round at the cap, then one probe at a time: \(requests) requests")
        let counts = try h.counts()
        XCTAssertEqual(counts["failed"], 200)
        XCTAssertEqual(counts["done"], 10)
        for index in 1...10 { XCTAssertEqual(h.contents("a\(index).bin"), data) }
        let reasons = Set(result.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "failed" }
            .compactMap { $0["reason"] as? String })
        XCTAssertEqual(reasons.count, 1, "one reason for the host: \(reasons)")
        // Each transport words the hang-up its own way; both call it unreachable.
        XCTAssertTrue(reasons.first.map { $0.hasPrefix("host unreachable: ") && $0.contains("3 attempts in a row to reach 127.0.0.1:\(dead.port) failed") } ?? false,
                      "\(reasons)")
        XCTAssertEqual(h.tempFiles(), [])
    }

    /// A host whose connections never open (SYNs dropped, as behind a firewall): no request can
    /// be sent within `--stall`, which is the host's fault as a refusal is, so it is probed,
    /// not tried by each of its 40 jobs: they fail together, quickly, with one reason.
    func testAHostThatNeverConnectsIsProbedNotTriedByEveryJob() throws {
        let h = try RunHarness(self)
        let black = try FullBacklogListener(host: "127.0.0.5")
        defer { black.close() }
        try h.add((1...40).map { black.url("/s\($0).bin").absoluteString })

        let started = Date()
        let result = try h.run(["run", "--json", "--max-attempts", "2", "--per-host", "4", "--stall", "0.5"], timeout: 60)

        XCTAssertEqual(result.status, 1, result.stderrText)
        XCTAssertEqual(try h.counts()["failed"], 40)
        // Job by job: 40 jobs × 2 attempts × 0.5 s over 4 at once, 10 s; by the host: a round
        // at the cap, then probes one at a time after 1 s of backoff.
        XCTAssertLessThan(Date().timeIntervalSince(started), 6, "the jobs were tried one by one")
        let reasons = Set(result.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "failed" }
            .compactMap { $0["reason"] as? String })
        XCTAssertTrue(reasons.count == 1 && reasons.first?.hasPrefix("host unreachable: no connection within 0.5 s") == true, "\(reasons)")
    }

    /// One path of a host that takes the request and never answers stalls its own job only:
    /// the host answered, so its other jobs are done (with --max-attempts 1, a stall taken for
    /// the host being down failed all of them).
    func testASilentPathIsItsJobsStallNotItsHostBeingDown() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(2_000, seed: 14)
        server.route("/silent.bin") { _ in
            var response = FaultServer.Response.ok(Data("late".utf8))
            response.delayBeforeHeaders = 30
            return response
        }
        server.setFallback(FaultServer.file(data))
        try h.add([server.url("/silent.bin").absoluteString] + (1...10).map { server.url("/f\($0).bin").absoluteString })

        let result = try h.run(["run", "--json", "-j", "1", "--per-host", "1", "--max-attempts", "1", "--stall", "0.5"], timeout: 60)

        XCTAssertEqual(result.status, 1, result.stderrText)
        XCTAssertEqual(try h.counts()["done"], 10, result.stdoutText)
        let failed = result.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "failed" }
        XCTAssertTrue(failed.count == 1 && (failed.first?["reason"] as? String ?? "").contains("stalled"), "\(failed)")
    }

    /// A job on A redirected to B, where nothing listens: B's refusal is that job's failure, not
    /// A's: A's other jobs are not paused or failed as "host unreachable" (with --max-attempts 1,
    /// the one refusal failed all of them). Both transports.
    func testARedirectToADeadHostIsNotTheJobsHostBeingDown() throws {
        for transport in ["curl", "urlsession"] {
            let h = try RunHarness(self)
            let a = try FaultServer(host: "127.0.0.1")
            let gone = try FaultServer(host: "127.0.0.2")
            let deadURL = gone.url("/x.bin").absoluteString
            gone.stop()
            defer { a.stop() }
            let data = runTestData(2_000, seed: 12)
            a.route("/moved.bin", FaultServer.Response.redirect(to: deadURL))
            a.setFallback(FaultServer.file(data))
            try h.add([a.url("/moved.bin").absoluteString] + (1...10).map { a.url("/a\($0).bin").absoluteString })

            let result = try h.run(["run", "--json", "-j", "1", "--per-host", "1", "--max-attempts", "1", "--transport", transport])

            XCTAssertEqual(result.status, 1, "\(transport): \(result.stderrText)")
            let counts = try h.counts()
            XCTAssertEqual(counts["done"], 10, "\(transport): A's own jobs: \(result.stdoutText)")
            XCTAssertEqual(counts["failed"], 1, transport)
            let failed = result.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "failed" }
            let reason = failed.first?["reason"] as? String ?? ""
            XCTAssertTrue(reason.contains("where a redirect led") && !reason.contains("host unreachable"), "\(transport): \(reason)")
        }
    }

    /// A host that hangs up on its first five requests, then answers: the first round at the
    /// cap counts once, the probes find it back, and every job is done on one counted attempt.
    func testAHostThatComesBackCostsItsJobsNoAttempts() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(2_000, seed: 10)
        let served = Mutex(0)
        let file = FaultServer.file(data)
        server.setFallback { request in
            let number = served.withLock { count -> Int in count += 1; return count }
            return number <= 5 ? .hangUp(reset: true) : file(request)
        }
        try h.add((1...20).map { server.url("/b\($0).bin").absoluteString })

        let result = try h.run(["run", "--max-attempts", "3", "--per-host", "4"], timeout: 60)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(try h.counts()["done"], 20)
        for id in 1...20 {
            XCTAssertEqual(try h.show(id)["attempts"] as? Int, 1, "job \(id): an unreachable host costs its jobs no attempt")
        }
    }

    /// A host that answers, then hangs up on every request for 2.5 s (a server restarting),
    /// with `--max-attempts 1`: its probes are spent at once, but a host that answered in this
    /// run is given up only after `--max-host-down` (the default, 120 s), so it is probed one
    /// request at a time until it is back, and all 20 jobs are done on one counted attempt each.
    /// (Given up after its probes alone, a blip of a few seconds failed every job of its host.)
    /// Then with `--max-host-down 1.5` on a host that answers once and stays down: its jobs
    /// fail after about that long, saying so. (A host never heard from fails after its probes,
    /// as in the tests above, which run with the default.)
    func testAHostDownForAFewSecondsAfterAnsweringCostsNoJob() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(2_000, seed: 15)
        let file = FaultServer.file(data)
        let served = Mutex((count: 0, downUntil: Date.distantFuture))
        let downRequests = Mutex(0)
        server.setFallback { request in
            let down = served.withLock { state -> Bool in
                state.count += 1
                if state.count == 3 { state.downUntil = Date().addingTimeInterval(2.5) }
                return state.count >= 3 && Date() < state.downUntil
            }
            guard !down else {
                downRequests.withLock { $0 += 1 }
                return .hangUp(reset: true)
            }
            return file(request)
        }
        try h.add((1...20).map { server.url("/b\($0).bin").absoluteString })

        let result = try h.run(["run", "--max-attempts", "1", "-j", "1", "--per-host", "1"], timeout: 60)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(try h.counts()["done"], 20)
        for id in 1...20 { XCTAssertEqual(try h.show(id)["attempts"] as? Int, 1, "job \(id)") }
        XCTAssertLessThanOrEqual(downRequests.withLock { $0 }, 12, "one probe at a time, with backoff")

        let gone = try FaultServer(host: "127.0.0.2")
        defer { gone.stop() }
        let once = Mutex(false)
        gone.setFallback { request in
            once.withLock { answered in defer { answered = true }; return answered } ? .hangUp(reset: true) : file(request)
        }
        try h.add((1...5).map { gone.url("/g\($0).bin").absoluteString })
        let started = Date()
        let failed = try h.run(["run", "--json", "--max-attempts", "1", "-j", "1", "--max-host-down", "1.5"], timeout: 60)
        XCTAssertEqual(failed.status, 1, failed.stdoutText + failed.stderrText)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.5, "given up before --max-host-down")
        let counts = try h.counts()
        XCTAssertEqual(counts["failed"], 4)
        XCTAssertEqual(counts["done"], 21)
        let reasons = Set(failed.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "failed" }
            .compactMap { $0["reason"] as? String })
        XCTAssertTrue(reasons.count == 1 && reasons.first?.contains("to reach 127.0.0.2:\(gone.port) failed over ") == true, "\(reasons)")
    }
}
