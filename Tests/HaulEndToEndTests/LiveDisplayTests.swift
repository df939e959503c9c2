import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// The live display of `haul run` on a terminal, as a person sees it: haul runs on a
/// pseudo-terminal, and what it wrote is replayed through `TerminalScreen`.
final class LiveDisplayTests: XCTestCase {
    /// One run on a terminal: a 6 MiB file paced to take about 4 s, and five small ones.
    private struct Scenario {
        let harness: RunHarness
        let server: FaultServer
        let terminal: PseudoTerminal
        let big: Data

        init(_ testCase: XCTestCase, columns: Int) throws {
            harness = try RunHarness(testCase)
            server = try FaultServer(host: "127.0.0.1")
            big = runTestData(6 << 20, seed: 77)
            let big = self.big
            server.route("/big.bin") { request in
                var response = FaultServer.fileResponse(big, request: request, etag: "\"big\"")
                response.pacing = .init(bytesPerChunk: 64 << 10, delay: 0.04)
                return response
            }
            var lines = [server.url("/big.bin").absoluteString]
            for index in 1...5 {
                server.route("/s\(index).bin", FaultServer.file(runTestData(2_000, seed: UInt64(index))))
                lines.append(server.url("/s\(index).bin").absoluteString)
            }
            try harness.add(lines)
            terminal = try PseudoTerminal(columns: columns, rows: 24)
        }

        func start() throws -> RunningProcess {
            try terminal.start(harness.haul, ["run", "--db", harness.db], environment: HaulProcess.environment(),
                               currentDirectory: harness.temp.path)
        }

        /// Waits until the display shows the big file's own line and an ETA from bytes.
        /// Waits until `frames` frames were drawn after `offset`, the last one whole (a frame:
        /// erase, batch line, transfer line, may arrive in pieces); returns how many bytes of
        /// output then ended with it, or nil.
        func waitForFullDisplay(after offset: Int = 0, frames: Int = 1) -> Int? {
            var whole: Int?
            _ = terminal.waitForOutput { text in
                let tail = String(decoding: Data(text.utf8).dropFirst(offset), as: UTF8.self).components(separatedBy: "by bytes")
                guard tail.count > frames, let last = tail.last, last.contains("big.bin"), last.contains("%"),
                      !text.hasSuffix("\u{FFFD}") else { return false }
                whole = text.utf8.count
                return true
            }
            return whole
        }

        /// The rows a person sees at the bottom of the screen (the live display).
        static func bottom(_ screen: TerminalScreen, _ count: Int) -> [String] {
            Array(screen.lines.suffix(count))
        }

        static func replay(_ data: Data, columns: Int) -> TerminalScreen {
            var screen = TerminalScreen(columns: columns)
            screen.feed(String(decoding: data, as: UTF8.self))
            return screen
        }

        /// Rows the live display drew (the batch line and the transfer lines).
        static func displayRows(_ screen: TerminalScreen) -> [String] {
            screen.lines.filter { $0.hasPrefix("[") || $0.contains("big.bin") || $0.contains("ETA") }
        }
    }

    /// At 40 and at 150 columns: no line ever wraps, the batch line keeps its counts, rate and
    /// byte ETA, the big file has its own line, and when the run ends nothing of the display is
    /// left on the screen (one summary, not a screenful of status lines).
    func testLiveDisplayFitsFortyAndOneHundredFiftyColumnsAndLeavesOnlyTheSummary() throws {
        // Both at once, each with its own server and queue.
        let scenarios = try [40, 150].map { (columns: $0, scenario: try Scenario(self, columns: $0)) }
        defer { for (_, scenario) in scenarios { scenario.server.stop() } }
        let children = try scenarios.map { try $0.scenario.start() }
        let midRuns = try scenarios.map { columns, scenario in
            let whole = try XCTUnwrap(scenario.waitForFullDisplay(),
                                      "\(columns) columns: no transfer line and byte ETA shown:\n\(scenario.terminal.text)")
            return Scenario.replay(scenario.terminal.data.prefix(whole), columns: columns)
        }
        for (((columns, scenario), child), midRun) in zip(zip(scenarios, children), midRuns) {
            let result = child.wait(timeout: 60)
            XCTAssertEqual(result.status, 0, "\(columns) columns:\n\(scenario.terminal.text)")
            XCTAssertEqual(scenario.harness.contents("big.bin"), scenario.big)

            let display = Scenario.bottom(midRun, 2)
            guard display.count == 2 else { return XCTFail("\(columns) columns: not two display rows: \(midRun.text)") }
            if ProcessInfo.processInfo.environment["HAUL_CAPTURE"] != nil {
                print("--- \(columns) columns ---\n" + display.joined(separator: "\n"))
            }
            XCTAssertTrue(display[0].hasPrefix("[") && display[0].contains("/s") && display[0].contains("by bytes"),
                          "\(columns) columns: the batch line lacks counts, rate or a byte ETA: \(display)")
            XCTAssertTrue(display[1].contains("big.bin") && display[1].contains("%"), "\(columns) columns: \(display)")
            XCTAssertTrue(display.allSatisfy { $0.count < columns }, "\(columns) columns: \(display)")
            if columns == 150 {
                XCTAssertTrue(display[0].contains("active") && display[1].contains("[#"), "150 columns has room for all: \(display)")
            }

            XCTAssertEqual(midRun.wraps, 0, "\(columns) columns: a line wider than the terminal:\n\(midRun.text)")
            let final = Scenario.replay(scenario.terminal.data, columns: columns)
            XCTAssertEqual(Scenario.displayRows(final), [], "\(columns) columns: the display was left behind:\n\(final.text)")
            XCTAssertTrue(final.text.contains("finished: 6 done, 0 failed"), final.text)
            XCTAssertEqual(final.lines.filter { $0.contains("finished:") }.count, 1, "\(columns) columns:\n\(final.text)")
        }
    }

    /// stdout sent to a file while stderr is the terminal (`haul run > log.txt`): the log gets a
    /// line for each job, as without a terminal; and `TERM=dumb` gets plain lines, no escapes.
    func testALogFileGetsEveryJobsLineAndADumbTerminalPlainLines() throws {
        for dumb in [false, true] {
            let h = try RunHarness(self)
            let server = try FaultServer(host: "127.0.0.1")
            defer { server.stop() }
            var lines: [String] = []
            for index in 1...3 {
                server.route("/s\(index).bin", FaultServer.file(runTestData(2_000, seed: UInt64(index))))
                lines.append(server.url("/s\(index).bin").absoluteString)
            }
            try h.add(lines)
            let terminal = try PseudoTerminal(columns: 100, rows: 24)
            var environment = HaulProcess.environment()
            if dumb { environment["TERM"] = "dumb" }
            let command = dumb ? #"exec "$0" run --db "$1""# : #"exec "$0" run --db "$1" > log.txt"#
            let child = try terminal.start(URL(fileURLWithPath: "/bin/sh"), ["-c", command, h.haul.path, h.db],
                                           environment: environment, currentDirectory: h.temp.path)
            XCTAssertEqual(child.wait(timeout: 60).status, 0, terminal.text)
            let log = dumb ? terminal.text : ((try? String(contentsOfFile: h.temp.file("log.txt"), encoding: .utf8)) ?? "")
            // A terminal ends lines with "\r\n", one Character to Swift.
            let logLines = log.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n")
            XCTAssertEqual(logLines.filter { $0.hasPrefix("done    #") }.count, 3, "dumb \(dumb):\n\(log)")
            XCTAssertTrue(log.contains("finished: 3 done"), log)
            if dumb { XCTAssertFalse(terminal.text.contains("\u{1B}"), "an escape on a dumb terminal:\n\(terminal.text)") }
        }
    }

    /// The terminal narrows from 150 to 40 columns mid-run (and re-flows what is on it): the
    /// display follows at its next redraw, and erases the rows its wider lines now take.
    func testLiveDisplayFollowsAResizeAndLeavesNothingBehind() throws {
        let scenario = try Scenario(self, columns: 150)
        defer { scenario.server.stop() }
        let child = try scenario.start()
        XCTAssertNotNil(scenario.waitForFullDisplay(), scenario.terminal.text)
        let resizedAt = scenario.terminal.data.count
        scenario.terminal.resize(columns: 40, rows: 24)
        // Two frames drawn after the resize, the output cut where the last one is whole: a frame
        // (erase, batch line, transfer line) may arrive in pieces, and one read after a wait
        // could end between its batch line and its transfer line.
        var whole = 0
        XCTAssertTrue(scenario.terminal.waitForOutput { text in
            let frames = String(decoding: Data(text.utf8).dropFirst(resizedAt), as: UTF8.self).components(separatedBy: "by bytes")
            guard frames.count > 2, let last = frames.last, last.contains("big.bin"), last.contains("%"),
                  !text.hasSuffix("\u{FFFD}") else { return false }
            whole = text.utf8.count
            return true
        }, scenario.terminal.text)
        let data = scenario.terminal.data.prefix(whole)
        let result = child.wait(timeout: 60)
        XCTAssertEqual(result.status, 0, scenario.terminal.text)

        var screen = Scenario.replay(data.prefix(resizedAt), columns: 150)
        screen.resize(columns: 40)
        screen.feed(String(decoding: data.dropFirst(resizedAt), as: UTF8.self))
        let display = Scenario.bottom(screen, 2)
        XCTAssertTrue(display[0].hasPrefix("[") && display.allSatisfy { $0.count < 40 }, "after the resize: \(screen.text)")
        XCTAssertEqual(Scenario.displayRows(screen).count, 2, "only the display now drawn, nothing of the wider one:\n\(screen.text)")

        screen.feed(String(decoding: scenario.terminal.data.dropFirst(data.count), as: UTF8.self))
        XCTAssertEqual(Scenario.displayRows(screen), [], "the display was left behind:\n\(screen.text)")
        XCTAssertTrue(screen.text.contains("finished: 6 done"), screen.text)
    }
}
