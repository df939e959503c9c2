import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// HTTP edge cases where the scheduler matters: what the engine stores between attempts (a
/// validator, a length), how it counts attempts, pauses hosts and cleans up. The single-attempt
/// rules are in HaulCoreTests' DownloadAttemptEdgeTests.
final class HTTPEdgeCaseTests: XCTestCase {
    /// The validator the engine keeps in the database decides the retry: a weak ETag or a
    /// Last-Modified within the second of Date is not kept (the retry starts over, no Range); a
    /// Last-Modified a second before Date is, and comes back as If-Range.
    func testOnlyStrongValidatorsAreStoredForTheRetry() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(60_000, seed: 71)
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        let earlier = "Sun, 06 Nov 1994 08:49:36 GMT"
        let routes: [(String, String?, String?)] = [("/weak.bin", "W/\"w\"", nil), ("/same-second.bin", nil, date), ("/strong-date.bin", nil, earlier)]
        for (path, etag, lastModified) in routes {
            let serve: FaultServer.Handler = { request in
                FaultServer.fileResponse(data, request: request, etag: etag, lastModified: lastModified, extraHeaders: ["Date": date])
            }
            server.route(path, sequence: [{ serve($0).truncated(afterBytes: 20_000) }, serve])
        }
        try h.add(routes.map { server.url($0.0).absoluteString })

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        for (path, _, _) in routes { XCTAssertEqual(h.contents(String(path.dropFirst())), data, path) }
        XCTAssertEqual(h.tempFiles(), [])
        for path in ["/weak.bin", "/same-second.bin"] {
            let requests = server.requests(path: path)
            XCTAssertEqual(requests.count, 2, path)
            XCTAssertNil(requests.last?.rangeHeader, "\(path): no strong validator, so no resume")
            XCTAssertNil(requests.last?.ifRangeHeader, path)
        }
        let strong = server.requests(path: "/strong-date.bin")
        XCTAssertEqual(strong.count, 2)
        XCTAssertEqual(strong.last?.rangeHeader, "bytes=20000-")
        XCTAssertEqual(strong.last?.ifRangeHeader, earlier)
    }

    /// A chunked body cut before its terminator is not done; once all its bytes are kept, the
    /// resume gets `416 bytes */N` for exactly those bytes, and the job is done with them.
    func testCutChunkedBodyThenRangeNotSatisfiableIsDone() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(40_000, seed: 72)
        let etag = "\"c1\""
        server.route("/chunked.bin", sequence: [
            FaultServer.Response.ok(data, headers: ["ETag": etag]).chunked(chunkSize: 4_096).withoutChunkedTerminator().handler,
            FaultServer.file(data, etag: etag),
        ])
        try h.add([server.url("/chunked.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("chunked.bin"), data)
        XCTAssertEqual(h.outputFiles(), ["chunked.bin"])
        let requests = server.requests(path: "/chunked.bin")
        XCTAssertEqual(requests.map(\.rangeHeader), [nil, "bytes=40000-"])
        XCTAssertEqual(requests.last?.ifRangeHeader, etag)
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "done")
        XCTAssertEqual(job["attempts"] as? Int, 2)
    }

    /// A body that flows forever is cut by --timeout; each cut counts as an attempt, and when
    /// they run out the job fails with no file and no temp file left.
    func testTotalTimeoutCountsAttemptsAndLeavesNothing() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        // No validator: each attempt starts over, and each runs into the timeout.
        server.route("/endless.bin", FaultServer.Response.endless().slowBody(bytesPerChunk: 2_048, delay: 0.01))
        try h.add([server.url("/endless.bin").absoluteString])

        let started = Date()
        let result = try h.run(["run", "--timeout", "1", "--stall", "10", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertLessThan(Date().timeIntervalSince(started), 15)
        XCTAssertEqual(server.requests(path: "/endless.bin").map(\.rangeHeader), [nil, nil])
        XCTAssertEqual(h.outputFiles(), [], "neither the file nor a temp file may be left")
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertEqual(job["attempts"] as? Int, 2)
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("timed out"), "reason: \(job["last_error"] ?? "nil")")
    }

    /// A Retry-After that is not a number of seconds or an HTTP-date (`1e3`, `-1`) is ignored: the
    /// retry comes after the ordinary backoff and no host is paused — not after 1000 s.
    func testMalformedRetryAfterFallsBackToBackoffWithoutPausingTheHost() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(5_000, seed: 73)
        server.route("/exp.bin", sequence: [FaultServer.Response.status(503, headers: ["Retry-After": "1e3"]).handler, FaultServer.file(data)])
        server.route("/neg.bin", sequence: [FaultServer.Response.status(429, headers: ["Retry-After": "-1"]).handler, FaultServer.file(data)])
        try h.add([server.url("/exp.bin").absoluteString, server.url("/neg.bin").absoluteString])

        let result = try h.run(["run", "--json", "--max-attempts", "3"], timeout: 20)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("exp.bin"), data)
        XCTAssertEqual(h.contents("neg.bin"), data)
        let events = result.stdoutLines.compactMap(runTestJSON)
        XCTAssertEqual(events.filter { $0["event"] as? String == "host_paused" }.count, 0, result.stdoutText)
        XCTAssertEqual(events.filter { $0["event"] as? String == "retry" }.count, 2, result.stdoutText)
    }

    /// A head larger than libcurl reads (many headers; one header line of 150 KB) is that job's
    /// failure, at once and for good: the server answered, so its host is neither paused nor
    /// failed as unreachable, and its other jobs are done. (Both were taken for the host being
    /// down: 30 such URLs among 300 held the rest back for a minute.)
    func testAnOversizedHeadFailsItsJobNotItsHost() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(2_000, seed: 74)
        let many = FaultServer.Headers((1...4_000).map { ("X-Filler-\($0)", String(repeating: "v", count: 90)) })
        server.route("/many.bin", FaultServer.Response(status: 200, headers: many, body: data))
        server.route("/long.bin", FaultServer.Response(status: 200, headers: ["X-Long": String(repeating: "w", count: 150_000)], body: data))
        server.setFallback(FaultServer.file(data))
        try h.add([server.url("/many.bin").absoluteString, server.url("/long.bin").absoluteString]
                  + (1...10).map { server.url("/f\($0).bin").absoluteString })

        let result = try h.run(["run", "--json", "--max-attempts", "3", "-j", "2", "--per-host", "2"], timeout: 30)

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        let counts = try h.counts()
        XCTAssertEqual(counts["done"], 10)
        XCTAssertEqual(counts["failed"], 2)
        XCTAssertEqual(server.requestCount(path: "/many.bin") + server.requestCount(path: "/long.bin"), 2, "tried again")
        let events = result.stdoutLines.compactMap(runTestJSON)
        XCTAssertEqual(events.filter { $0["event"] as? String == "host_paused" }.count, 0, result.stdoutText)
        for id in [1, 2] {
            let reason = try h.show(id)["last_error"] as? String ?? ""
            XCTAssertTrue(reason.contains("response headers are too large to read"), reason)
        }
    }
}
