import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// `JobQueue.forEachJob`, which `haul export` walks the queue with: every job once, in id order,
/// across page boundaries, filtered by state, from any id on.
final class QueueExportTests: XCTestCase {
    /// Ten jobs: 1…3 claimed, then 1 done and 2 and 3 failed; 4…10 queued.
    private func queueOfTen() throws -> JobQueue {
        let (queue, directory) = try makeQueue()
        try add((1...10).map { "https://e.example/f\($0)" }, to: queue, in: directory.path)
        let leases = try queue.claim(ClaimRequest(limit: 3, perHostCap: 3))
        XCTAssertEqual(leases.map(\.jobID).sorted(), [1, 2, 3])
        for lease in leases {
            if lease.jobID == 1 {
                try queue.complete(jobID: 1, token: lease.token, status: 200, bytes: 10)
            } else {
                try queue.fail(jobID: lease.jobID, token: lease.token, status: 404, reason: "HTTP 404 Not Found")
            }
        }
        return queue
    }

    private func ids(_ queue: JobQueue, state: JobState? = nil, after: Int = 0, batch: Int) throws -> [Int] {
        var seen: [Int] = []
        let count = try queue.forEachJob(state: state, after: after, batch: batch) { seen.append($0.id) }
        XCTAssertEqual(count, seen.count, "the count returned is the jobs given")
        return seen
    }

    func testEveryJobOnceInIdOrderWhateverTheBatch() throws {
        let queue = try queueOfTen()
        for batch in [1, 3, 5, 10, 11, 1_000] {
            XCTAssertEqual(try ids(queue, batch: batch), Array(1...10), "batch \(batch)")
        }
        XCTAssertEqual(try ids(queue, after: 4, batch: 3), Array(5...10))
        XCTAssertEqual(try ids(queue, after: 10, batch: 3), [])
        // The walk runs with a small page cache, and gives the connection its own back.
        let cacheSize = try queue.database.scalarInt("PRAGMA cache_size")
        var jobs: [Job] = []
        var cacheDuringWalk: Set<Int> = []
        try queue.forEachJob(batch: 4) {
            jobs.append($0)
            cacheDuringWalk.insert(try queue.database.scalarInt("PRAGMA cache_size"))
        }
        XCTAssertEqual(cacheDuringWalk, [-JobQueue.walkCacheKiB])
        XCTAssertEqual(try queue.database.scalarInt("PRAGMA cache_size"), cacheSize)
        XCTAssertNotEqual(cacheSize, -JobQueue.walkCacheKiB)
        XCTAssertEqual(jobs, try (1...10).map { try XCTUnwrap(try queue.job(id: $0)) }, "the same jobs as job(id:) reads")
    }

    func testStateFiltersAcrossPages() throws {
        let queue = try queueOfTen()
        for batch in [1, 2, 100] {
            XCTAssertEqual(try ids(queue, state: .failed, batch: batch), [2, 3], "batch \(batch)")
            XCTAssertEqual(try ids(queue, state: .done, batch: batch), [1], "batch \(batch)")
            XCTAssertEqual(try ids(queue, state: .queued, batch: batch), Array(4...10), "batch \(batch)")
            XCTAssertEqual(try ids(queue, state: .cancelled, batch: batch), [], "batch \(batch)")
        }
    }

    /// No page is being read while `body` runs: it may change the queue, and a job added
    /// meanwhile comes at the end. An error from `body` stops the walk.
    func testTheQueueMayChangeDuringTheWalkAndAnErrorStopsIt() throws {
        let queue = try queueOfTen()
        let directory = (try XCTUnwrap(try queue.job(id: 1)).destination as NSString).deletingLastPathComponent
        var seen: [Int] = []
        try queue.forEachJob(batch: 3) { job in
            seen.append(job.id)
            if job.id == 2 { try self.add(["https://e.example/late"], to: queue, in: directory) }
            if job.id == 5 { _ = try queue.cancel([9]) }
        }
        XCTAssertEqual(seen, Array(1...11))
        XCTAssertEqual(try ids(queue, state: .cancelled, batch: 2), [9])

        struct Stop: Error {}
        var calls = 0
        XCTAssertThrowsError(try queue.forEachJob(batch: 2) { _ in
            calls += 1
            if calls == 3 { throw Stop() }
        }) { XCTAssertTrue($0 is Stop) }
        XCTAssertEqual(calls, 3)
    }
}
