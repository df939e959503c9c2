import Foundation
import XCTest
import HaulCore
import HaulTestSupport

/// Hostile input to `haul add`: every bad line is rejected with its number and a reason, the
/// command finishes, the good lines are queued, and the database stays sound.
final class BadInputTests: XCTestCase {
    private struct Outcome {
        let result: ProcessResult
        let summary: [String: Int]
    }

    private func add(file: String, db: String, in directory: TempDirectory, viaStdin: Bool = false,
                     line: UInt = #line) throws -> Outcome {
        let arguments = ["add", "--db", db, "-d", directory.path, "--json", "-i", viaStdin ? "-" : file]
        let result = try haul(arguments, in: directory.path, input: viaStdin ? .file(file) : .none, timeout: 40, line: line)
        let summaryLine = result.stdoutLines.last ?? ""
        let summary: [String: Int] = (try? json(summaryLine)) ?? [:]
        return Outcome(result: result, summary: summary)
    }

    private func jobCount(_ db: String) throws -> Int {
        try Database(path: db, mode: .mustExist).scalarInt("SELECT count(*) FROM jobs")
    }

    /// Would `InputLine.parse` skip this line (blank or comment)? Mirrors the documented format:
    /// a line with a NUL is always rejected; otherwise one whose first field is missing or starts
    /// with '#' is skipped.
    private func isSkipped(_ bytes: [UInt8]) -> Bool {
        var line = bytes
        if line.last == 0x0D { line.removeLast() }
        if line.contains(0) { return false }
        guard let first = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 }).first else { return true }
        return first.first == UInt8(ascii: "#")
    }

    /// What editors and other tools leave in a list: a UTF-8 byte order mark before the first
    /// line and CRLF line ends are not part of the URLs; a folder named as the list is refused
    /// once, by name.
    func testAByteOrderMarkAndCRLFLineEndsAndAFolder() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let list = try directory.write("bom.txt", Data([0xEF, 0xBB, 0xBF]) + Data("https://e.org/one\r\nhttps://e.org/two\r\n".utf8))
        for viaStdin in [false, true] {
            let outcome = try add(file: list, db: db, in: directory, viaStdin: viaStdin)
            XCTAssertEqual(outcome.result.status, 0, outcome.result.stderrText)
            XCTAssertEqual(outcome.summary["rejected"], 0, outcome.result.stderrText)
        }
        XCTAssertEqual(try Database(path: db, mode: .mustExist).rows("SELECT url FROM jobs ORDER BY id") { $0.string(0) },
                       ["https://e.org/one", "https://e.org/two"])

        let folder = try directory.makeDirectory("urls")
        let refused = try haul(["add", "--db", db, "-i", folder], in: directory.path)
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(refused.stderrLines, ["haul: \(folder) is a folder: -i takes a file of URL lines, or - for standard input"])
    }

    func testRandomBytes() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        var random = SeededGenerator(seed: 0xBAD_1DEA)
        var content: [UInt8] = []
        var expectedRejected: [Int] = []
        var valid = 0
        for number in 1...3000 {
            if number % 10 == 0 {
                content += Array("https://ok.example/file-\(number)\n".utf8)
                valid += 1
                continue
            }
            var garbage = random.bytes(Int.random(in: 0...400, using: &random))
            for index in garbage.indices where garbage[index] == 0x0A { garbage[index] = 0x0B }
            // An indented `key=…` line is an aria2 option of the line above (tested in
            // InputParsingTests): here every garbage line must stand alone.
            if InputLine.aria2Option(garbage, line: number) != nil { garbage.insert(UInt8(ascii: "x"), at: 0) }
            if !isSkipped(garbage) { expectedRejected.append(number) }
            content += garbage + [0x0A]
        }
        let file = try directory.write("random.bin", Data(content))
        let outcome = try add(file: file, db: db, in: directory)
        XCTAssertEqual(outcome.result.status, 1)
        XCTAssertGreaterThan(expectedRejected.count, 2500, "the generator should make mostly bad lines")
        XCTAssertEqual(rejectedLineNumbers(outcome.result, source: file), expectedRejected)
        XCTAssertEqual(outcome.summary["added"], valid)
        XCTAssertEqual(outcome.summary["rejected"], expectedRejected.count)
        XCTAssertEqual(try jobCount(db), valid)
        try assertDatabaseSound(db)
    }

    func testASingleTenMegabyteLine() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let huge = "https://e.org/" + String(repeating: "a", count: 10 * 1024 * 1024)
        let file = try directory.write("huge.txt", Data("https://e.org/before\n\(huge)\nhttps://e.org/after\n".utf8))
        for viaStdin in [false, true] {
            let outcome = try add(file: file, db: db, in: directory, viaStdin: viaStdin)
            XCTAssertEqual(outcome.result.status, 1)
            XCTAssertEqual(rejectedLineNumbers(outcome.result, source: viaStdin ? "stdin" : file), [2])
            XCTAssertTrue(outcome.result.stderrText.contains("line too long (\(huge.utf8.count) bytes; the limit is 16384)"),
                          String(outcome.result.stderrText.prefix(300)))
            XCTAssertLessThan(outcome.result.stderr.count, 1000, "the rejected line must not be echoed whole")
            XCTAssertEqual(outcome.summary["rejected"], 1)
        }
        XCTAssertEqual(try jobCount(db), 2)
        try assertDatabaseSound(db)
    }

    func testNULBytesAndInvalidUTF8() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let lines: [[UInt8]] = [
            Array("https://e.org/one".utf8),
            Array("https://e.org/a".utf8) + [0] + Array("b".utf8),
            Array("https://e.org/two out=2.bin".utf8),
            Array("https://e.org/".utf8) + [0xFF, 0xFE],
            [0],
            Array("# a comment with a NUL ".utf8) + [0],
            Array("https://e.org/x out=".utf8) + [0xC0, 0xAF],
            Array("https://e.org/three\r".utf8),
            Array("https://e.org/".utf8) + [0xED, 0xA0, 0x80],
        ]
        let file = try directory.write("bad.txt", Data(lines.joined(separator: [0x0A])))
        let outcome = try add(file: file, db: db, in: directory)
        XCTAssertEqual(outcome.result.status, 1)
        XCTAssertEqual(rejectedLineNumbers(outcome.result, source: file), [2, 4, 5, 6, 7, 9])
        let reasons = outcome.result.stderrLines
        XCTAssertEqual(reasons.filter { $0.contains("NUL byte") }.count, 3, outcome.result.stderrText)
        XCTAssertEqual(reasons.filter { $0.contains("not valid UTF-8") }.count, 3, outcome.result.stderrText)
        XCTAssertFalse(outcome.result.stderr.contains(0), "a NUL byte was echoed to stderr")
        XCTAssertNotNil(String(validating: outcome.result.stderr, as: UTF8.self), "invalid UTF-8 was echoed to stderr")
        XCTAssertEqual(outcome.summary, ["added": 3, "already_queued": 0, "rejected": 6])
        XCTAssertEqual(try jobCount(db), 3)
        try assertDatabaseSound(db)
    }

    func testOneHundredThousandDuplicateLines() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        let file = try directory.write("dups.txt", Data(String(repeating: "https://e.org/same.iso\n", count: 100_000).utf8))
        let outcome = try add(file: file, db: db, in: directory)
        XCTAssertEqual(outcome.result.status, 0, String(outcome.result.stderrText.prefix(500)))
        XCTAssertEqual(outcome.summary, ["added": 1, "already_queued": 99_999, "rejected": 0])
        XCTAssertEqual(outcome.result.stderrText, "")
        XCTAssertEqual(try jobCount(db), 1)
        try assertDatabaseSound(db)
        let status: [String: Any] = try json(try haul(["status", "--db", db, "--json"]).stdoutText)
        XCTAssertEqual((status["counts"] as? [String: Int])?["queued"], 1)
    }

    /// 20,000 lines naming one file through different URLs: all but the first are rejected, each
    /// with its line number.
    func testManyLinesFightingOverOneDestination() throws {
        let directory = try makeTempDirectory()
        let db = directory.file("q.db")
        var text = ""
        for number in 1...20_000 { text += "https://e.org/\(number) out=same.iso\n" }
        let file = try directory.write("fight.txt", Data(text.utf8))
        let outcome = try add(file: file, db: db, in: directory)
        XCTAssertEqual(outcome.result.status, 1)
        XCTAssertEqual(outcome.summary, ["added": 1, "already_queued": 0, "rejected": 19_999])
        let numbers = rejectedLineNumbers(outcome.result, source: file)
        XCTAssertEqual(numbers, Array(2...20_000))
        XCTAssertTrue(outcome.result.stderrLines.first?.contains("destination already taken by job 1") == true)
        XCTAssertEqual(try jobCount(db), 1)
        try assertDatabaseSound(db)
    }
}
