import Foundation
import Synchronization
import HaulCore
import HaulTestSupport
import XCTest

/// `haul run` resuming interrupted bodies: Range + If-Range with a strong validator, and never a
/// file spliced from two versions of a resource.
final class RunResumeTests: XCTestCase {
    func testTruncatedBodyResumesWithRange() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(100_000, seed: 21)
        let etag = "\"t1\""
        let cut = 30_000
        server.route("/cut.bin", sequence: [
            { request in FaultServer.fileResponse(data, request: request, etag: etag).truncated(afterBytes: cut) },
            FaultServer.file(data, etag: etag),
        ])
        try h.add([server.url("/cut.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("cut.bin"), data)
        XCTAssertEqual(h.outputFiles(), ["cut.bin"])
        let requests = server.requests(path: "/cut.bin")
        XCTAssertEqual(requests.count, 2)
        XCTAssertNil(requests.first?.rangeHeader)
        XCTAssertEqual(requests.last?.rangeHeader, "bytes=\(cut)-")
        XCTAssertEqual(requests.last?.ifRangeHeader, etag)
    }

    func testConnectionResetResumesWithIfRange() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(200_000, seed: 22)
        let etag = "\"reset-1\""
        server.route("/reset.bin", sequence: [
            // Paced, so the first chunks are surely read before the reset.
            { request in
                FaultServer.fileResponse(data, request: request, etag: etag)
                    .slowBody(bytesPerChunk: 16_384, delay: 0.05).reset(afterBytes: 65_536 + 1_000)
            },
            FaultServer.file(data, etag: etag),
        ])
        try h.add([server.url("/reset.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("reset.bin"), data)
        XCTAssertEqual(h.outputFiles(), ["reset.bin"])
        let requests = server.requests(path: "/reset.bin")
        XCTAssertEqual(requests.count, 2)
        let range = try XCTUnwrap(requests.last?.rangeHeader, "the retry must resume")
        let offset = try XCTUnwrap(Int(range.dropFirst("bytes=".count).dropLast()), range)
        XCTAssertEqual(range, "bytes=\(offset)-")
        XCTAssertTrue(offset > 0 && offset <= 66_536, range)
        XCTAssertEqual(requests.last?.ifRangeHeader, etag)
    }

    /// The resume answered with the whole file (a server ignoring Range, or a file that changed)
    /// starts over without spending an attempt: two attempts suffice for a cut then a restart.
    func testServerIgnoringRangeRestartsCleanly() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(100_000, seed: 23)
        let etag = "\"i1\""
        server.route("/whole.bin", sequence: [
            { request in FaultServer.fileResponse(data, request: request, etag: etag).truncated(afterBytes: 40_000) },
            FaultServer.fileIgnoringRange(data, etag: etag),
        ])
        try h.add([server.url("/whole.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("whole.bin"), data)
        XCTAssertEqual(h.outputFiles(), ["whole.bin"])
        let requests = server.requests(path: "/whole.bin")
        XCTAssertEqual(requests.map(\.rangeHeader), [nil, "bytes=40000-", nil], "cut, resumed, started over")
        XCTAssertEqual(try h.show(1)["attempts"] as? Int, 2, "the resume that started over is not counted")
    }

    /// Version A is cut short; then the resource is B. The server honours If-Range, so the resume
    /// request gets the whole of B: the file must be B, never A's head with B's tail.
    /// Two queues (two databases) whose job 1 goes to the same destination: each resumes from
    /// its own partial file only. Queue B's attempt stops with 50 KB of B, queue A's with 120 KB
    /// of A; B then resumes from its 50 KB. (When the temp file's name held only the job number
    /// and destination, B took A's 120 KB for its own, asked for the rest with its own ETag, and
    /// placed A's bytes followed by B's.)
    func testTwoQueuesNeverResumeFromEachOthersPartialFile() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let bodyA = runTestData(300_000, seed: 26)
        let bodyB = runTestData(300_000, seed: 27)
        server.route("/a.bin", sequence: [
            { request in FaultServer.fileResponse(bodyA, request: request, etag: "\"a\"").truncated(afterBytes: 120_000) },
            FaultServer.file(bodyA, etag: "\"a\""),
        ])
        server.route("/b.bin", sequence: [
            { request in FaultServer.fileResponse(bodyB, request: request, etag: "\"b\"").truncated(afterBytes: 50_000) },
            FaultServer.file(bodyB, etag: "\"b\""),
        ])
        let dbB = h.temp.file("b.db")
        func haulOn(_ db: String, _ arguments: [String]) throws -> ProcessResult {
            try HaulProcess.run(h.haul, arguments + ["--db", db], currentDirectory: h.temp.path, timeout: 30)
        }
        XCTAssertEqual(try haulOn(h.db, ["add", server.url("/a.bin").absoluteString + " out=file.bin", "-d", h.out]).status, 0)
        XCTAssertEqual(try haulOn(dbB, ["add", server.url("/b.bin").absoluteString + " out=file.bin", "-d", h.out]).status, 0)
        /// Runs the queue at `db` until its first attempt has failed with a partial file, then
        /// interrupts it (the job goes back to the queue, its partial file kept).
        func interruptedAfterFirstAttempt(_ db: String) throws {
            let child = try HaulProcess.start(h.haul, ["run", "--json", "--db", db], currentDirectory: h.temp.path)
            XCTAssertTrue(child.waitForOutput("\"event\":\"retry\"", timeout: 20), "no retry was scheduled")
            kill(child.processIdentifier, SIGINT)
            let result = child.wait(timeout: 30)
            XCTAssertEqual(result.status, 130, result.stdoutText + result.stderrText)
        }
        try interruptedAfterFirstAttempt(dbB)
        try interruptedAfterFirstAttempt(h.db)
        XCTAssertEqual(h.tempFiles().count, 2, "each queue keeps its own partial file: \(h.tempFiles())")

        let finished = try haulOn(dbB, ["run", "--quiet"])
        XCTAssertEqual(finished.status, 0, finished.stdoutText + finished.stderrText)
        XCTAssertEqual(h.contents("file.bin"), bodyB, "queue B's file must be B's bytes alone")
        XCTAssertEqual(server.requests(path: "/b.bin").last?.header("Range"), "bytes=50000-", "B resumed from its own bytes")
    }

    /// A large body (1 MiB or more) is named at its head, even without a validator. Stopped
    /// before its first byte, its job goes back uncounted, the empty file left under the name;
    /// the next run looks there (the job was claimed before: `Lease.firstTry`), and with
    /// `--if-exists replace` (which moves the download through that name) still places it.
    func testALargeBodyNamedAtItsHeadThenStoppedIsPlacedByTheNextRun() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(1_500_000, seed: 41)
        server.route("/big.bin", sequence: [
            { request in FaultServer.fileResponse(body, request: request).stalledAfterHeaders(.forever) },
            FaultServer.file(body),
        ])
        XCTAssertEqual(try h.run(["add", server.url("/big.bin").absoluteString, "-d", h.out, "--if-exists", "replace"]).status, 0)
        let first = try h.start(["run", "--quiet"])
        XCTAssertTrue(RunHarness.poll(timeout: 20) { h.tempFiles().count == 1 }, "the large body was not named at its head")
        kill(first.processIdentifier, SIGINT)
        XCTAssertEqual(first.wait(timeout: 30).status, 130)
        XCTAssertEqual(try h.show(1)["attempts"] as? Int, 0, "stopped before its first byte: not counted")
        XCTAssertEqual(h.tempFiles().count, 1, "the named file stays")

        let result = try h.run(["run", "--quiet"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("big.bin"), body)
        XCTAssertEqual(h.tempFiles(), [])
        XCTAssertEqual(server.requestCount(path: "/big.bin"), 2)
    }

    func testChangedResourceIsNeverSpliced() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let versionA = runTestData(100_000, seed: 24)
        let versionB = runTestData(100_000, seed: 25)
        server.route("/doc.bin", sequence: [
            { request in FaultServer.fileResponse(versionA, request: request, etag: "\"A\"").truncated(afterBytes: 50_000) },
            FaultServer.file(versionB, etag: "\"B\""),
        ])
        try h.add([server.url("/doc.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "4"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("doc.bin"), versionB, "the file must be version B exactly")
        XCTAssertEqual(h.outputFiles(), ["doc.bin"])
        let requests = server.requests(path: "/doc.bin")
        XCTAssertEqual(requests.dropFirst().first?.ifRangeHeader, "\"A\"", "the resume names the version it continues")
    }

    /// A redirect that leads elsewhere when the job resumes (`/latest` moved on to a newer file):
    /// the bytes kept came from the first target, and a validator holds for its own resource
    /// only, so the resume starts over although both files carry the same ETag (a per-file
    /// revision counter) and the second honours Range and If-Range.
    func testAResumeRedirectedToAnotherFileStartsOver() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let v1 = runTestData(100_000, seed: 91), v2 = runTestData(100_000, seed: 92)
        let first = server.url("/files/v1.bin").absoluteString, second = server.url("/files/v2.bin").absoluteString
        server.route("/latest.bin", sequence: [
            { _ in FaultServer.Response.redirect(to: first) },
            { _ in FaultServer.Response.redirect(to: second) },
        ])
        server.route("/files/v1.bin", sequence: [
            { request in FaultServer.fileResponse(v1, request: request, etag: "\"1\"").truncated(afterBytes: 60_000) },
            FaultServer.file(v1, etag: "\"1\""),
        ])
        server.route("/files/v2.bin", FaultServer.file(v2, etag: "\"1\""))
        try h.add([server.url("/latest.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("latest.bin"), v2, "the newer file whole: never the first bytes of one and the rest of the other")
        let resumes = server.requests(path: "/files/v2.bin")
        XCTAssertEqual(resumes.map(\.rangeHeader), ["bytes=60000-", nil], "the resume was asked, refused, then the whole file fetched")
        XCTAssertEqual(h.tempFiles(), [])
        XCTAssertEqual(try h.show(1)["attempts"] as? Int, 2, "starting over spends no attempt")
    }

    /// A signed link: the redirect leads to the same file with a new signature in its query
    /// each time (a release asset's, a presigned object's). The resume goes on from the bytes kept.
    func testAResumeRedirectedToTheSameFileWithANewSignatureContinues() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(100_000, seed: 93)
        let signature = Mutex(0)
        let target = server.url("/assets/a.bin").absoluteString
        server.route("/download.bin") { _ in
            let next = signature.withLock { $0 += 1; return $0 }
            return FaultServer.Response.redirect(to: target + "?sig=\(next)")
        }
        server.route("/assets/a.bin", sequence: [
            { request in FaultServer.fileResponse(data, request: request, etag: "\"a1\"").truncated(afterBytes: 60_000) },
            FaultServer.file(data, etag: "\"a1\""),
        ])
        try h.add([server.url("/download.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("download.bin"), data)
        XCTAssertEqual(server.requests(path: "/assets/a.bin").map(\.rangeHeader), [nil, "bytes=60000-"], "the second request resumed")
    }

    /// A server that wrongly ignores If-Range: it answers `Range: bytes=N-` with `body`'s bytes
    /// from N as a 206, and any other request with the whole body, each with `headers()`.
    private static func ignoringIfRange(_ body: Data, headers: @escaping @Sendable () -> FaultServer.Headers) -> FaultServer.Handler {
        { request in
            guard let range = request.rangeHeader, range.hasPrefix("bytes="), range.hasSuffix("-"),
                  let start = Int(range.dropFirst("bytes=".count).dropLast()), start < body.count
            else { return FaultServer.Response.ok(body, headers: headers()) }
            var fields = headers()
            fields.add("Content-Range", "bytes \(start)-\(body.count - 1)/\(body.count)")
            return FaultServer.Response(status: 206, headers: fields, body: body.subdata(in: start..<body.count))
        }
    }

    /// Like above, but the server wrongly ignores If-Range and sends the rest of B as a 206: its
    /// ETag gives the change away, and the file must still be B exactly.
    func testChangedResourceBehindBrokenIfRangeIsNeverSpliced() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let versionA = runTestData(100_000, seed: 26)
        let versionB = runTestData(100_000, seed: 27)
        server.route("/doc.bin", sequence: [
            { request in FaultServer.fileResponse(versionA, request: request, etag: "\"A\"").truncated(afterBytes: 50_000) },
            Self.ignoringIfRange(versionB) { ["ETag": "\"B\""] },
        ])
        try h.add([server.url("/doc.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "4"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("doc.bin"), versionB, "the file must be version B exactly")
        XCTAssertEqual(h.outputFiles(), ["doc.bin"])
        let requests = server.requests(path: "/doc.bin")
        XCTAssertEqual(requests.map(\.rangeHeader), [nil, "bytes=50000-", nil], "resume, refused 206 of B, start over")
    }

    /// A version known by its date only (no ETag): a server that ignores If-Range and sends the
    /// rest of another version as a 206 without the date is not believed; the file is B exactly.
    func testChangedResourceKnownByDateBehindBrokenIfRangeIsNeverSpliced() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let versionA = runTestData(100_000, seed: 28)
        let versionB = runTestData(100_000, seed: 29)
        let modifiedA = "Mon, 01 Jan 2024 00:00:00 GMT"
        let now: @Sendable () -> String = { HTTPDate.format(Date()) }
        server.route("/doc.bin", sequence: [
            { _ in FaultServer.Response.ok(versionA, headers: ["Last-Modified": modifiedA, "Date": now()]).truncated(afterBytes: 50_000) },
            Self.ignoringIfRange(versionB) { ["Date": now()] },  // no Last-Modified
        ])
        try h.add([server.url("/doc.bin").absoluteString])

        let result = try h.run(["run", "--max-attempts", "4"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("doc.bin"), versionB, "the file must be version B exactly")
        XCTAssertEqual(h.outputFiles(), ["doc.bin"])
        let requests = server.requests(path: "/doc.bin")
        XCTAssertEqual(requests.dropFirst().first?.ifRangeHeader, modifiedA, "the resume names the version it continues")
        XCTAssertEqual(requests.map(\.rangeHeader), [nil, "bytes=50000-", nil], "resume, refused 206 without the date, start over")
    }
}
