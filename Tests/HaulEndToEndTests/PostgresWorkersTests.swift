import Foundation
import HaulCore
import HaulPostgres
import HaulTestSupport
import XCTest

/// `haul` on a PostgreSQL queue (`--db postgres://…`): every command, several `haul run` workers
/// sharing one queue and one per-host cap, and a worker killed mid-run whose jobs the others finish
/// once its heartbeat stops.
final class PostgresWorkersTests: XCTestCase {
    private func database() throws -> String {
        try PostgresCluster.shared().makeDatabase()
    }

    func testEveryCommandWorksOnAPostgresQueueAndThePasswordNeverShows() throws {
        let url = try database()
        // Trust authentication ignores the password; it is there to be kept out of every output.
        let withPassword = url.replacingOccurrences(of: "postgres://haul@", with: "postgres://haul:s3cret@")
        let h = try RunHarness(self, database: withPassword)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let a = runTestData(3_000, seed: 1), b = runTestData(5_000, seed: 2)
        server.route("/a.bin", FaultServer.file(a))
        server.route("/b.bin", FaultServer.file(b))
        server.route("/missing.bin", FaultServer.Response.status(404))
        try h.add(["\(server.url("/a.bin").absoluteString)", "\(server.url("/b.bin").absoluteString)",
                   "\(server.url("/missing.bin").absoluteString)"])
        var outputs: [String] = []
        XCTAssertEqual(try h.counts()["queued"], 3)
        let list = try h.run(["list"])
        outputs.append(list.stdoutText + list.stderrText)
        XCTAssertEqual(list.stdoutText.split(separator: "\n").filter { $0.contains("queued") }.count, 3, list.stdoutText)

        let run = try h.run(["run", "--quiet", "--worker", "w1"])
        outputs.append(run.stdoutText + run.stderrText)
        XCTAssertEqual(run.status, 1, "the 404 fails: \(run.stderrText)")
        XCTAssertEqual(h.contents("a.bin"), a)
        XCTAssertEqual(h.contents("b.bin"), b)
        XCTAssertNil(h.contents("missing.bin"), "an error page never becomes a file")
        XCTAssertEqual(try h.counts(), ["queued": 0, "running": 0, "done": 2, "failed": 1, "cancelled": 0])

        let shown = try h.show(1)
        XCTAssertEqual(shown["placed_by"] as? String, "w1")
        XCTAssertEqual(shown["state"] as? String, "done")
        let show = try h.run(["show", "1"])
        outputs.append(show.stdoutText)
        XCTAssertTrue(show.stdoutText.contains("placed by:    w1"), show.stdoutText)
        let export = try h.run(["export"])
        outputs.append(export.stdoutText)
        let records = export.stdoutText.split(separator: "\n").compactMap { runTestJSON(String($0)) }
        XCTAssertEqual(records.map { $0["placed_by"] as? String }, ["w1", "w1", nil])

        let retry = try h.run(["retry", "3"])
        XCTAssertEqual(retry.status, 0, retry.stderrText)
        XCTAssertEqual(try h.counts()["queued"], 1)
        let cancel = try h.run(["cancel", "3"])
        XCTAssertEqual(cancel.status, 0, cancel.stderrText)
        XCTAssertEqual(try h.counts()["cancelled"], 1)
        let status = try h.run(["status"])
        outputs.append(status.stdoutText + status.stderrText)
        XCTAssertEqual(status.status, 0)

        // verify finds a placed file changed; --fix queues it again; get fetches it (and a new URL).
        try Data("changed".utf8).write(to: URL(fileURLWithPath: h.out + "/a.bin"))
        let verify = try h.run(["verify", "--fix"])
        outputs.append(verify.stdoutText + verify.stderrText)
        XCTAssertEqual(verify.status, 1, "a changed file is reported: \(verify.stdoutText) \(verify.stderrText)")
        XCTAssertEqual(try h.counts()["queued"], 1)
        let c = runTestData(2_000, seed: 3)
        server.route("/c.bin", FaultServer.file(c))
        let get = try h.run(["get", server.url("/c.bin").absoluteString, "-d", h.out, "--quiet", "--worker", "w2"])
        outputs.append(get.stdoutText + get.stderrText)
        XCTAssertEqual(get.status, 0, get.stderrText)
        XCTAssertEqual(h.contents("a.bin"), a, "verify --fix fetched it again")
        XCTAssertEqual(h.contents("c.bin"), c)
        XCTAssertEqual(try h.show(4)["placed_by"] as? String, "w2")
        // refresh asks the server whether the files changed: they did not (the same bytes come back).
        let refresh = try h.run(["refresh", "1", "2"])
        outputs.append(refresh.stdoutText + refresh.stderrText)
        XCTAssertEqual(refresh.status, 0, refresh.stderrText)
        XCTAssertEqual(h.contents("b.bin"), b)

        // A server that is not there: one line naming the queue, without the password.
        let port = try PostgresCluster.shared().port
        let missing = try HaulProcess.run(h.haul, ["status", "--db", "postgres://haul:s3cret@127.0.0.1:1/nowhere"],
                                          currentDirectory: h.temp.path, timeout: 30)
        outputs.append(missing.stdoutText + missing.stderrText)
        XCTAssertEqual(missing.status, 1, missing.stderrText)
        XCTAssertTrue(missing.stderrText.contains("postgres://haul@127.0.0.1:1/nowhere"), missing.stderrText)
        XCTAssertNotEqual(port, 1)
        for output in outputs { XCTAssertFalse(output.contains("s3cret"), output) }
    }

    /// A PostgreSQL URL's `password=` and `sslpassword=` parameters (libpq takes both in the
    /// query, any of them percent-encoded) are hidden from `ps` while haul runs, as the password
    /// before its host is; the other parameters and the URL's shape stay readable.
    func testPasswordParametersOfTheQueueURLAreHiddenFromProcessListings() throws {
        // Trust authentication ignores the passwords, and no TLS is asked for: the key's
        // password is never used, only kept out of sight.
        let url = try database() + "?application_name=shown&password=QP-S3CRET%23-%23TAIL&ssl%70assword=SSL-S3CRET#AFTER&connect_timeout=9"
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let gate = FaultServer.Gate()
        server.route("/held.bin") { _ in
            gate.wait(timeout: 20)
            return FaultServer.Response.ok(Data("held".utf8))
        }
        let child = try HaulProcess.start(h.haul, ["get", "-d", h.out, "--quiet", server.url("/held.bin").absoluteString, "--db=" + url],
                                          currentDirectory: h.temp.path)
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/held.bin"), "the request never came")
        let listed = (try? String(contentsOfFile: "/proc/\(child.processIdentifier)/cmdline", encoding: .utf8)) ?? ""
        gate.open()
        let result = child.wait(timeout: 30)
        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("held.bin"), Data("held".utf8))
        XCTAssertTrue(listed.contains("--db=postgres://haul@127.0.0.1:") && listed.contains("application_name=shown&password=")
                      && listed.contains("&ssl%70assword=") && listed.contains("&connect_timeout=9"), "more than the secrets went: \(listed)")
        XCTAssertFalse(["QP-S3CRET", "TAIL", "SSL-S3CRET", "AFTER"].contains { listed.contains($0) },
                       "a secret is readable in /proc/PID/cmdline (libpq reads no fragment: '#' is part of a value): \(listed)")
    }

    /// Four hosts, cap 2, served with a delay so transfers overlap.
    private func servers(_ tracker: FaultServer.ConcurrencyTracker, delay: Double) throws -> [FaultServer] {
        let servers = try ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"].map { try FaultServer(host: $0, tracker: tracker) }
        for server in servers {
            let host = server.host
            server.setFallback { request in FaultServer.Response.ok(Self.body(host, request.path)).delayed(delay) }
        }
        return servers
    }

    private static func body(_ host: String, _ path: String) -> Data { Data("\(host) \(path) shared\n".utf8) }

    private func lines(_ servers: [FaultServer], files: Int) -> [String] {
        servers.enumerated().flatMap { index, server in
            (0..<files).map { "\(server.url("/f\($0)").absoluteString) out=h\(index)/f\($0)" }
        }
    }

    /// Every file whole, no temp file left, and (`checkCap`) never more than 2 requests at once
    /// on a host.
    private func checkFiles(_ h: RunHarness, _ servers: [FaultServer], files: Int, checkCap: Bool = true,
                            file: StaticString = #filePath, line: UInt = #line) {
        for (index, server) in servers.enumerated() {
            if checkCap {
                XCTAssertLessThanOrEqual(server.maxConcurrent, 2, "\(server.hostKey) had \(server.maxConcurrent) requests at once",
                                         file: file, line: line)
            }
            for name in 0..<files where h.contents("h\(index)/f\(name)") != Self.body(server.host, "/f\(name)") {
                XCTFail("h\(index)/f\(name) is wrong or missing", file: file, line: line)
            }
        }
        XCTAssertEqual(h.tempFiles(), [], file: file, line: line)
    }

    func testThreeWorkersShareOneQueueAndTheCapOfEveryHost() throws {
        let h = try RunHarness(self, database: try database())
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try servers(tracker, delay: 0.02)
        defer { for server in servers { server.stop() } }
        try h.add(lines(servers, files: 60))
        let workers = try (1...3).map { try h.start(["run", "--per-host", "2", "-j", "8", "--quiet", "--worker", "w\($0)"]) }
        // While they run, `haul status` names them (a worker registers with its first exchange
        // and leaves when its run ends).
        var seen = Set<String>()
        XCTAssertTrue(try RunHarness.poll(timeout: 20) {
            seen.formUnion((try h.status()["workers"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String })
            return seen == ["w1", "w2", "w3"]
        }, "status named only \(seen)")
        let results = workers.map { $0.wait(timeout: 120) }
        for result in results {
            XCTAssertFalse(result.timedOut)
            XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        }
        checkFiles(h, servers, files: 60)
        for server in servers { XCTAssertEqual(server.allRequests.count, 60, "\(server.hostKey): each file is fetched once") }
        XCTAssertGreaterThanOrEqual(tracker.maxConcurrent, 4, "hosts ran in parallel")
        XCTAssertEqual(try h.counts()["done"], 240)
        XCTAssertEqual((try h.status()["workers"] as? [[String: Any]])?.count, 0, "workers whose runs ended are still listed")
        let export = try h.run(["export"])
        let placers = Set(export.stdoutText.split(separator: "\n").compactMap { runTestJSON(String($0))?["placed_by"] as? String })
        XCTAssertTrue(placers.isSubset(of: ["w1", "w2", "w3"]) && placers.count >= 2, "placed by \(placers)")
    }

    func testAKilledWorkersJobsAreFinishedByTheOthersOnceItsHeartbeatStops() throws {
        let url = try database()
        let h = try RunHarness(self, database: url)
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try servers(tracker, delay: 0.1)
        defer { for server in servers { server.stop() } }
        try h.add(lines(servers, files: 30))
        // Leases last 60 s (renewed every 20 s): only the heartbeat brings the killed worker's jobs back within 30 s.
        try PostgresJobStore(url: url).setWorkerTimeout(milliseconds: 2_000)
        let arguments = ["run", "--per-host", "2", "-j", "8", "--quiet"]
        let victim = try h.start(arguments + ["--worker", "victim"])
        XCTAssertTrue(tracker.waitForInFlight(atLeast: 4, timeout: 20), "the first worker never got going")
        let others = try (1...2).map { try h.start(arguments + ["--worker", "w\($0)"]) }
        XCTAssertTrue(RunHarness.poll(timeout: 20) {
            ((try? PostgresJobStore(url: url).workers().count) ?? 0) == 3
        }, "the workers never all registered")
        kill(victim.processIdentifier, SIGKILL)
        let killedAt = Date()
        _ = victim.wait(timeout: 10)
        let started = Date()
        let results = others.map { $0.wait(timeout: 90) }
        for result in results {
            XCTAssertFalse(result.timedOut)
            XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "the victim's jobs waited for their leases")
        checkFiles(h, servers, files: 30)
        XCTAssertEqual(try h.counts()["done"], 120)
        // A file is fetched again only for an attempt the kill cut off: one in flight, or one done
        // whose outcome was not yet recorded (placed in the next batch, then sent with the next
        // exchange). The queue tells which: such an attempt was closed when the heartbeat stopped,
        // not by its worker. So a file is fetched at most twice, first before the kill by an
        // attempt the queue closed as the stopped worker's, then after it by the attempt that did it.
        let store = try PostgresJobStore(url: url)
        for server in servers {
            for (path, requests) in Dictionary(grouping: server.allRequests, by: \.path) where requests.count > 1 {
                let times = requests.map(\.receivedAt).sorted()
                XCTAssertEqual(times.count, 2, "\(server.hostKey)\(path): fetched \(times.count) times")
                XCTAssertTrue(times[0] < killedAt && times[1] > killedAt, "\(server.hostKey)\(path): not fetched once before the kill and once after")
                let jobs = try store.jobs(url: server.url(path).absoluteString)
                let attempts = try jobs.first.map { try store.attempts(jobID: $0.id) } ?? []
                XCTAssertEqual(attempts.map(\.status), [nil, 200], "\(server.hostKey)\(path): \(attempts)")
                XCTAssertTrue(attempts.first?.error?.contains("the worker stopped without reporting (lease expired)") ?? false
                              || attempts.first?.error?.hasPrefix("lease expired: the worker stopped") ?? false,
                              "\(server.hostKey)\(path): fetched again though its first attempt was not cut off by the kill: \(attempts)")
            }
        }
        XCTAssertFalse(try store.workers().contains { $0.name == "victim" })
    }

    /// A harness whose queue is reached through a `TCPRelay` (which a test cuts and restores),
    /// with the four servers of `servers(_:delay:)`; the caller stops the relay and the servers.
    private func relayedQueue() throws -> (RunHarness, TCPRelay, FaultServer.ConcurrencyTracker, [FaultServer]) {
        let url = try database()
        let port = try PostgresCluster.shared().port
        let relay = try TCPRelay(port: port)
        let h = try RunHarness(self, database: url.replacingOccurrences(of: ":\(port)/", with: ":\(relay.port)/"))
        let tracker = FaultServer.ConcurrencyTracker()
        return (h, relay, tracker, try servers(tracker, delay: 0.1))
    }

    /// A worker whose database goes away (every connection cut, new ones closed at once, through
    /// a relay) for longer than five tries waits for it: its transfers go on, it tries again at
    /// growing intervals, and once the database answers it records everything and ends with
    /// every job done, every file whole, the cap held.
    func testARunWaitsForItsDatabaseToComeBack() throws {
        let (h, relay, tracker, servers) = try relayedQueue()
        defer { relay.stop(); for server in servers { server.stop() } }
        try h.add(lines(servers, files: 10))
        let run = try h.start(["run", "--per-host", "2", "-j", "8", "--json"])
        XCTAssertTrue(tracker.waitForInFlight(atLeast: 4, timeout: 20), "the worker never got going")
        relay.cut()
        // Five exchanges fail (the fifth ended a run before), 1 + 2 + 4 + 8 s apart.
        XCTAssertTrue(run.waitForOutput("trying again in 8 s", times: 2, timeout: 40), "no fifth try")
        relay.restore()
        let result = run.wait(timeout: 60)
        XCTAssertFalse(result.timedOut)
        XCTAssertEqual(result.status, 0, result.stderrText + result.stdoutText.suffix(2000))
        checkFiles(h, servers, files: 10)
        XCTAssertEqual(try h.counts()["done"], 40)
    }

    /// `haul get` reading a list from a pipe while its database goes away: the lines that come
    /// meanwhile wait for it (said, with their line numbers) instead of ending the import, and
    /// once it answers they are queued and fetched like the others.
    func testAnImportWaitsForItsDatabaseToComeBack() throws {
        let (h, relay, tracker, servers) = try relayedQueue()
        defer { relay.stop(); for server in servers { server.stop() } }
        let all = lines(servers, files: 10)
        let input = Pipe()
        let run = try h.start(["get", "-i", "-", "-d", h.out, "--per-host", "2", "-j", "8", "--json"], stdin: input)
        // The comment ends the first part: line 20 goes with lines 1-19 (a URL line last read
        // is held a moment for option lines that may follow it), so the run starts with all 20.
        input.fileHandleForWriting.write(Data((all[..<20].joined(separator: "\n") + "\n# more to come\n").utf8))
        XCTAssertTrue(tracker.waitForInFlight(atLeast: 4, timeout: 20), "the run never got going")
        relay.cut()
        input.fileHandleForWriting.write(Data((all[20...].joined(separator: "\n") + "\n").utf8))
        XCTAssertTrue(run.waitForOutput("adding stdin:22–40 again in 2 s", timeout: 20), "the import did not wait for its database")
        relay.restore()
        try input.fileHandleForWriting.close()
        let result = run.wait(timeout: 60)
        XCTAssertFalse(result.timedOut)
        XCTAssertEqual(result.status, 0, result.stderrText + result.stdoutText.suffix(2000))
        // The lines written after the cut but the last (held for options, then added alone).
        XCTAssertTrue(result.stdoutText.contains("adding stdin:22–40 again in 1 s"), result.stdoutText)
        checkFiles(h, servers, files: 10)
        XCTAssertEqual(try h.counts()["done"], 40)
    }

    /// A worker stopped (SIGSTOP) past the worker timeout is taken off the queue: the other worker
    /// finishes its jobs, and once it runs again it learns it was taken off and stops (exit 1)
    /// instead of taking more work; every file is whole.
    func testAStalledWorkerIsTakenOffAndStopsWhenItWakes() throws {
        let url = try database()
        let h = try RunHarness(self, database: url)
        let tracker = FaultServer.ConcurrencyTracker()
        let servers = try servers(tracker, delay: 0.1)
        defer { for server in servers { server.stop() } }
        try h.add(lines(servers, files: 20))
        try PostgresJobStore(url: url).setWorkerTimeout(milliseconds: 2_000)
        let arguments = ["run", "--per-host", "2", "-j", "8", "--quiet"]
        let stalled = try h.start(arguments + ["--worker", "stalled"])
        XCTAssertTrue(tracker.waitForInFlight(atLeast: 4, timeout: 20), "the first worker never got going")
        kill(stalled.processIdentifier, SIGSTOP)
        let other = try h.start(arguments + ["--worker", "w1"])
        XCTAssertTrue(RunHarness.poll(timeout: 20) {
            let names = (try? PostgresJobStore(url: url).workers().map(\.name)) ?? []
            return names == ["w1"]
        }, "the stalled worker was never taken off")
        let takenOff = Date()
        kill(stalled.processIdentifier, SIGCONT)
        let woken = stalled.wait(timeout: 30)
        print("stalled worker: woken and stopped \(Date().timeIntervalSince(takenOff)) s after it was taken off")
        XCTAssertFalse(woken.timedOut)
        XCTAssertEqual(woken.status, 1, woken.stderrText)
        XCTAssertTrue(woken.stderrText.contains("taken off the queue"), woken.stderrText)
        let finished = other.wait(timeout: 90)
        print("stalled worker: the other finished \(Date().timeIntervalSince(takenOff)) s after")
        XCTAssertLessThan(Date().timeIntervalSince(takenOff), 30,
                          "the other worker waited for leases: the woken worker claimed after it was taken off")
        XCTAssertFalse(finished.timedOut)
        XCTAssertEqual(finished.status, 0, finished.stderrText)
        // Not the cap: the stopped worker's connections stay open at the server while it sleeps,
        // and no lease can close them; the cap holds over the workers that run.
        checkFiles(h, servers, files: 20, checkCap: false)
        XCTAssertEqual(try h.counts()["done"], 80)
    }
}
