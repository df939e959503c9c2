import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// A folder inside the output folder swapped for a symbolic link after `haul add`, or a link
/// planted at a job's (predictable) temp file name, must not lead a download outside the output
/// folder.
final class SymlinkSwapTests: XCTestCase {
    func testALinkPlantedAtTheTempFileNameIsNotWrittenThrough() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(50_000, seed: 8)
        server.route("/a.bin", FaultServer.file(body, etag: "\"a\""))
        server.route("/b.bin", FaultServer.file(body, etag: "\"b\""))
        let victim = h.temp.path + "/outside.txt"
        let original = Data("not haul's to touch\n".utf8)
        try original.write(to: URL(fileURLWithPath: victim))
        try h.add([server.url("/a.bin").absoluteString, server.url("/b.bin").absoluteString])
        let destination = try XCTUnwrap(try h.show(1)["destination"] as? String)
        let temp = TempFile(destination: destination, jobID: 1).path
        try FileManager.default.createSymbolicLink(atPath: temp, withDestinationPath: victim)

        let result = try h.run(["run", "--max-attempts", "1"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), original, "the download was written through the link")
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: destination),
                     "the link was moved to the destination")
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("is a symbolic link"), "\(job["last_error"] ?? "nil")")
        XCTAssertEqual(try? FileManager.default.destinationOfSymbolicLink(atPath: temp), victim, "the link was not left alone")
        XCTAssertEqual(server.requestCount(path: "/a.bin"), 0, "nothing is fetched for an unsafe temp file")
        XCTAssertEqual(h.contents("b.bin"), body, "the other job is unaffected")
    }

    /// A hard link at the temp file's name shares its inode with a file that may lie outside the
    /// output folder: writing into it would change that file.
    func testAHardLinkPlantedAtTheTempFileNameIsNotWrittenInto() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(50_000, seed: 9)
        server.route("/a.bin", FaultServer.file(body, etag: "\"a\""))
        let victim = h.temp.path + "/outside.txt"
        let original = Data("not haul's to touch\n".utf8)
        try original.write(to: URL(fileURLWithPath: victim))
        try h.add([server.url("/a.bin").absoluteString])
        let destination = try XCTUnwrap(try h.show(1)["destination"] as? String)
        let temp = TempFile(destination: destination, jobID: 1).path
        XCTAssertEqual(link(victim, temp), 0, String(cString: strerror(errno)))

        let result = try h.run(["run"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), original, "the download was written into the shared inode")
        XCTAssertNil(h.contents("a.bin"), "the shared inode was renamed into place")
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("other hard links"), "\(job["last_error"] ?? "nil")")
    }

    /// A FIFO at the temp file's name (or at an orphaned temp file's name) must not block the run.
    func testAFIFOPlantedAtATempFileNameDoesNotHangTheRun() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(5_000, seed: 10)
        server.route("/a.bin", FaultServer.file(body, etag: "\"a\""))
        server.route("/b.bin", FaultServer.file(body, etag: "\"b\""))
        try h.add([server.url("/a.bin").absoluteString, server.url("/b.bin").absoluteString])
        let destination = try XCTUnwrap(try h.show(1)["destination"] as? String)
        let temp = TempFile(destination: destination, jobID: 1).path
        XCTAssertEqual(mkfifo(temp, 0o600), 0, String(cString: strerror(errno)))
        let orphan = h.out + "/" + TempFile.prefix + "99-abc" + TempFile.suffix  // no job 99
        XCTAssertEqual(mkfifo(orphan, 0o600), 0, String(cString: strerror(errno)))

        let result = try h.run(["run"], timeout: 20)

        XCTAssertFalse(result.timedOut, "a FIFO blocked the run")
        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("is not a regular file"), "\(job["last_error"] ?? "nil")")
        XCTAssertEqual(h.contents("b.bin"), body, "the other job is unaffected")
    }

    func testAFolderSwappedForALinkAfterAddIsNotFollowed() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(4096, seed: 7)
        server.route("/a.bin", FaultServer.file(body, etag: "\"a\""))
        server.route("/b.bin", FaultServer.file(body, etag: "\"b\""))
        let outside = h.temp.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: h.out + "/sub", withIntermediateDirectories: true)
        try h.add([server.url("/a.bin").absoluteString + " out=sub/a.bin",
                   server.url("/b.bin").absoluteString + " out=safe/b.bin"])

        // After the add: sub/ becomes a link to a folder outside the output folder.
        try FileManager.default.removeItem(atPath: h.out + "/sub")
        try FileManager.default.createSymbolicLink(atPath: h.out + "/sub", withDestinationPath: outside)

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside), [],
                       "the download followed the link out of the output folder")
        XCTAssertEqual(server.requestCount(path: "/a.bin"), 0, "nothing is fetched for an unsafe destination")
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("symbolic link"), "\(job["last_error"] ?? "nil")")
        XCTAssertEqual(h.contents("safe/b.bin"), body, "the other job is unaffected")
    }
}
