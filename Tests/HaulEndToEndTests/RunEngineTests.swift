import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul run` against the loopback fault server: what is refused, what is retried and when, and
/// what ends up at the destination.
final class RunEngineTests: XCTestCase {
    // MARK: Permanent failures

    func testNotFoundFailsTheJobAndLeavesNoFile() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        try h.add([server.url("/missing.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requestCount(path: "/missing.bin"), 1, "a 404 is not retried")
        XCTAssertEqual(h.outputFiles(), [], "neither the file nor a temp file may be left")
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertEqual(job["last_status"] as? Int, 404)
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("404"), "reason: \(job["last_error"] ?? "nil")")
    }

    /// Only a 200 (or 203) is the file: a 202 ("not ready yet") is tried again, and a 204 (no
    /// content) fails with its status; neither leaves a file.
    func testOnlyTheFileItselfIsPlacedNotAnAcceptedOrEmptyAnswer() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = Data("the file itself\n".utf8)
        let notYet = FaultServer.Response(status: 202, body: "queued, try later")
        server.route("/later.bin", responses: [notYet, notYet, FaultServer.Response.ok(body)])
        server.route("/empty.bin", FaultServer.Response(status: 204))
        try h.add([server.url("/later.bin").absoluteString, server.url("/empty.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "4"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("later.bin"), body)
        XCTAssertEqual(server.requestCount(path: "/later.bin"), 3)
        XCTAssertEqual(server.requestCount(path: "/empty.bin"), 1, "a 204 is not retried")
        XCTAssertEqual(h.outputFiles(), ["later.bin"])
        let job = try h.show(2)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("204"), "reason: \(job["last_error"] ?? "nil")")
    }

    func testGzipEncodedBodyFailsTheJob() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let plain = Data("hello, gzip\n".utf8)
        server.route("/page.txt", FaultServer.Response.ok(runTestGzipStored(plain), headers: ["Content-Encoding": "gzip"]))
        try h.add([server.url("/page.txt").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requests(path: "/page.txt").first?.header("Accept-Encoding"), "identity")
        XCTAssertEqual(server.requestCount(path: "/page.txt"), 1, "an encoded body is refused for good, not retried")
        XCTAssertEqual(h.outputFiles(), [])
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("Content-Encoding"), "reason: \(job["last_error"] ?? "nil")")
    }

    func testChecksumMismatchIsTriedTwiceThenFailsAndMatchIsDone() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(50_000, seed: 13)
        server.route("/bad.bin", FaultServer.file(data, etag: "\"s1\""))
        server.route("/good.bin", FaultServer.file(data, etag: "\"s1\""))
        let wrong = String(repeating: "ab", count: 32)
        try h.add([
            "\(server.url("/bad.bin").absoluteString) sha256=\(wrong)",
            "\(server.url("/good.bin").absoluteString) sha256=\(runTestSHA256(data))",
        ])

        let result = try h.run(["run", "--max-attempts", "5"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requestCount(path: "/bad.bin"), 2, "a checksum mismatch is tried twice, whatever --max-attempts allows")
        XCTAssertNil(server.requests(path: "/bad.bin").last?.rangeHeader, "a mismatching file is not resumed")
        XCTAssertEqual(h.outputFiles(), ["good.bin"], "no file (and no temp file) for the mismatch")
        XCTAssertEqual(h.contents("good.bin"), data)
        let bad = try h.show(1)
        XCTAssertEqual(bad["state"] as? String, "failed")
        XCTAssertEqual(bad["attempts"] as? Int, 2)
        XCTAssertTrue((bad["last_error"] as? String ?? "").contains("sha256 mismatch"), "reason: \(bad["last_error"] ?? "nil")")
        XCTAssertEqual(try h.show(2)["state"] as? String, "done")
    }

    // MARK: Retry-After

    func testRetryAfterSecondsPausesTheHost() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(20_000, seed: 2)
        let other = runTestData(3_000, seed: 3)
        server.route("/busy.bin", sequence: [
            FaultServer.Response.status(429, headers: ["Retry-After": "2"]).handler,
            FaultServer.file(data, etag: "\"b1\""),
        ])
        server.route("/other.bin", FaultServer.file(other))
        try h.add([server.url("/busy.bin").absoluteString, server.url("/other.bin").absoluteString])

        // One transfer at a time, so /other.bin is still queued when the 429 pauses the host.
        let result = try h.run(["run", "-j", "1", "--per-host", "1", "--max-retry-after", "10", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("busy.bin"), data)
        XCTAssertEqual(h.contents("other.bin"), other)
        let requests = server.allRequests
        XCTAssertEqual(requests.map(\.path), ["/busy.bin", "/other.bin", "/busy.bin"], "the 429 comes first; both wait for the pause")
        let refused = try XCTUnwrap(requests.first)
        for later in requests.dropFirst() {
            let gap = later.receivedInstant - refused.receivedInstant
            XCTAssertGreaterThanOrEqual(gap, .seconds(2), "\(later.path) was requested \(gap) after the Retry-After: 2")
        }
    }

    /// A job on A redirected to B, which answers 429 with Retry-After: B is paused (B's own job
    /// waits for it), and A too, whose jobs lead to B.
    func testRetryAfterFromARedirectsHostPausesThatHost() throws {
        let h = try RunHarness(self)
        let a = try FaultServer(host: "127.0.0.1")
        let b = try FaultServer(host: "127.0.0.2")
        defer { a.stop(); b.stop() }
        let data = runTestData(5_000, seed: 4)
        a.route("/moved.bin", FaultServer.Response.redirect(to: b.url("/busy.bin").absoluteString))
        a.route("/a.bin", FaultServer.file(data))
        b.route("/busy.bin", sequence: [
            FaultServer.Response.status(429, headers: ["Retry-After": "2"]).handler,
            FaultServer.file(data, etag: "\"b1\""),
        ])
        b.route("/b.bin", FaultServer.file(data))
        try h.add([a.url("/moved.bin").absoluteString, a.url("/a.bin").absoluteString, b.url("/b.bin").absoluteString])

        let result = try h.run(["run", "--json", "-j", "1", "--per-host", "1", "--max-retry-after", "10", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        let pauses = result.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "host_paused" }
        XCTAssertEqual(pauses.compactMap { $0["host"] as? String }, ["127.0.0.2:\(b.port)", "127.0.0.1:\(a.port)"], "\(pauses)")
        let refused = try XCTUnwrap(b.requests(path: "/busy.bin").first)
        let direct = try XCTUnwrap(b.requests(path: "/b.bin").first)
        XCTAssertGreaterThanOrEqual(direct.receivedInstant - refused.receivedInstant, .seconds(2), "B's own job waited for B's pause")
        let other = try XCTUnwrap(a.requests(path: "/a.bin").first)
        XCTAssertGreaterThanOrEqual(other.receivedInstant - refused.receivedInstant, .seconds(2), "A's jobs lead to B: A waited too")
        XCTAssertEqual(b.requests(path: "/busy.bin").count, 2, "no request reached B through A during the pause")
        for name in ["moved.bin", "a.bin", "b.bin"] { XCTAssertEqual(h.contents(name), data, name) }
    }

    func testRetryAfterHTTPDateIsHonoured() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(20_000, seed: 4)
        let sent = RunTestBox<String?>(nil)
        server.route("/later.bin", sequence: [
            { _ in
                // A whole second in the future is 2.5-3.5 s away (the format drops the fraction).
                let date = HTTPDate.format(Date().addingTimeInterval(3.5))
                sent.set(date)
                return FaultServer.Response.status(503, headers: ["Retry-After": date])
            },
            FaultServer.file(data, etag: "\"d1\""),
        ])
        try h.add([server.url("/later.bin").absoluteString])

        let result = try h.run(["run", "--max-retry-after", "10", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("later.bin"), data)
        let requests = server.requests(path: "/later.bin")
        XCTAssertEqual(requests.count, 2)
        guard requests.count == 2, let header = sent.get(), let date = HTTPDate.parse(header) else { return }
        let gap = requests[1].receivedInstant - requests[0].receivedInstant
        XCTAssertGreaterThanOrEqual(gap, .seconds(2), "retried \(gap) after a Retry-After 2.5-3.5 s away")
        // Wall clocks: allow the few milliseconds haul's whole-millisecond clock may round off.
        XCTAssertGreaterThanOrEqual(requests[1].receivedAt.timeIntervalSince(date), -0.01,
                                    "retried before the Retry-After date \(header)")
    }

    // MARK: Stall

    func testStalledAttemptIsRecordedAndRetried() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(30_000, seed: 5)
        server.route("/quiet.bin", sequence: [
            FaultServer.Response.ok(data, headers: ["ETag": "\"q1\""]).stalledAfterHeaders(.forever).handler,
            FaultServer.file(data, etag: "\"q1\""),
        ])
        try h.add([server.url("/quiet.bin").absoluteString])

        let result = try h.run(["run", "--stall", "1", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("quiet.bin"), data)
        XCTAssertEqual(server.requestCount(path: "/quiet.bin"), 2)
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "done")
        XCTAssertEqual(job["attempts"] as? Int, 2)
        let log = try XCTUnwrap(job["attempt_log"] as? [[String: Any]])
        XCTAssertEqual(log.count, 2)
        XCTAssertTrue((log.first?["error"] as? String ?? "").contains("stalled"), "attempt 1: \(log.first ?? [:])")
        XCTAssertEqual(log.last?["status"] as? Int, 200)
    }

    // MARK: Redirects

    func testRedirects() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(10_000, seed: 7)
        server.route("/final.bin", FaultServer.file(data, etag: "\"r1\""))
        // Not http(s): refused, and never fetched.
        server.route("/evil", FaultServer.Response.redirect(to: "file:///etc/passwd"))
        // A loop.
        server.route("/loop-a", FaultServer.Response.redirect(to: "/loop-b"))
        server.route("/loop-b", FaultServer.Response.redirect(to: "/loop-a"))
        // 11 hops: /long0 → … → /long11 → final is one too many; 10 (from /long1) is fine.
        for hop in 0...10 {
            server.route("/long\(hop)", FaultServer.Response.redirect(to: hop == 10 ? "/final.bin" : "/long\(hop + 1)"))
        }
        // 3 hops, relative Locations included.
        server.route("/dir/short0", FaultServer.Response.redirect(to: "short1"))
        server.route("/dir/short1", FaultServer.Response.redirect(to: "../short2", status: 301))
        server.route("/short2", FaultServer.Response.redirect(to: server.url("/final.bin").absoluteString, status: 307))
        try h.add([
            "\(server.url("/evil").absoluteString) out=evil",
            "\(server.url("/loop-a").absoluteString) out=loop",
            "\(server.url("/long0").absoluteString) out=eleven",
            "\(server.url("/long1").absoluteString) out=ten",
            "\(server.url("/dir/short0").absoluteString) out=three",
        ])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.outputFiles(), ["ten", "three"])
        XCTAssertEqual(h.contents("three"), data)
        XCTAssertEqual(h.contents("ten"), data)
        XCTAssertEqual(server.requestCount(path: "/evil"), 1, "a refused redirect is not retried")
        XCTAssertEqual(server.requestCount(path: "/loop-a"), 1, "a loop is refused when it comes back, not retried")

        let evil = try h.show(1)
        XCTAssertEqual(evil["state"] as? String, "failed")
        let evilReason = evil["last_error"] as? String ?? ""
        XCTAssertTrue(evilReason.contains("refused") && evilReason.contains("file:"), "reason: \(evilReason)")
        let loop = try h.show(2)
        XCTAssertEqual(loop["state"] as? String, "failed")
        XCTAssertTrue((loop["last_error"] as? String ?? "").contains("loop"), "reason: \(loop["last_error"] ?? "nil")")
        let eleven = try h.show(3)
        XCTAssertEqual(eleven["state"] as? String, "failed")
        XCTAssertTrue((eleven["last_error"] as? String ?? "").contains("redirects"), "reason: \(eleven["last_error"] ?? "nil")")
        XCTAssertEqual(server.requestCount(path: "/final.bin"), 2, "the 11th hop is never requested")
        XCTAssertEqual(try h.show(4)["state"] as? String, "done")
        XCTAssertEqual(try h.show(5)["state"] as? String, "done")
    }

    // MARK: haul get

    func testGetAddsAndRunsAndAgainIsANoOp() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let first = runTestData(40_000, seed: 8)
        let second = runTestData(1_000, seed: 9)
        server.route("/a.bin", FaultServer.file(first, etag: "\"g1\""))
        server.route("/b.bin", FaultServer.file(second))
        let urls = [server.url("/a.bin").absoluteString, server.url("/b.bin").absoluteString]

        let once = try h.run(["get"] + urls + ["-d", h.out])
        XCTAssertEqual(once.status, 0, once.stdoutText + once.stderrText)
        XCTAssertEqual(h.contents("a.bin"), first)
        XCTAssertEqual(h.contents("b.bin"), second)
        XCTAssertEqual(h.outputFiles(), ["a.bin", "b.bin"])
        XCTAssertEqual(server.allRequests.count, 2)

        let again = try h.run(["get"] + urls + ["-d", h.out])
        XCTAssertEqual(again.status, 0, again.stdoutText + again.stderrText)
        XCTAssertEqual(server.allRequests.count, 2, "nothing is downloaded again")
        XCTAssertTrue(again.stderrText.contains("already queued 2"), again.stderrText)
        XCTAssertEqual(try h.counts()["done"], 2)
        XCTAssertEqual(try h.counts().values.reduce(0, +), 2, "the same URLs are not queued twice")
    }

    /// `haul get -i -` downloads while its input is still open (a generator piping URLs, or a long
    /// list): a URL is fetched before the next line comes, and the run ends only once the input
    /// has ended and its last lines are done; a bad line is reported by number meanwhile.
    func testGetDownloadsWhileItsInputIsStillOpen() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let first = runTestData(20_000, seed: 21)
        let second = runTestData(3_000, seed: 22)
        server.route("/first.bin", FaultServer.file(first))
        server.route("/second.bin", FaultServer.file(second))
        let input = Pipe()
        let child = try h.start(["get", "-i", "-", "-d", h.out], stdin: input)
        try input.fileHandleForWriting.write(contentsOf: Data((server.url("/first.bin").absoluteString + "\n").utf8))
        // Awaited on the child's output: `done #1` comes only once the file is in place.
        XCTAssertTrue(child.waitForOutput("done    #1 ", timeout: 20),
                      "the first URL was not downloaded while the input stayed open")
        XCTAssertEqual(h.contents("first.bin"), first)
        XCTAssertEqual(server.allRequests.count, 1)
        try input.fileHandleForWriting.write(contentsOf: Data("not a url\n\(server.url("/second.bin").absoluteString)\n".utf8))
        try input.fileHandleForWriting.close()
        let result = child.wait(timeout: 30)
        XCTAssertFalse(result.timedOut, "haul get did not end when its input did")
        XCTAssertEqual(result.status, 1, "a rejected line makes the exit status 1: " + result.stderrText)
        XCTAssertEqual(h.contents("second.bin"), second)
        XCTAssertEqual(h.outputFiles(), ["first.bin", "second.bin"])
        XCTAssertTrue(result.stderrText.contains("haul: stdin:2: invalid URL"), result.stderrText)
        XCTAssertTrue(result.stderrText.contains("queued: added 2, already queued 0, rejected 1"), result.stderrText)
        XCTAssertEqual(try h.counts()["done"], 2)

        // With --json, the same as an event a script can read (the reasons stay on stderr).
        let list = try h.temp.write("list.txt", Data("not a url either\n\(server.url("/first.bin").absoluteString)\n".utf8))
        let json = try h.run(["get", "-i", list, "-d", h.out, "--json"])
        XCTAssertEqual(json.status, 1, json.stderrText)
        let queued = json.stdoutLines.compactMap(runTestJSON).filter { $0["event"] as? String == "queued" }
        XCTAssertEqual(queued.count, 1, json.stdoutText)
        XCTAssertEqual(queued.first?["rejected"] as? Int, 1)
        XCTAssertEqual(queued.first?["already_queued"] as? Int, 1)
    }

    /// Interrupted while its input is still open (the import waiting in a read of the pipe),
    /// `haul get` stops as a run does: at once, status 130, the job it finished kept done.
    func testGetInterruptedWhileItsInputIsOpenStopsAtOnce() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(5_000, seed: 23)
        server.route("/one.bin", FaultServer.file(body))
        let input = Pipe()
        let child = try h.start(["get", "-i", "-", "-d", h.out], stdin: input)
        try input.fileHandleForWriting.write(contentsOf: Data((server.url("/one.bin").absoluteString + "\n").utf8))
        XCTAssertTrue(child.waitForOutput("done    #1 ", timeout: 20), "the URL was not downloaded while the input stayed open")
        kill(child.processIdentifier, SIGINT)
        let result = child.wait(timeout: 20)
        XCTAssertFalse(result.timedOut, "haul get did not stop on SIGINT while its input was open")
        XCTAssertEqual(result.status, 130, result.stderrText)
        try? input.fileHandleForWriting.close()
        XCTAssertEqual(h.contents("one.bin"), body)
        XCTAssertEqual(try h.counts()["done"], 1)
    }

    /// Two runs on one queue, each `-j 1`, ten jobs of a second each: the first claims them all
    /// ahead (twelve rounds on SQLite); after five seconds it hands back what it has not started
    /// beyond two rounds, and the second, waiting, does those. (Before, the second did none and
    /// the batch took the first's ten seconds.)
    func testJobsHeldAheadByOneRunAreHandedBackForAnotherToTake() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(10_000, seed: 81)
        server.setFallback { request in
            var response = FaultServer.fileResponse(body, request: request)
            response.delayBeforeHeaders = 1
            return response
        }
        try h.add((1...10).map { server.url("/s\($0).bin").absoluteString })
        let first = try h.start(["run", "--json", "-j", "1", "--per-host", "2", "--worker", "first"])
        XCTAssertTrue(RunHarness.poll(timeout: 10) { server.requestCount() >= 1 }, "the first run did not start")
        let second = try h.run(["run", "--json", "-j", "1", "--per-host", "2", "--worker", "second"], timeout: 30)
        let firstResult = first.wait(timeout: 30)

        XCTAssertEqual(firstResult.status, 0, firstResult.stdoutText + firstResult.stderrText)
        XCTAssertEqual(second.status, 0, second.stdoutText + second.stderrText)
        XCTAssertEqual(try h.counts()["done"], 10)
        let byWorker = (1...10).compactMap { try? h.show($0)["placed_by"] as? String }
        XCTAssertGreaterThanOrEqual(byWorker.filter { $0 == "second" }.count, 2, "the second run did \(byWorker)")
        for id in 1...10 { XCTAssertEqual(try h.show(id)["attempts"] as? Int, 1, "handing back costs no attempt") }
    }

    /// `haul cancel` of a job mid-transfer: the run hears it from its next progress write (about
    /// a second), stops the transfer and places nothing; it heard it only at the lease's next
    /// renewal (20 s), so a body ending before that was placed for a cancelled job (audit).
    func testCancellingARunningJobStopsItsTransferAndPlacesNothing() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(400_000, seed: 80)
        server.route("/slow.bin") { request in
            FaultServer.fileResponse(body, request: request).slowBody(bytesPerChunk: 16_384, delay: 0.2)  // about 5 s
        }
        try h.add([server.url("/slow.bin").absoluteString])
        let run = try h.start(["run", "--quiet"])
        XCTAssertTrue(RunHarness.poll(timeout: 10) { server.requestCount(path: "/slow.bin") == 1 }, "the transfer did not start")
        let cancelled = Date()
        XCTAssertEqual(try h.run(["cancel", "1"]).status, 0)

        let result = run.wait(timeout: 30)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertLessThan(Date().timeIntervalSince(cancelled), 3.5, "the transfer ran to its end")
        XCTAssertNil(h.contents("slow.bin"), "a cancelled job's file was placed")
        XCTAssertEqual(try h.counts()["cancelled"], 1)
    }
}

/// `data` as a gzip member holding one stored (uncompressed) deflate block.
func runTestGzipStored(_ data: Data) -> Data {
    var out = Data([0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xFF])
    let length = UInt16(data.count)
    out.append(contentsOf: [0x01, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)])
    out.append(data)
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in data {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
    }
    crc ^= 0xFFFF_FFFF
    for value in [crc, UInt32(data.count)] {
        out.append(contentsOf: (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) })
    }
    return out
}

/// A value shared with a server handler thread.
final class RunTestBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func update<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}
