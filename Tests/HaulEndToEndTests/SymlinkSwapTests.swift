import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// A folder inside the output folder swapped for a symbolic link after `haul add`, or a link
/// planted at a job's (predictable) temp file name, must not lead a download outside the output
/// folder.
final class SymlinkSwapTests: XCTestCase {
    /// Two queued jobs (a.bin, b.bin) and a file outside the output folder. A first run is
    /// killed (SIGKILL) while job 1's request waits for its body, so the next attempt looks for
    /// a temp file to resume (a first attempt does not: see the last test); `plant` then puts
    /// something at job 1's temp file name, and haul runs again. Checks what every such case
    /// shares: the run ends in failure, the outside file is untouched, job 1 failed with `reason`
    /// without another request, and job 2 finished.
    private func runWithSomethingPlantedAtTheTempName(
        reason: String, plant: (_ temp: String, _ outside: String) throws -> Void,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (h: RunHarness, temp: String, outside: String) {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(50_000, seed: 8)
        server.route("/a.bin", sequence: [
            { request in FaultServer.fileResponse(body, request: request, etag: "\"a\"").stalledAfterHeaders(.forever) },
            FaultServer.file(body, etag: "\"a\""),
        ])
        server.route("/b.bin", FaultServer.file(body, etag: "\"b\""))
        let outside = h.temp.path + "/outside.txt"
        let original = Data("not haul's to touch\n".utf8)
        try original.write(to: URL(fileURLWithPath: outside))
        try h.add([server.url("/a.bin").absoluteString, server.url("/b.bin").absoluteString])
        let destination = try XCTUnwrap(try h.show(1)["destination"] as? String)
        let temp = try h.tempFile(destination, job: 1).path
        let first = try h.start(["run"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/a.bin", timeout: 10), file: file, line: line)
        kill(first.processIdentifier, SIGKILL)
        XCTAssertEqual(first.wait(timeout: 10).status, SIGKILL, file: file, line: line)
        try plant(temp, outside)

        let result = try h.run(["run"], timeout: 20)

        XCTAssertFalse(result.timedOut, "the run never ended", file: file, line: line)
        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText, file: file, line: line)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: outside)), original, "the outside file was written", file: file, line: line)
        XCTAssertNil(h.contents("a.bin"), "something was placed for the refused job", file: file, line: line)
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: destination), "a link was moved to the destination",
                     file: file, line: line)
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed", file: file, line: line)
        XCTAssertTrue((job["last_error"] as? String ?? "").contains(reason), "\(job["last_error"] ?? "nil")", file: file, line: line)
        XCTAssertEqual(server.requestCount(path: "/a.bin"), 1, "something was fetched for a refused temp file", file: file, line: line)
        XCTAssertEqual(h.contents("b.bin"), body, "the other job is affected", file: file, line: line)
        return (h, temp, outside)
    }

    /// An output folder that did not exist at `haul add`, moved into place afterwards with a
    /// link inside it that leads outside: the link is older than the job, so its age says
    /// nothing (the add never saw it); it leads outside the job's output folder, so it is not
    /// followed, and nothing is fetched or written.
    func testAnOldLinkInAFolderMovedIntoPlaceAfterTheAddIsNotFollowed() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        server.route("/a.bin", FaultServer.file(runTestData(5_000, seed: 9), etag: "\"a\""))
        let outside = try h.temp.makeDirectory("outside")
        let staging = try h.temp.makeDirectory("staging")
        try FileManager.default.createSymbolicLink(atPath: staging + "/sub", withDestinationPath: outside)
        let later = h.temp.path + "/later"
        let added = try h.run(["add", "-d", later, "\(server.url("/a.bin").absoluteString) out=sub/a.bin"])
        XCTAssertEqual(added.status, 0, added.stderrText)
        XCTAssertEqual(rename(staging, later), 0, String(cString: strerror(errno)))

        let result = try h.run(["run"], timeout: 20)

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside), [], "written outside the output folder")
        XCTAssertEqual(server.requestCount(path: "/a.bin"), 0, "fetched for a destination outside the output folder")
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "failed")
        XCTAssertTrue((job["last_error"] as? String ?? "").contains("leads outside the output folder"), "\(job["last_error"] ?? "nil")")
    }

    func testALinkPlantedAtTheTempFileNameIsNotWrittenThrough() throws {
        let (h, temp, outside) = try runWithSomethingPlantedAtTheTempName(reason: "is a symbolic link") { temp, outside in
            try FileManager.default.createSymbolicLink(atPath: temp, withDestinationPath: outside)
        }
        withExtendedLifetime(h) {  // its folder holds the link
            XCTAssertEqual(try? FileManager.default.destinationOfSymbolicLink(atPath: temp), outside, "the link was not left alone")
        }
    }

    /// A hard link at the temp file's name shares its inode with a file that may lie outside the
    /// output folder: writing into it would change that file.
    func testAHardLinkPlantedAtTheTempFileNameIsNotWrittenInto() throws {
        _ = try runWithSomethingPlantedAtTheTempName(reason: "other hard links") { temp, outside in
            XCTAssertEqual(link(outside, temp), 0, String(cString: strerror(errno)))
        }
    }

    /// A FIFO at the temp file's name (or at an orphaned temp file's name) must not block the run.
    func testAFIFOPlantedAtATempFileNameDoesNotHangTheRun() throws {
        _ = try runWithSomethingPlantedAtTheTempName(reason: "is not a regular file") { temp, _ in
            XCTAssertEqual(mkfifo(temp, 0o600), 0, String(cString: strerror(errno)))
            let orphan = (temp as NSString).deletingLastPathComponent + "/" + TempFile.prefix + "99-abc" + TempFile.suffix  // no job 99
            XCTAssertEqual(mkfifo(orphan, 0o600), 0, String(cString: strerror(errno)))
        }
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

    /// A job's first attempt has no earlier temp file to resume, so it does not look at the
    /// name (see `TempFile.open(unnamed:lookForEarlier:)`): what is planted there is neither
    /// written through nor removed, and the download is placed.
    func testAFirstAttemptLeavesALinkPlantedAtTheTempFileNameAlone() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let body = runTestData(50_000, seed: 9)
        server.route("/a.bin", FaultServer.file(body, etag: "\"a\""))
        let outside = h.temp.path + "/outside.txt"
        let original = Data("not haul's to touch\n".utf8)
        try original.write(to: URL(fileURLWithPath: outside))
        try h.add([server.url("/a.bin").absoluteString])
        let destination = try XCTUnwrap(try h.show(1)["destination"] as? String)
        let temp = try h.tempFile(destination, job: 1).path
        try FileManager.default.createSymbolicLink(atPath: temp, withDestinationPath: outside)

        let result = try h.run(["run"])

        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("a.bin"), body)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: outside)), original, "the outside file was written")
        XCTAssertEqual(try? FileManager.default.destinationOfSymbolicLink(atPath: temp), outside, "the link was not left alone")
        XCTAssertEqual(server.requestCount(path: "/a.bin"), 1)
    }
}
