import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// Two haul runs on one queue from two PID namespaces, as from two containers on one host: they
/// share the kernel's boot id but not their pids, so the second must not take the first's pid
/// being absent from its /proc as a sign that the first died.
final class PIDNamespaceTests: XCTestCase {
    private static let unshare = "/usr/bin/unshare"

    /// The `unshare` options that start a process in a new PID namespace with its own /proc here:
    /// as root, or else through a user namespace.
    private func unshareOptions() throws -> [String] {
        guard FileManager.default.isExecutableFile(atPath: Self.unshare) else { throw XCTSkip("no \(Self.unshare)") }
        var errors: [String] = []
        for options in [["--pid", "--fork", "--mount-proc"], ["--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]] {
            let probe = try HaulProcess.run(URL(fileURLWithPath: Self.unshare), options + ["/bin/true"], timeout: 10)
            if probe.status == 0 { return options }
            errors.append(probe.stderrText)
        }
        throw XCTSkip("cannot make a PID namespace here: \(errors.joined(separator: "; "))")
    }

    func testARunInAnotherPIDNamespaceLeavesALiveRunsJobAlone() throws {
        let options = try unshareOptions()
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        let big = runTestData(3_000_000, seed: 61)
        // The first run's transfer is held at the server until the second run has passed its
        // start-up (where it reclaims the jobs of lease holders it thinks dead). The event that
        // tells: its start-up sweep removes an orphaned temp file planted for it, right after the
        // reclaim step.
        let gate = FaultServer.Gate()
        server.route("/big.bin") { request in
            gate.wait(timeout: 30)
            return FaultServer.fileResponse(big, request: request, etag: "\"ns-1\"")
        }
        try h.add([server.url("/big.bin").absoluteString])

        let first = try h.start(["run"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/big.bin", timeout: 10))
        let orphan = h.out + "/" + TempFile.prefix + "999999-0123456789abcdef" + TempFile.suffix
        XCTAssertTrue(FileManager.default.createFile(atPath: orphan, contents: Data("orphan".utf8)))
        let second = try HaulProcess.start(URL(fileURLWithPath: Self.unshare),
                                           options + [h.haul.path, "run", "--db", h.db],
                                           currentDirectory: h.temp.path)
        let swept = Date().addingTimeInterval(20)
        while FileManager.default.fileExists(atPath: orphan) && Date() < swept { usleep(5_000) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: orphan), "the second run never passed its start-up")
        gate.open()
        let firstResult = first.wait(timeout: 30)
        let secondResult = second.wait(timeout: 30)

        XCTAssertEqual(firstResult.status, 0, firstResult.stdoutText + firstResult.stderrText)
        XCTAssertEqual(secondResult.status, 0, secondResult.stdoutText + secondResult.stderrText)
        XCTAssertEqual(server.requests(path: "/big.bin").count, 1,
                       "the run in the other namespace took the live run's job as abandoned and fetched it again")
        XCTAssertEqual(h.contents("big.bin"), big)
        XCTAssertEqual(try h.counts()["done"], 1)
    }
}
