import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul verify`: every done job's file checked (present, size, checksum when known); `--fix`
/// fetches haul's own missing or changed files again and replaces them, never a kept file.
final class VerifyTests: XCTestCase {
    func testVerifyFindsMissingAndChangedFilesAndFixReplacesOnlyHaulsOwn() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        var originals: [String: Data] = [:]
        for (index, name) in ["a.bin", "b.bin", "c.bin", "d.bin", "k.bin"].enumerated() {
            originals[name] = runTestData(3_000 + index, seed: UInt64(30 + index))
            server.route("/\(name)", FaultServer.file(originals[name]!))
        }
        let mine = Data("the user's own k.bin\n".utf8)
        XCTAssertTrue(FileManager.default.createFile(atPath: h.out + "/k.bin", contents: mine))
        try h.add(["a.bin", "b.bin", "c.bin", "d.bin", "k.bin"].map { server.url("/\($0)").absoluteString })
        XCTAssertEqual(try h.run(["run", "--checksum", "sha256"]).status, 0)
        XCTAssertEqual(try h.run(["verify"]).status, 0, "everything as placed")

        XCTAssertEqual(unlink(h.out + "/a.bin"), 0)
        XCTAssertEqual(truncate(h.out + "/b.bin", 100), 0)
        var changed = originals["c.bin"]!
        changed[10] ^= 0xFF
        try changed.write(to: URL(fileURLWithPath: h.out + "/c.bin"))  // same size, other bytes
        try Data("the user changed it\n".utf8).write(to: URL(fileURLWithPath: h.out + "/k.bin"))

        let verify = try h.run(["verify"])
        XCTAssertEqual(verify.status, 1, verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("missing  #1 \(h.out)/a.bin"), verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("changed  #2 \(h.out)/b.bin: 100 bytes, was 3001"), verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("changed  #3 \(h.out)/c.bin: sha256 "), verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("changed  #5 \(h.out)/k.bin"), verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("verified 5 files: 1 as placed, 1 missing, 3 changed"), verify.stdoutText)

        let fix = try h.run(["verify", "--fix", "--json"])
        XCTAssertEqual(fix.status, 1)
        XCTAssertEqual(runTestJSON(fix.stdoutLines.last ?? "")?["queued_again"] as? Int, 3, fix.stdoutText)
        XCTAssertEqual(try h.counts()["queued"], 3)
        XCTAssertEqual(try h.run(["run"]).status, 0)

        for name in ["a.bin", "b.bin", "c.bin", "d.bin"] { XCTAssertEqual(h.contents(name), originals[name], name) }
        XCTAssertEqual(h.contents("k.bin"), Data("the user changed it\n".utf8), "a kept file is the user's: never replaced")
        let again = try h.run(["verify"])
        XCTAssertEqual(again.stdoutLines.filter { $0.hasPrefix("changed") || $0.hasPrefix("missing") }.count, 1, again.stdoutText)
    }

    /// Without a checksum, a file rewritten with bytes of the same size (its modification time
    /// changed), or replaced by another file of that size, is found changed, as a run would find
    /// it; a file left alone is as placed.
    func testVerifyWithoutAChecksumFindsSameSizeEditsByTheirTime() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let data = runTestData(4_000, seed: 36)
        for name in ["edited.bin", "replaced.bin", "left.bin"] { server.route("/\(name)", FaultServer.file(data)) }
        try h.add(["edited.bin", "replaced.bin", "left.bin"].map { server.url("/\($0)").absoluteString })
        XCTAssertEqual(try h.run(["run"]).status, 0)
        XCTAssertEqual(try h.run(["verify"]).status, 0, "everything as placed")
        var other = data
        other[0] ^= 0xFF
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: h.out + "/edited.bin"))
        try handle.write(contentsOf: other)  // in place, same size
        try handle.close()
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, h.out + "/edited.bin", &times, 0), 0)  // a time far from the placement's
        let replacement = try h.temp.write("replacement.bin", other)
        XCTAssertEqual(rename(replacement, h.out + "/replaced.bin"), 0)

        let verify = try h.run(["verify"])
        XCTAssertEqual(verify.status, 1, verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("changed  #1 \(h.out)/edited.bin: modified since haul placed it"), verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("changed  #2 \(h.out)/replaced.bin: replaced since haul placed it"), verify.stdoutText)
        XCTAssertTrue(verify.stdoutText.contains("verified 3 files: 1 as placed, 0 missing, 2 changed"), verify.stdoutText)
    }
}
