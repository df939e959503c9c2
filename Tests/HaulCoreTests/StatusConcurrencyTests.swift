import Foundation
import Synchronization
import XCTest
@testable import HaulCore
import HaulTestSupport

/// `status` reads through WAL: it answers at once, and consistently, while another connection
/// is writing.
final class StatusConcurrencyTests: XCTestCase {
    func testStatusAnswersWhileAnotherConnectionHoldsAWriteTransaction() throws {
        let (queue, directory) = try makeQueue()
        let path = directory.file("haul.db")
        try add(["https://a.example/1", "https://a.example/2", "https://b.example/3"], to: queue, in: directory.path)

        let writer = try Database(path: path)
        try writer.execute("BEGIN IMMEDIATE")
        try writer.execute("""
            INSERT INTO jobs (url, host_id, destination, destination_key, created_at, updated_at)
                VALUES ('https://a.example/uncommitted', 1, '/nowhere/uncommitted', 424242, 1, 1);
            UPDATE job_totals SET jobs = jobs + 1 WHERE state = 'queued';
            UPDATE hosts SET queued = queued + 1 WHERE id = 1;
            """)
        defer { try? writer.execute("ROLLBACK") }

        // The lock is real: a writer on a third connection cannot get in.
        let blocked = try JobQueue(path: path, mode: .mustExist, busyTimeout: 0.1)
        XCTAssertThrowsError(try blocked.claim(ClaimRequest(limit: 1, perHostCap: 1))) { error in
            XCTAssertTrue((error as? SQLiteError)?.isBusy == true, "\(error)")
        }

        // A connection opened before the transaction, and one opened during it, both read at once.
        for reader in [queue, try JobQueue(path: path, mode: .mustExist, busyTimeout: 10)] {
            let started = Date()
            let status = try reader.status()
            let seconds = Date().timeIntervalSince(started)
            XCTAssertLessThan(seconds, 2, "status waited for the writer's lock")
            XCTAssertEqual(status.counts[.queued], 3, "status saw uncommitted rows, or lost committed ones")
            XCTAssertEqual(status.total, 3)
            XCTAssertEqual(try reader.list(JobFilter()).count, 3)
        }
        try writer.execute("COMMIT")
        XCTAssertEqual(try queue.status().counts[.queued], 4)
    }

    /// While batches are committed on another connection, every status shows whole batches only.
    /// Halfway, the writer waits until a status has seen the half-written queue, so the test
    /// always checks at least one snapshot taken mid-write (not only the empty and the full one).
    func testStatusSeesOnlyWholeTransactions() throws {
        let directory = try makeTempDirectory()
        let path = directory.file("haul.db")
        _ = try Database(path: path)
        let batch = 500
        let batches = 20
        let writerDone = Mutex(false)
        let writerError = Mutex<String?>(nil)
        let folder = directory.path
        let finished = DispatchGroup()
        let halfSeen = DispatchSemaphore(value: 0)
        let half = batches / 2
        finished.enter()
        Thread.detachNewThread {
            defer { writerDone.withLock { $0 = true }; finished.leave() }
            do {
                let queue = try JobQueue(path: path)
                let resolver = DestinationResolver(directory: folder)
                for number in 0..<batches {
                    let lines = try (0..<batch).map { index -> InputLine in
                        guard let line = try InputLine.parse(Array("https://e.org/\(number)-\(index)".utf8), resolver: resolver) else {
                            throw TestError("unparsable")
                        }
                        return line
                    }
                    _ = try queue.add(lines)
                    if number + 1 == half && halfSeen.wait(timeout: .now() + 20) == .timedOut {
                        throw TestError("no status read the half-written queue")
                    }
                }
            } catch {
                writerError.withLock { $0 = "\(error)" }
            }
        }
        let reader = try JobQueue(path: path, mode: .mustExist)
        var seen: [Int] = []
        var slowest = 0.0
        repeat {
            let started = Date()
            let status = try reader.status()
            slowest = max(slowest, Date().timeIntervalSince(started))
            seen.append(status.counts[.queued] ?? -1)
            if seen.last == half * batch { halfSeen.signal() }
            XCTAssertEqual(status.total, status.counts[.queued], "only queued jobs exist")
        } while !writerDone.withLock({ $0 })
        XCTAssertEqual(finished.wait(timeout: .now() + 30), .success)
        XCTAssertNil(writerError.withLock { $0 })
        XCTAssertEqual(try reader.status().counts[.queued], batch * batches)
        XCTAssertEqual(seen.filter { $0 % batch != 0 }, [], "a status saw part of a batch")
        XCTAssertTrue(seen.contains { $0 > 0 && $0 < batch * batches }, "no status was taken mid-write")
        XCTAssertEqual(seen, seen.sorted(), "counts went backwards")
        XCTAssertLessThan(slowest, 2)
        try assertCountersConsistent(reader.database)
    }
}
