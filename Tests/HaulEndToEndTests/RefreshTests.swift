import Foundation
import HaulCore
import HaulTestSupport
import Synchronization
import XCTest

/// `haul refresh`: done jobs asked again with their recorded validators; a 304 leaves the file, a
/// 200 replaces it atomically; no validator, no refetch unless --force; kept files left alone.
final class RefreshTests: XCTestCase {
    func testRefreshAsksWithValidatorsKeepsCurrentFilesAndReplacesChangedOnes() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let same = runTestData(4_000, seed: 51)
        let version = Mutex((data: runTestData(4_000, seed: 52), etag: "\"v1\""))
        let plain = runTestData(4_000, seed: 53)
        // A server that honours If-None-Match, as static servers do.
        func conditional(_ data: @escaping @Sendable () -> (data: Data, etag: String)) -> FaultServer.Handler {
            return { request in
                let (body, etag) = data()
                if request.headers["If-None-Match"] == etag { return FaultServer.Response.status(304).withHeader("ETag", etag) }
                return FaultServer.fileResponse(body, request: request, etag: etag)
            }
        }
        server.route("/same.bin", conditional { (same, "\"s1\"") })
        server.route("/changing.bin", conditional { version.withLock { $0 } })
        server.route("/plain.bin", FaultServer.file(plain))
        server.route("/kept.bin", FaultServer.file(plain))
        XCTAssertTrue(FileManager.default.createFile(atPath: h.out + "/kept.bin", contents: Data("mine".utf8)))
        try h.add(["same.bin", "changing.bin", "plain.bin", "kept.bin"].map { server.url("/\($0)").absoluteString })
        XCTAssertEqual(try h.run(["run"]).status, 0)
        let firstChanging = h.contents("changing.bin")

        let refresh = try h.run(["refresh", "--all"])
        XCTAssertEqual(refresh.status, 0, refresh.stderrText)
        XCTAssertTrue(refresh.stdoutText.contains("queued 2 jobs to be checked (2 by validator); 1 without a validator"), refresh.stdoutText)
        XCTAssertTrue(refresh.stdoutText.contains("1 kept files (yours) left alone"), refresh.stdoutText)
        let newer = runTestData(5_000, seed: 54)
        version.withLock { $0 = (newer, "\"v2\"") }
        server.resetRecording()

        let result = try h.run(["run", "--json"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requests(path: "/same.bin").map { $0.headers["If-None-Match"] }, ["\"s1\""])
        XCTAssertEqual(server.requests(path: "/changing.bin").map { $0.headers["If-None-Match"] }, ["\"v1\""])
        XCTAssertEqual(server.requestCount(path: "/plain.bin"), 0, "no validator: not fetched again without --force")
        XCTAssertEqual(server.requestCount(path: "/kept.bin"), 0)
        XCTAssertEqual(h.contents("same.bin"), same)
        XCTAssertEqual(h.contents("changing.bin"), newer, "a changed file replaces the old one")
        XCTAssertNotEqual(firstChanging, newer)
        XCTAssertEqual(h.contents("kept.bin"), Data("mine".utf8))
        let events = result.stdoutLines.compactMap(runTestJSON)
        XCTAssertEqual(events.filter { $0["event"] as? String == "unchanged" }.compactMap { $0["id"] as? Int }, [1])
        XCTAssertEqual(events.last?["unchanged"] as? Int, 1)
        XCTAssertEqual(try h.show(2)["etag"] as? String, "\"v2\"", "the new file's validator is recorded")
        XCTAssertEqual(h.tempFiles(), [])
        // Each job's history keeps the attempt that placed its first file (its record stays on
        // the job's row until the refresh), then the refresh's own.
        for (id, attempts) in [(1, ["status 200, 4000 bytes", "status 304, 0 bytes"]),
                               (2, ["status 200, 4000 bytes", "status 200, 5000 bytes"])] {
            let shown = try h.run(["show", String(id)])
            let lines = shown.stdoutLines.filter { $0.hasPrefix("  attempt ") || $0.hasPrefix("  (attempts") }
            XCTAssertEqual(lines.count, 3, "job \(id): " + shown.stdoutText)
            XCTAssertTrue(lines.first?.hasPrefix("  attempt 1: ") == true && lines.first?.hasSuffix(attempts[0]) == true, shown.stdoutText)
            XCTAssertEqual(lines.dropFirst().first, "  (attempts counted again from 1: queued again by retry, refresh or verify --fix)")
            XCTAssertTrue(lines.last?.hasPrefix("  attempt 1: ") == true && lines.last?.hasSuffix(attempts[1]) == true, shown.stdoutText)
        }

        XCTAssertEqual(try h.run(["refresh", "3", "--force"]).status, 0)
        XCTAssertEqual(try h.run(["run"]).status, 0)
        XCTAssertEqual(server.requests(path: "/plain.bin").map { $0.headers["If-None-Match"] }, [nil], "--force fetches it again")
        XCTAssertEqual(h.contents("plain.bin"), plain)
        // The user's own file where haul placed one: --force leaves it alone.
        try FileManager.default.moveItem(atPath: h.out + "/plain.bin", toPath: h.out + "/plain-from-server.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: h.out + "/plain.bin", contents: Data("my own notes".utf8)))
        server.resetRecording()
        let forced = try h.run(["refresh", "3", "--force"])
        XCTAssertEqual(forced.status, 0, forced.stderrText)
        XCTAssertTrue(forced.stdoutText.contains("queued 0 jobs") && forced.stdoutText.contains("1 changed since haul placed it (yours) left alone"),
                      forced.stdoutText)
        XCTAssertEqual(try h.run(["run"]).status, 0)
        XCTAssertEqual(server.requestCount(path: "/plain.bin"), 0)
        XCTAssertEqual(h.contents("plain.bin"), Data("my own notes".utf8), "the user's file is never replaced unasked")
        XCTAssertEqual(try h.show(3)["state"] as? String, "done")
        // A file placed by a haul that recorded no identity (before migration 0005) is told by
        // its mark: haul's own, so --force fetches it again.
        try FileManager.default.removeItem(atPath: h.out + "/plain.bin")
        try FileManager.default.moveItem(atPath: h.out + "/plain-from-server.bin", toPath: h.out + "/plain.bin")
        try Database(path: h.db).execute("UPDATE jobs SET placed_size = NULL, placed_mtime = NULL, placed_inode = NULL, placed_ctime = NULL WHERE id = 3")
        server.resetRecording()
        let unrecorded = try h.run(["refresh", "3", "--force"])
        XCTAssertTrue(unrecorded.stdoutText.contains("queued 1 job"), unrecorded.stdoutText)
        XCTAssertEqual(try h.run(["run"]).status, 0)
        XCTAssertEqual(server.requestCount(path: "/plain.bin"), 1)
        XCTAssertEqual(h.contents("plain.bin"), plain)
        XCTAssertEqual(try h.run(["refresh"]).status, 64)
    }

    /// A job whose file went beside the user's (`--if-exists rename`) is refreshed where it went:
    /// the new version replaces `NAME.1.EXT`, no `NAME.2.EXT` appears, the user's file stays.
    func testARefreshReplacesAFilePlacedBesideTheUsersWhereItWent() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let version = Mutex(runTestData(3_000, seed: 55))
        server.route("/r.bin") { request in FaultServer.fileResponse(version.withLock { $0 }, request: request, etag: "\"\(version.withLock { $0.count })\"") }
        let mine = Data("mine".utf8)
        XCTAssertTrue(FileManager.default.createFile(atPath: h.out + "/r.bin", contents: mine))
        let list = try h.temp.write("r.txt", Data("\(server.url("/r.bin").absoluteString)\n".utf8))
        XCTAssertEqual(try h.run(["add", "-i", list, "-d", h.out, "--if-exists", "rename"]).status, 0)
        XCTAssertEqual(try h.run(["run"]).status, 0)
        XCTAssertEqual(h.contents("r.1.bin"), version.withLock { $0 })

        let newer = runTestData(3_500, seed: 56)
        version.withLock { $0 = newer }
        XCTAssertEqual(try h.run(["refresh", "1"]).status, 0)
        XCTAssertEqual(try h.run(["run"]).status, 0)

        XCTAssertEqual(h.contents("r.1.bin"), newer)
        XCTAssertNil(h.contents("r.2.bin"), "no second copy")
        XCTAssertEqual(h.contents("r.bin"), mine)
        XCTAssertEqual(server.requests(path: "/r.bin").last?.headers["If-None-Match"], "\"3000\"", "asked with its validator")
    }

    /// A refresh replaces haul's own file only if it is still haul's when the new version is
    /// placed: a user who writes the file (in place, or by moving another over it) while the
    /// download runs keeps what they wrote, and the job says so (kept).
    func testAFileTheUserWritesDuringARefreshIsKept() throws {
        for how in ["in place", "moved over"] {
            let h = try RunHarness(self)
            let server = try FaultServer(host: "127.0.0.1")
            defer { server.stop() }
            let first = runTestData(6_000, seed: 57)
            let newer = runTestData(7_000, seed: 58)
            let gate = FaultServer.Gate()
            server.route("/f.bin", sequence: [
                FaultServer.file(first, etag: "\"1\""),
                { request in
                    gate.wait(timeout: 20)
                    return FaultServer.fileResponse(newer, request: request, etag: "\"2\"")
                },
            ])
            try h.add([server.url("/f.bin").absoluteString])
            XCTAssertEqual(try h.run(["run"]).status, 0, how)
            XCTAssertEqual(try h.run(["refresh", "1"]).status, 0, how)
            let child = try h.start(["run", "--json"])
            XCTAssertTrue(server.waitForRequests(count: 2, path: "/f.bin"), how)
            let mine = Data("the user's own words\n".utf8)
            if how == "in place" {
                let handle = try XCTUnwrap(FileHandle(forWritingAtPath: h.out + "/f.bin"), how)
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: mine)
                try handle.close()
            } else {
                let other = try h.temp.write("mine.bin", mine)
                XCTAssertEqual(rename(other, h.out + "/f.bin"), 0, how)
            }
            gate.open()
            let result = child.wait(timeout: 30)

            XCTAssertEqual(result.status, 0, "\(how): \(result.stdoutText)\(result.stderrText)")
            XCTAssertEqual(h.contents("f.bin"), mine, "\(how): the user's file was replaced by the refresh")
            XCTAssertEqual(h.outputFiles(), ["f.bin"], how)
            XCTAssertEqual(try h.show(1)["kept"] as? Bool, true, how)
        }
    }
}
