import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul status --watch`: the status again and again, with rates, until interrupted.
final class StatusWatchTests: XCTestCase {
    /// Not on a terminal, with --json: one object per line, each with its time and the rates
    /// since the one before; a run finishing meanwhile shows up as jobs per second; SIGINT ends
    /// it quietly with exit 0.
    func testWatchPrintsAJSONLinePerSnapshotWithRatesAndEndsOnInterrupt() throws {
        let h = try RunHarness(self)
        let server = try FaultServer(host: "127.0.0.1")
        defer { server.stop() }
        for index in 1...5 { server.route("/w\(index).bin", FaultServer.file(runTestData(3_000, seed: UInt64(index)))) }
        try h.add((1...5).map { server.url("/w\($0).bin").absoluteString })

        let watcher = try h.start(["status", "--watch", "0.2", "--json"])
        XCTAssertTrue(watcher.waitForOutput("\"queued\":5", timeout: 10), "no first snapshot")
        XCTAssertEqual(try h.run(["run", "-q"]).status, 0)
        XCTAssertTrue(watcher.waitForOutput("\"done\":5", timeout: 10), "the finished run never showed")
        kill(watcher.processIdentifier, SIGINT)
        let result = watcher.wait(timeout: 10)

        XCTAssertEqual(result.status, 0, result.stderrText)
        XCTAssertEqual(result.stderrText, "", "an interrupt ends a watch quietly")
        let snapshots = result.stdoutLines.map { line -> [String: Any] in
            guard let object = runTestJSON(line) else { XCTFail("not a JSON object: \(line)"); return [:] }
            return object
        }
        XCTAssertGreaterThanOrEqual(snapshots.count, 2)
        XCTAssertTrue(snapshots.allSatisfy { $0["time"] is String && $0["counts"] is [String: Int] }, result.stdoutText)
        XCTAssertTrue(snapshots[0]["rates"] is NSNull, "no rates before a second snapshot: \(snapshots[0])")
        let jobRates = snapshots.dropFirst().compactMap { ($0["rates"] as? [String: Any])?["jobs_per_second"] as? Double }
        XCTAssertEqual(jobRates.count, snapshots.count - 1)
        XCTAssertTrue(jobRates.contains { $0 > 0 }, "five jobs ended between two snapshots: \(result.stdoutText)")
    }

    /// On a 40-column terminal (with colour): the status is redrawn in place, fitted to the
    /// width, so the screen holds one status however many times it was drawn.
    func testWatchRedrawsInPlaceOnANarrowTerminal() throws {
        let h = try RunHarness(self)
        try h.add((1...3).map { "http://127.0.0.1:9/a-rather-long-file-name-number-\($0).bin" })
        let terminal = try PseudoTerminal(columns: 40, rows: 24)
        var environment = HaulProcess.environment()
        environment["NO_COLOR"] = nil
        let watcher = try terminal.start(h.haul, ["status", "--watch", "0.1", "--db", h.db], environment: environment,
                                         currentDirectory: h.temp.path)
        XCTAssertTrue(terminal.waitForOutput { $0.components(separatedBy: "haul status, every").count > 4 }, terminal.text)
        kill(watcher.processIdentifier, SIGINT)
        XCTAssertEqual(watcher.wait(timeout: 10).status, 0)

        var screen = TerminalScreen(columns: 40)
        screen.feed(terminal.text)
        XCTAssertEqual(screen.wraps, 0, "a line wider than the terminal:\n\(screen.text)")
        XCTAssertEqual(screen.lines.filter { $0.hasPrefix("haul status, every") }.count, 1, screen.text)
        XCTAssertEqual(screen.lines.filter { $0.hasPrefix("jobs:") }.count, 1, screen.text)
        XCTAssertTrue(screen.text.contains("rates:"), screen.text)
        XCTAssertTrue(terminal.text.contains("\u{1B}[1m"), "colour on a terminal without NO_COLOR")
    }
}
