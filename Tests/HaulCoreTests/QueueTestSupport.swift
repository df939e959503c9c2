import Foundation
import Synchronization
import XCTest
@testable import HaulCore
import HaulTestSupport

/// A clock tests move by hand, for `JobQueue.clock`.
final class TestClock: Sendable {
    private let milliseconds: Atomic<Int>

    init(_ start: Int = 1_700_000_000_000) { milliseconds = Atomic(start) }

    var now: Int { milliseconds.load(ordering: .sequentiallyConsistent) }
    func advance(by delta: Int) { milliseconds.add(delta, ordering: .sequentiallyConsistent) }
    func set(_ value: Int) { milliseconds.store(value, ordering: .sequentiallyConsistent) }

    /// A clock function that reads this clock.
    var function: @Sendable () -> Int { { [self] in self.now } }
}

extension XCTestCase {
    /// A queue on a new database file in a fresh temp directory, driven by `clock`.
    func makeQueue(clock: TestClock? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> (JobQueue, TempDirectory) {
        let directory = try makeTempDirectory()
        let queue = try JobQueue(path: directory.file("haul.db"))
        if let clock { queue.clock = clock.function }
        return (queue, directory)
    }

    /// Parses a URL-list line that must be valid.
    func line(_ text: String, in resolver: DestinationResolver, file: StaticString = #filePath, line: UInt = #line) throws -> InputLine {
        do {
            guard let parsed = try InputLine.parse(Array(text.utf8), resolver: resolver) else {
                XCTFail("'\(text)' parsed as a blank or comment line", file: file, line: line)
                throw TestError("'\(text)' is not a job line")
            }
            return parsed
        } catch let rejection as InputLine.Rejection {
            XCTFail("'\(text)' was rejected: \(rejection)", file: file, line: line)
            throw rejection
        }
    }

    /// The rejection of a line that must be rejected, or nil (with a failure) when it parsed.
    func rejection(of bytes: [UInt8], in resolver: DestinationResolver, file: StaticString = #filePath, line: UInt = #line) -> InputLine.Rejection? {
        do {
            let parsed = try InputLine.parse(bytes, resolver: resolver)
            XCTFail("expected a rejection, got \(String(describing: parsed))", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func rejection(of text: String, in resolver: DestinationResolver, file: StaticString = #filePath, line: UInt = #line) -> InputLine.Rejection? {
        rejection(of: Array(text.utf8), in: resolver, file: file, line: line)
    }

    /// Adds URL lines (each must parse) and returns the outcomes.
    @discardableResult
    func add(_ texts: [String], to queue: JobQueue, in directory: String, maxAttempts: Int = 5,
             file: StaticString = #filePath, line: UInt = #line) throws -> [AddOutcome] {
        let resolver = DestinationResolver(directory: directory)
        let lines = try texts.map { try self.line($0, in: resolver, file: file, line: line) }
        return try queue.add(lines, maxAttempts: maxAttempts)
    }

    /// Fails the test when the counters disagree with the jobs table.
    func assertCountersConsistent(_ database: Database, file: StaticString = #filePath, line: UInt = #line) throws {
        let problems = try QueueInvariants.counterMismatches(in: database)
        XCTAssertEqual(problems, [], file: file, line: line)
    }

    /// The bytes of a file, or nil when it does not exist.
    func contentsOf(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }
}

/// A test precondition that did not hold (the failure itself is recorded with XCTFail).
struct TestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension AddOutcome {
    var jobID: Int? {
        switch self {
        case .added(let id), .alreadyQueued(let id): return id
        case .rejected: return nil
        }
    }
}
