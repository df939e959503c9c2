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
        // About 4.5 s of body: the second run starts, and reclaims what it thinks is dead, well
        // before the first run's transfer ends.
        server.route("/big.bin") { request in
            FaultServer.fileResponse(big, request: request, etag: "\"ns-1\"").slowBody(bytesPerChunk: 32_768, delay: 0.05)
        }
        try h.add([server.url("/big.bin").absoluteString])

        let first = try h.start(["run"])
        XCTAssertTrue(server.waitForRequests(count: 1, path: "/big.bin", timeout: 10))
        let second = try HaulProcess.start(URL(fileURLWithPath: Self.unshare),
                                           options + [h.haul.path, "run", "--db", h.db],
                                           currentDirectory: h.temp.path)
        // The first run is still mid-transfer as the second starts (its first step is to reclaim
        // the jobs of dead lease holders); otherwise the test would prove nothing.
        XCTAssertTrue(h.tempFileSize() < big.count, "the first transfer ended before the second run started")
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
