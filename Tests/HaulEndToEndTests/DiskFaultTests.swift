import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// A full disk (a small tmpfs) and a file-size limit (RLIMIT_FSIZE), while haul writes a temp
/// file and while it writes its database: a clear message naming the file and the system's reason,
/// the queue intact, nothing partial at a destination, and everything finished once there is room.
final class DiskFaultTests: XCTestCase {
    private static let noSpace = "No space left on device"

    /// The temp file path of job `id` (as haul names it), from the job's destination.
    private func tempPath(_ h: RunHarness, job id: Int) throws -> String {
        let destination = try XCTUnwrap(try h.show(id)["destination"] as? String)
        return try h.tempFile(destination, job: id).path
    }

    private func outputFilesExceptFiller(_ h: RunHarness) -> [String] {
        h.outputFiles().filter { $0 != ".filler" }
    }

    // MARK: Temp files

    /// The output folder's disk fills up while the third file is written. A full disk is not the
    /// job's fault: no attempt is used, the folder is tried again at growing intervals, and as
    /// nothing else is left to do the run stops with exit 1, saying once what is wrong and what to
    /// do; the job stays queued with its partial file. Once space is freed, `run` finishes it
    /// byte for byte (no `retry` needed).
    func testDiskFullStopsTheRunWithoutUsingAttemptsAndTheNextRunFinishesTheJob() throws {
        let h = try RunHarness(self)
        let disk = try SmallDisk.mount(at: h.out, bytes: 4 << 20)
        defer { disk.unmount(); withExtendedLifetime(h) {} }
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        // Larger than `DownloadAttempt.heldLimit`, so written as they come (a small body waits in
        // memory until its batch is placed, and the big file's bytes could take its room first).
        let first = runTestData(100_000, seed: 41)
        let second = runTestData(100_000, seed: 42)
        let big = runTestData(1_500_000, seed: 43)
        server.route("/first.bin", FaultServer.file(first, etag: "\"f1\""))
        server.route("/second.bin", FaultServer.file(second, etag: "\"f2\""))
        server.route("/big.bin", FaultServer.file(big, etag: "\"big\""))
        try h.add([server.url("/first.bin").absoluteString, server.url("/second.bin").absoluteString,
                   "\(server.url("/big.bin").absoluteString) sha256=\(runTestSHA256(big))"])
        try disk.fill(leaving: 400 * 1024)

        // One transfer at a time, in order: the small files fit, the big one cannot.
        let result = try h.run(["run", "-j", "1", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        let temp = try tempPath(h, job: 3)
        let said = (result.stdoutText + result.stderrText).components(separatedBy: "cannot write \(temp): \(Self.noSpace); the disk (or quota) is full: free some space")
        XCTAssertEqual(said.count, 3, "said once as it happened and once when the run stopped, naming the file, the reason and the fix: \(result.stdoutText) \(result.stderrText)")
        XCTAssertTrue(result.stderrText.contains("haul: stopped: cannot write in \(h.out)"), result.stderrText)
        XCTAssertEqual(server.requestCount(path: "/big.bin"), 2, "tried twice (--max-attempts 2), at a growing interval")
        let job = try h.show(3)
        XCTAssertEqual(job["state"] as? String, "queued")
        XCTAssertEqual(job["attempts"] as? Int, 0, "a full disk uses no attempt")
        XCTAssertNil(h.contents("big.bin"), "a partial file was placed at the destination")
        XCTAssertEqual(h.contents("first.bin"), first)
        XCTAssertEqual(h.contents("second.bin"), second)
        XCTAssertEqual(try h.counts(), ["queued": 1, "running": 0, "done": 2, "failed": 0, "cancelled": 0])
        try assertDatabaseSound(h.db)

        disk.free()
        let again = try h.run(["run"])

        XCTAssertEqual(again.status, 0, again.stdoutText + again.stderrText)
        XCTAssertEqual(h.contents("big.bin"), big)
        XCTAssertEqual(outputFilesExceptFiller(h), ["big.bin", "first.bin", "second.bin"])
        XCTAssertEqual(try h.counts()["done"], 3)
        try assertDatabaseSound(h.db)
    }

    /// A small file's bytes are written when it is placed (see `DownloadAttempt.heldLimit`): a
    /// disk full then is the machine's fault as it is mid-body, no attempt is used, the run
    /// stops saying once what is wrong, and the next run places the file.
    func testASmallFileThatCannotBeWrittenWhenPlacedUsesNoAttempt() throws {
        let h = try RunHarness(self)
        let disk = try SmallDisk.mount(at: h.out, bytes: 4 << 20)
        defer { disk.unmount(); withExtendedLifetime(h) {} }
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let small = runTestData(30_000, seed: 44)
        server.route("/small.bin", FaultServer.file(small, etag: "\"s1\""))
        try h.add([server.url("/small.bin").absoluteString])
        try disk.fill(leaving: 0)

        let result = try h.run(["run", "--max-attempts", "2"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        let temp = try tempPath(h, job: 1)
        XCTAssertTrue((result.stdoutText + result.stderrText).contains("cannot write \(temp): \(Self.noSpace); the disk (or quota) is full: free some space"),
                      result.stdoutText + result.stderrText)
        XCTAssertTrue(result.stderrText.contains("haul: stopped: cannot write in \(h.out)"), result.stderrText)
        let job = try h.show(1)
        XCTAssertEqual(job["state"] as? String, "queued")
        XCTAssertEqual(job["attempts"] as? Int, 0, "a full disk uses no attempt")
        XCTAssertNil(h.contents("small.bin"))

        disk.free()
        let again = try h.run(["run"])
        XCTAssertEqual(again.status, 0, again.stdoutText + again.stderrText)
        XCTAssertEqual(h.contents("small.bin"), small)
    }

    /// The disk fills mid-body; the run says so once and the job waits, parked, its partial file
    /// kept and no attempt used. Space comes back while it waits: the same run tries the folder
    /// again, resumes the partial file (Range + If-Range) and places it byte for byte.
    func testSpaceFreedWhileAJobWaitsForTheFolderTheSameRunResumesAndFinishesExactly() throws {
        let h = try RunHarness(self)
        let disk = try SmallDisk.mount(at: h.out, bytes: 4 << 20)
        defer { disk.unmount(); withExtendedLifetime(h) {} }
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let big = runTestData(1_200_000, seed: 44)
        server.route("/big.bin", FaultServer.file(big, etag: "\"big-44\""))
        try h.add(["\(server.url("/big.bin").absoluteString) sha256=\(runTestSHA256(big))"])
        try disk.fill(leaving: 300 * 1024)

        let child = try h.start(["run", "--json", "--max-attempts", "8"])
        let sawWarning = child.waitForOutput("cannot write in \(h.out)", timeout: 20)
        disk.free()
        let result = child.wait(timeout: 60)

        XCTAssertTrue(sawWarning, "no warning: \(result.stdoutText) \(result.stderrText)")
        XCTAssertEqual(result.status, 0, result.stdoutText + result.stderrText)
        XCTAssertEqual(h.contents("big.bin"), big)
        XCTAssertEqual(h.tempFiles(), [])
        let warnings = result.stdoutLines.compactMap(runTestJSON).filter { ($0["message"] as? String ?? "").contains("cannot write in") }
        XCTAssertEqual(warnings.count, 1, "said once: \(result.stdoutText)")
        let reason = warnings.first?["message"] as? String ?? ""
        XCTAssertTrue(reason.contains(Self.noSpace) && reason.contains(TempFile.prefix + "1-") && reason.contains("free some space"), "reason: \(reason)")
        XCTAssertFalse(result.stdoutText.contains("\"event\":\"retry\""), "no retry: the job waited for the folder")
        let resumed = server.requests(path: "/big.bin").dropFirst().filter {
            ($0.rangeHeader ?? "bytes=0-") != "bytes=0-"
        }
        XCTAssertFalse(resumed.isEmpty, "the bytes written before the disk filled were not resumed: \(server.requests(path: "/big.bin"))")
        XCTAssertTrue(resumed.allSatisfy { $0.ifRangeHeader == "\"big-44\"" })
        XCTAssertEqual(try h.show(1)["attempts"] as? Int, 1, "the wait used no attempt")
        try assertDatabaseSound(h.db)
    }

    /// 50 jobs for a read-only output folder: no job is failed and none uses an attempt; no
    /// request is made (the temp file cannot be created); the run says once what is wrong and
    /// how to mend it, tries the folder at growing intervals, then stops with exit 1.
    func testAReadOnlyOutputFolderFailsNoJobAndStopsTheRunSayingHowToMendIt() throws {
        let h = try RunHarness(self)
        let disk = try SmallDisk.mount(at: h.out, bytes: 4 << 20)
        defer { disk.unmount(); withExtendedLifetime(h) {} }
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        server.setFallback(FaultServer.file(runTestData(1_000, seed: 45)))
        try h.add((1...50).map { server.url("/ro\($0).bin").absoluteString })
        try disk.remount(readOnly: true)

        let result = try h.run(["run", "--max-attempts", "3"])

        XCTAssertEqual(result.status, 1, result.stdoutText + result.stderrText)
        XCTAssertEqual(server.requestCount(), 0)
        XCTAssertEqual(try h.counts(), ["queued": 50, "running": 0, "done": 0, "failed": 0, "cancelled": 0])
        XCTAssertEqual(result.stdoutLines.filter { $0.contains("cannot write in \(h.out)") }.count, 1, "said once: \(result.stdoutText)")
        XCTAssertTrue(result.stderrText.contains("haul: stopped: cannot write in \(h.out)")
                      && result.stderrText.contains("remount it read-write") && result.stderrText.contains("tried 3 times"), result.stderrText)
        XCTAssertEqual(try h.show(1)["attempts"] as? Int, 0)

        try disk.remount(readOnly: false)
        XCTAssertEqual(try h.run(["run"]).status, 0)
        XCTAssertEqual(try h.counts()["done"], 50)
    }

    /// A file-size limit (`ulimit -f`) makes writes fail with EFBIG: haul must report it like any
    /// write error ("File too large"), not die of SIGXFSZ, and finish once the limit is gone.
    func testFileSizeLimitIsAReportedWriteErrorNotAFatalSignal() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let big = runTestData(2_000_000, seed: 45)
        server.route("/big.bin", FaultServer.file(big, etag: "\"big-45\""))
        try h.add([server.url("/big.bin").absoluteString])

        let limited = try Restricted.withFileSizeLimit(1 << 20, h.haul, ["run", "--max-attempts", "1", "--db", h.db])
        let result = try run(limited, in: h.temp.path)

        XCTAssertEqual(result.status, 1, "killed by a signal? \(result.stdoutText) \(result.stderrText)")
        let temp = try tempPath(h, job: 1)
        XCTAssertTrue(result.stdoutText.contains("cannot write \(temp): File too large"), result.stdoutText)
        XCTAssertNil(h.contents("big.bin"))
        XCTAssertEqual(h.tempFiles(), [])
        try assertDatabaseSound(h.db)

        XCTAssertEqual(try h.run(["retry", "--failed"]).status, 0)
        let again = try h.run(["run"])
        XCTAssertEqual(again.status, 0, again.stdoutText + again.stderrText)
        XCTAssertEqual(h.contents("big.bin"), big)
    }

    // MARK: The database

    /// The database's disk is full (to the last byte, then with room for SQLite's shared-memory
    /// file but not for a transaction): `add`, `run` and `get` fail with one line naming the
    /// database and the reason, exit 1, fetch nothing and change nothing. Once space is freed,
    /// everything works.
    func testDatabaseOnAFullDiskFailsClearlyChangesNothingAndWorksOnceFreed() throws {
        let directory = try makeTempDirectory()
        let disk = try SmallDisk.mount(at: try directory.makeDirectory("dbdisk"), bytes: 1 << 20)
        defer { disk.unmount(); withExtendedLifetime(directory) {} }
        let db = disk.path + "/q.db"
        let out = try directory.makeDirectory("out")
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let one = runTestData(50_000, seed: 46)
        let two = runTestData(60_000, seed: 47)
        server.route("/one.bin", FaultServer.file(one))
        server.route("/two.bin", FaultServer.file(two))
        let urlOne = server.url("/one.bin").absoluteString
        let urlTwo = server.url("/two.bin").absoluteString
        XCTAssertEqual(try haul(["add", "--db", db, "-d", out, urlOne], in: directory.path).status, 0)
        let before = try haul(["list", "--db", db, "--json"], in: directory.path).stdoutText
        let many = try directory.write("many.txt", Data((0..<2000).map { "\(urlTwo)?n=\($0) out=many/\($0).bin" }.joined(separator: "\n").utf8))

        for leaving in [0, 8 * 1024] {  // nothing, and less than one transaction needs (4 KiB pages)
            disk.free()
            try disk.fill(leaving: leaving)
            let attempts: [[String]] = [
                ["add", "--db", db, "-d", out, "-i", many],
                ["run", "--db", db],
                ["get", "--db", db, "-d", out, urlTwo],
            ]
            for arguments in attempts {
                let result = try haul(arguments, in: directory.path)
                assertOneLineFailure(result, naming: db, ["the disk is full", Self.noSpace, "free some space"],
                                     "\(arguments[0]) with \(leaving) bytes free")
            }
        }
        disk.free()

        XCTAssertEqual(server.requestCount(), 0, "a run on a full database disk fetched something")
        XCTAssertEqual(names(in: out), [])
        try assertDatabaseSound(db)
        XCTAssertEqual(try haul(["list", "--db", db, "--json"], in: directory.path).stdoutText, before, "the queue changed")

        let added = try haul(["add", "--db", db, "-d", out, urlTwo], in: directory.path)
        XCTAssertEqual(added.status, 0, added.stderrText)
        let run = try haul(["run", "--db", db], in: directory.path)
        XCTAssertEqual(run.status, 0, run.stdoutText + run.stderrText)
        XCTAssertEqual(FileManager.default.contents(atPath: out + "/one.bin"), one)
        XCTAssertEqual(FileManager.default.contents(atPath: out + "/two.bin"), two)
        try assertDatabaseSound(db)
    }

    /// The database can hold no more bytes (`ulimit -f` below its size): the same clear error,
    /// with the system's reason, and no damage.
    func testDatabaseBeyondAFileSizeLimitFailsClearlyWithoutDamage() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let out = try directory.makeDirectory("out")
        XCTAssertEqual(try haul(["add", "--db", db, "-d", out, "http://127.0.0.1:9/a"], in: directory.path).status, 0)
        let before = try haul(["list", "--db", db, "--json"], in: directory.path).stdoutText
        let haulBinary = try haulExecutable()

        for arguments in [["add", "--db", db, "-d", out, "http://127.0.0.1:9/b"], ["run", "--db", db]] {
            let result = try run(try Restricted.withFileSizeLimit(4096, haulBinary, arguments), in: directory.path)
            assertOneLineFailure(result, naming: db, ["File too large", "the queue is intact"], arguments[0])
        }
        try assertDatabaseSound(db)
        XCTAssertEqual(try haul(["list", "--db", db, "--json"], in: directory.path).stdoutText, before)
    }
}
