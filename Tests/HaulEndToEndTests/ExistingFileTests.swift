import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// A file the user already had at a destination: kept by default (no request), replaced or
/// renamed beside only when asked, and never lost to a race with the download.
final class ExistingFileTests: XCTestCase {
    private let mine = Data("the user's own file, not to be touched\n".utf8)

    private func plant(_ h: RunHarness, _ name: String, _ data: Data? = nil) throws -> Date {
        let path = h.out + "/" + name
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: data ?? mine))
        return try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
    }

    private func modified(_ h: RunHarness, _ name: String) -> Date? {
        try? FileManager.default.attributesOfItem(atPath: h.out + "/" + name)[.modificationDate] as? Date
    }

    /// A folder at a destination fails its job before any request, whatever `--if-exists`
    /// says, naming it and what to do; the folder is left as it was. (Placement refused it only
    /// after each attempt's whole download.)
    func testAFolderAtADestinationFailsItsJobWithoutARequest() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(5_000, seed: 4)
        for name in ["a.bin", "b.bin", "c.bin"] { server.route("/\(name)", FaultServer.file(body)) }
        for name in ["a.bin", "b.bin"] {
            try FileManager.default.createDirectory(atPath: h.out + "/" + name + "/inside", withIntermediateDirectories: true)
        }
        XCTAssertEqual(try h.run(["add", server.url("/a.bin").absoluteString, server.url("/c.bin").absoluteString, "-d", h.out]).status, 0)
        XCTAssertEqual(try h.run(["add", server.url("/b.bin").absoluteString, "-d", h.out, "--if-exists", "replace"]).status, 0)

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requestCount(path: "/a.bin") + server.requestCount(path: "/b.bin"), 0, "a folder's job made a request")
        XCTAssertEqual(h.contents("c.bin"), body)
        for (id, name) in [(1, "a.bin"), (3, "b.bin")] {
            let job = try h.show(id)
            XCTAssertEqual(job["state"] as? String, "failed", name)
            let reason = job["last_error"] as? String ?? ""
            XCTAssertTrue(reason.contains("\(name) is a folder; remove it or give the URL another out= name, then haul retry \(id)"), reason)
            XCTAssertTrue(FileManager.default.fileExists(atPath: h.out + "/" + name + "/inside"), name)
        }
        XCTAssertEqual(h.tempFiles(), [])
    }

    /// By default the file there is kept: no request is made, the job ends done as kept, the
    /// summary and `show` say so, and the file is untouched. With a sha256 that it matches, the
    /// same; with one it does not match, the job fails saying so and the file is left alone.
    func testAFileAlreadyThereIsKeptWithoutARequestAndChecksumsAreHeldToIt() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let theirs = runTestData(5_000, seed: 3)
        for name in ["a.bin", "b.bin", "c.bin", "new.bin"] { server.route("/\(name)", FaultServer.file(theirs)) }
        let planted = try plant(h, "a.bin")
        _ = try plant(h, "b.bin")
        _ = try plant(h, "c.bin")
        try h.add([server.url("/a.bin").absoluteString,
                   "\(server.url("/b.bin").absoluteString) sha256=\(runTestSHA256(mine))",
                   "\(server.url("/c.bin").absoluteString) sha256=\(runTestSHA256(theirs))",
                   server.url("/new.bin").absoluteString])

        let result = try h.run(["run", "--json"])

        XCTAssertEqual(result.status, 1, "c.bin failed: \(result.stdoutText)")
        for name in ["a.bin", "b.bin", "c.bin"] {
            XCTAssertEqual(h.contents(name), mine, "\(name) was changed")
            XCTAssertEqual(server.requestCount(path: "/\(name)"), 0, "\(name) was requested")
        }
        XCTAssertEqual(modified(h, "a.bin"), planted)
        XCTAssertEqual(h.contents("new.bin"), theirs)
        XCTAssertEqual(h.tempFiles(), [])
        let events = result.stdoutLines.compactMap(runTestJSON)
        XCTAssertEqual(events.filter { $0["event"] as? String == "kept" }.compactMap { $0["id"] as? Int }.sorted(), [1, 2])
        let summary = try XCTUnwrap(events.last)
        XCTAssertEqual(summary["kept"] as? Int, 2)
        XCTAssertEqual(summary["done"] as? Int, 3)
        let failed = try h.show(3)
        XCTAssertEqual(failed["state"] as? String, "failed")
        XCTAssertTrue((failed["last_error"] as? String ?? "").contains("does not match the sha256 given"), "\(failed)")
        XCTAssertEqual(try h.show(1)["kept"] as? Bool, true)
        XCTAssertEqual(try h.show(4)["kept"] as? Bool, false)
        let shown = try h.run(["show", "1"]).stdoutText
        XCTAssertTrue(shown.contains("done (kept the file already there, not downloaded)"), shown)
    }

    /// `--if-exists replace` downloads over the file; `rename` places the download beside it as
    /// NAME.1.EXT (NAME.2.EXT when that is taken too), and `show` says where.
    func testReplaceDownloadsOverTheFileAndRenamePlacesTheDownloadBesideIt() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let theirs = runTestData(5_000, seed: 4)
        for name in ["r.bin", "n.tar.gz", "plain"] { server.route("/\(name)", FaultServer.file(theirs)) }
        _ = try plant(h, "r.bin")
        _ = try plant(h, "n.tar.gz")
        _ = try plant(h, "n.tar.1.gz")
        _ = try plant(h, "plain")
        let list = try h.temp.write("replace.txt", Data("\(server.url("/r.bin").absoluteString)\n".utf8))
        XCTAssertEqual(try h.run(["add", "-i", list, "-d", h.out, "--if-exists", "replace"]).status, 0)
        let renamed = try h.temp.write("rename.txt", Data("\(server.url("/n.tar.gz").absoluteString)\n\(server.url("/plain").absoluteString)\n".utf8))
        XCTAssertEqual(try h.run(["add", "-i", renamed, "-d", h.out, "--if-exists", "rename"]).status, 0)

        let result = try h.run(["run"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("r.bin"), theirs, "replace downloads over it")
        XCTAssertEqual(h.contents("n.tar.gz"), mine)
        XCTAssertEqual(h.contents("n.tar.1.gz"), mine)
        XCTAssertEqual(h.contents("n.tar.2.gz"), theirs, "rename takes the first free number")
        XCTAssertEqual(h.contents("plain"), mine)
        XCTAssertEqual(h.contents("plain.1"), theirs)
        XCTAssertEqual(try h.show(2)["placed_at"] as? String, h.out + "/n.tar.2.gz")
        // What haul placed is recorded, so that it knows its own file later, and only that.
        let queue = try JobQueue(path: h.db, mode: .mustExist)
        let replaced = try XCTUnwrap(try queue.job(id: 1))
        XCTAssertEqual(ExistingFile.examine(replaced.destination, placed: replaced.placed), .haulsOwn)
        let beside = try XCTUnwrap(try queue.job(id: 2))
        XCTAssertEqual(ExistingFile.examine(beside.destination, placed: beside.placed), .usersFile(size: Int64(mine.count)))
        XCTAssertEqual(h.tempFiles(), [])
        XCTAssertEqual(try h.run(["add", "-d", h.out, "--if-exists", "sometimes", "http://127.0.0.1:9/x"]).status, 64)
    }

    /// A file that appears at the destination while its download runs is kept (the move into
    /// place never replaces it), and the download is removed; `run --if-exists replace`
    /// overrides what the jobs were added with.
    func testAFileAppearingDuringTheDownloadIsKeptAndRunCanOverrideThePolicy() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let theirs = runTestData(5_000, seed: 5)
        let gate = FaultServer.Gate()
        server.route("/late.bin") { request in
            gate.wait(timeout: 20)
            return FaultServer.fileResponse(theirs, request: request)
        }
        server.route("/over.bin", FaultServer.file(theirs))
        try h.add([server.url("/late.bin").absoluteString])
        let child = try h.start(["run", "--json"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/late.bin"))
        _ = try plant(h, "late.bin")
        gate.open()
        let result = child.wait(timeout: 30)

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("late.bin"), mine, "the file that appeared is kept")
        XCTAssertEqual(h.outputFiles(), ["late.bin"], "the download is gone, no temp file left")
        XCTAssertEqual(try h.show(1)["kept"] as? Bool, true)

        _ = try plant(h, "over.bin")
        try h.add([server.url("/over.bin").absoluteString])
        XCTAssertEqual(try h.run(["run", "--if-exists", "replace"]).status, 0)
        XCTAssertEqual(h.contents("over.bin"), theirs)
    }

    /// A file haul moved into place whose record a kill -9 prevented carries haul's mark for its
    /// job: the next run knows it as its own (it replaces it, instead of placing a copy beside
    /// it under rename, or keeping it as the user's under skip), also where rename put it
    /// beside the user's file (`NAME.1.EXT`: replaced there, no `NAME.2.EXT`). A file with
    /// another mark is the user's.
    func testAFileHaulPlacedButDidNotRecordIsKnownByItsMark() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let theirs = runTestData(5_000, seed: 6)
        server.route("/ours.bin", FaultServer.file(theirs))
        server.route("/other.bin", FaultServer.file(theirs))
        server.route("/beside.bin", FaultServer.file(theirs))
        let list = try h.temp.write("marks.txt", Data(["/ours.bin", "/other.bin", "/beside.bin"].map { server.url($0).absoluteString + "\n" }.joined().utf8))
        XCTAssertEqual(try h.run(["add", "-i", list, "-d", h.out, "--if-exists", "rename"]).status, 0)
        let queue = try JobQueue(path: h.db, mode: .mustExist)
        let ours = try XCTUnwrap(try queue.job(id: 1))
        _ = try plant(h, "ours.bin")
        _ = try plant(h, "other.bin")
        try setMark(h.out + "/ours.bin", ExistingFile.mark(jobID: ours.id, createdAt: ours.createdAt))
        try setMark(h.out + "/other.bin", ExistingFile.mark(jobID: 2, createdAt: 0))
        // Job 3's file went beside the user's (under rename), then a kill came before the record.
        let beside = try XCTUnwrap(try queue.job(id: 3))
        _ = try plant(h, "beside.bin")
        _ = try plant(h, "beside.1.bin", Data("an older download".utf8))
        try setMark(h.out + "/beside.1.bin", ExistingFile.mark(jobID: 3, createdAt: 0))  // another job's mark
        _ = try plant(h, "beside.2.bin", Data("haul's, unrecorded".utf8))
        try setMark(h.out + "/beside.2.bin", ExistingFile.mark(jobID: beside.id, createdAt: beside.createdAt))
        // As the killed run left them: each job claimed once (a job never claimed placed nothing,
        // and is not looked for beside its destination: see `Lease.firstTry`).
        try Database(path: h.db, mode: .mustExist).execute("UPDATE jobs SET claims = 1")

        XCTAssertEqual(try h.run(["run"]).status, 0)

        XCTAssertEqual(h.contents("ours.bin"), theirs, "haul's own file is replaced in place")
        XCTAssertNil(h.contents("ours.1.bin"), "no copy beside haul's own file")
        XCTAssertEqual(h.contents("other.bin"), mine, "another mark: the user's file")
        XCTAssertEqual(h.contents("other.1.bin"), theirs)
        XCTAssertEqual(h.contents("beside.2.bin"), theirs, "haul's own file beside the user's is replaced where it is")
        XCTAssertNil(h.contents("beside.3.bin"), "no copy beside haul's own file")
        XCTAssertEqual(h.contents("beside.bin"), mine)
        XCTAssertEqual(h.contents("beside.1.bin"), Data("an older download".utf8))
        XCTAssertEqual(try h.show(3)["placed_at"] as? String, h.out + "/beside.2.bin", "the record says where it went")
    }

    /// Sets user.haul.job on `path` (with python3, as the test support has no xattr call).
    private func setMark(_ path: String, _ value: String) throws {
        let python = try XCTUnwrap(HaulProcess.tool("python3"), "python3 is needed")
        let result = try HaulProcess.run(python,
                                         ["-c", "import os,sys; os.setxattr(sys.argv[1], 'user.haul.job', sys.argv[2].encode())", path, value])
        guard result.status == 0 else { throw XCTSkip("cannot set an extended attribute on \(path): \(result.stderrText)") }
    }
}
