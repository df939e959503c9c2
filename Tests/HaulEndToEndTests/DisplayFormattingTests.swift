import Foundation
import HaulCore
@testable import haul
import XCTest

/// The pure parts of the live display: the ETA's rules, recent rates, and fitting text to a
/// width (fuzzed).
final class DisplayFormattingTests: XCTestCase {
    func testETARestsOnBytesWhenEverySizeIsKnownOnGuessesWhenSomeAreAndOnFilesWhenNoneIs() {
        func eta(jobs: Int, bytes: Int64, unknown: Int, done: Int = 0, doneBytes: Int64 = 0,
                 byteRate: Double? = 1000, fileRate: Double? = 2) -> ETA? {
            ETA.estimate(pendingJobs: jobs, pendingBytes: bytes, unknownSize: unknown, doneFiles: done, doneBytes: doneBytes,
                         byteRate: byteRate, fileRate: fileRate)
        }
        XCTAssertEqual(eta(jobs: 3, bytes: 30_000, unknown: 0), ETA(seconds: 30, basis: .bytes))
        // 2 of unknown size, taken as the mean of 4 files done (500 B each): 30,000 + 1,000 B.
        XCTAssertEqual(eta(jobs: 3, bytes: 30_000, unknown: 2, done: 4, doneBytes: 2_000), ETA(seconds: 31, basis: .guessedBytes))
        XCTAssertEqual(eta(jobs: 3, bytes: 30_000, unknown: 2), ETA(seconds: 1.5, basis: .files), "nothing done to guess from")
        XCTAssertEqual(eta(jobs: 4, bytes: 0, unknown: 4, done: 4, doneBytes: 2_000), ETA(seconds: 2, basis: .files))
        // No rate yet, or a rate of zero (a big file with no file finished lately): no ETA, never "0 s".
        XCTAssertNil(eta(jobs: 3, bytes: 30_000, unknown: 0, byteRate: nil, fileRate: nil))
        XCTAssertNil(eta(jobs: 1, bytes: 0, unknown: 1, fileRate: 0))
        XCTAssertNil(eta(jobs: 0, bytes: 0, unknown: 0))
        XCTAssertEqual(ETA.text(nil), "ETA ?")
        XCTAssertEqual(ETA.text(ETA(seconds: 200, basis: .guessedBytes)), "ETA ~3m20s by bytes")
        XCTAssertEqual(ETA.text(ETA(seconds: 4, basis: .files)), "ETA 4.0 s by files")
    }

    func testRatesWaitForASecondOfSamplesAndFollowAChangeOfSpeedWithinTheWindow() {
        var meter = ProgressMeter()
        meter.record(at: 0, bytes: 0, files: 0)
        meter.record(at: 0.5, bytes: 500, files: 1)
        XCTAssertNil(meter.byteRate, "half a second says nothing of the speed")
        var bytes: Int64 = 500
        for tick in 3...40 {  // 1,000 B/s for 10 s, sampled every quarter second
            bytes += 250
            meter.record(at: 0.25 * Double(tick), bytes: bytes, files: tick)
        }
        XCTAssertEqual(meter.byteRate ?? 0, 1000, accuracy: 1)
        for tick in 41...100 {  // then 100 B/s
            bytes += 25
            meter.record(at: 0.25 * Double(tick), bytes: bytes, files: 40)
        }
        XCTAssertEqual(meter.byteRate ?? 0, 100, accuracy: 1, "after a window at the new speed, only it counts")
        XCTAssertEqual(meter.fileRate ?? -1, 0, accuracy: 0.001)
    }

    func testFittedTextIsNeverWiderThanAskedAndKeepsNoControlCharacter() {
        // Columns as a terminal counts them: wide characters take two, combining marks none.
        XCTAssertEqual(Terminal.width("日本"), 4)
        XCTAssertEqual(Terminal.width("😀a"), 3)
        XCTAssertEqual(Terminal.width("e\u{301}"), 1)
        XCTAssertEqual(Terminal.fit("日本語のファイル.zip", 7), "日本語…")
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "7", " ", "é", "e\u{301}", "日本", "한", "😀", "\u{1B}[2J", "\n", "\t", "…", "/", "%"]
        for _ in 0..<3_000 {
            let text = (0..<Int.random(in: 0...40, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let columns = Int.random(in: 0...60, using: &generator)
            let fitted = Terminal.fit(Terminal.printable(text), columns)
            XCTAssertLessThanOrEqual(Terminal.width(fitted), columns, "\(text.debugDescription) in \(columns)")
            XCTAssertFalse(Terminal.printable(text).unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, text.debugDescription)
            if Terminal.width(text) <= columns { XCTAssertEqual(Terminal.fit(text, columns), text) }
        }
    }

    func testEveryDisplayLineFitsTheTerminalAtAnyWidth() {
        var generator = SystemRandomNumberGenerator()
        let names = ["big.bin", "a-very-long-file-name-that-goes-on-and-on-and-on.tar.gz", "日本語のファイル.zip", "x"]
        for _ in 0..<2_000 {
            var stats = EngineStats()
            stats.done = Int.random(in: 0...1_000_000, using: &generator)
            stats.failed = Int.random(in: 0...1_000, using: &generator)
            stats.active = Int.random(in: 0...64, using: &generator)
            stats.waitingForRetry = Int.random(in: 0...500, using: &generator)
            stats.bytesThisRun = Int64.random(in: 0...(1 << 50), using: &generator)
            stats.queueCounts = [.queued: Int.random(in: 0...10_000_000, using: &generator), .done: stats.done, .running: stats.active]
            stats.pendingBytes = Int64.random(in: 0...(1 << 45), using: &generator)
            stats.transfers = (0..<Int.random(in: 0...5, using: &generator)).map { index in
                let total = Int64.random(in: 0...(1 << 40), using: &generator)
                return TransferStats(jobID: index, destination: "/out/" + names.randomElement(using: &generator)!,
                                     bytesOnDisk: Int64.random(in: 0...max(total, 1), using: &generator),
                                     expectedTotal: Bool.random(using: &generator) ? total : nil)
            }
            let size = Terminal.Size(columns: Int.random(in: 2...200, using: &generator), rows: Int.random(in: 1...50, using: &generator))
            var view = ProgressView()
            let first = view.lines(stats, at: 0, size: size)
            stats.bytesThisRun += 10_000_000
            let lines = first + view.lines(stats, at: 2, size: size)
            for line in lines {
                XCTAssertLessThan(Terminal.width(line), size.columns, "\(line.debugDescription) at \(size.columns) columns")
            }
            XCTAssertLessThanOrEqual(lines.count, 2 * (1 + min(ProgressView.biggest, max(0, size.rows - 3))))
            var block = LiveBlock()
            _ = block.draw(lines, columns: size.columns)
            XCTAssertTrue(block.lines.allSatisfy { Terminal.width($0) < size.columns })
        }
    }
}
