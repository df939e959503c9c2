import Foundation
import XCTest
import HaulCore
import HaulTestSupport

extension XCTestCase {
    /// Runs `haul` with `arguments` and waits for it (at most `timeout` seconds).
    func haul(_ arguments: [String], in directory: String? = nil, input: HaulProcess.Input = .none,
              environment: [String: String] = [:], binary: URL? = nil, timeout: TimeInterval = 30,
              file: StaticString = #filePath, line: UInt = #line) throws -> ProcessResult {
        let executable = try binary ?? haulExecutable(file: file, line: line)
        let result = try HaulProcess.run(executable, arguments, environment: HaulProcess.environment(environment),
                                         currentDirectory: directory, input: input, timeout: timeout)
        XCTAssertFalse(result.timedOut, "haul \(arguments.prefix(4).joined(separator: " ")) ran past \(timeout) s", file: file, line: line)
        return result
    }

    /// Parses JSON output, failing the test when it is not JSON of type `T`.
    func json<T>(_ text: String, as: T.Type = T.self, file: StaticString = #filePath, line: UInt = #line) throws -> T {
        let value = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        guard let typed = value as? T else {
            XCTFail("expected \(T.self), got: \(text)", file: file, line: line)
            throw UnexpectedJSON()
        }
        return typed
    }

    /// The line numbers in `stderr` lines of the form `haul: SOURCE:LINE: reason`, in order.
    func rejectedLineNumbers(_ result: ProcessResult, source: String, file: StaticString = #filePath, line: UInt = #line) -> [Int] {
        let prefix = "haul: \(source):"
        var numbers: [Int] = []
        for text in result.stderrLines {
            guard text.hasPrefix(prefix) else {
                XCTFail("stderr line is not '\(prefix)LINE: reason': \(text.prefix(200))", file: file, line: line)
                continue
            }
            let rest = text.dropFirst(prefix.count)
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard let number = Int(digits), rest.dropFirst(digits.count).hasPrefix(": "), rest.count > digits.count + 2 else {
                XCTFail("no line number and reason in: \(text.prefix(200))", file: file, line: line)
                continue
            }
            numbers.append(number)
        }
        return numbers
    }

    /// Checks a database after a command: sound, and counters matching rows.
    func assertDatabaseSound(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let database = try Database(path: path, mode: .mustExist)
        XCTAssertEqual(try QueueInvariants.integrityCheck(database), ["ok"], file: file, line: line)
        XCTAssertEqual(try QueueInvariants.counterMismatches(in: database), [], file: file, line: line)
    }
}

struct UnexpectedJSON: Error {}
