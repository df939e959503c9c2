import Foundation
import HaulTestSupport
import XCTest

/// The test support's child processes: the suite starts well over a thousand, in one test
/// process whose limit on open files may be 1,024 (a common default, and CI's).
final class HaulProcessTests: XCTestCase {
    /// The test process's open descriptors.
    private func openDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    /// Each finished child once left the read ends of its stdout and stderr pipes open: about
    /// 1,500 descriptors by the end of the suite, and where the limit is 1,024 the later tests
    /// failed with EMFILE ("Too many open files") or EBADF.
    func testFinishedChildrenLeaveNoDescriptorOpen() throws {
        let runs = 50
        _ = try HaulProcess.run(URL(fileURLWithPath: "/bin/echo"), ["warm-up"])  // Foundation's own, opened once
        let before = try openDescriptors()
        for run in 0..<runs {
            let result = try HaulProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "echo out \(run); echo err >&2"])
            XCTAssertEqual(result.stdoutText, "out \(run)\n")
            XCTAssertEqual(result.stderrText, "err\n")
        }
        let after = try openDescriptors()
        XCTAssertLessThan(after - before, 5, "\(runs) finished children left \(after - before) descriptors open")
    }
}
