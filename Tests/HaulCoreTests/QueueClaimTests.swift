import Foundation
import Synchronization
import XCTest
@testable import HaulCore
import HaulTestSupport

/// Claiming: per-host caps, leases and their expiry, stale results, retries, fairness,
/// cancel/retry, and concurrent claimers.
final class QueueClaimTests: XCTestCase {
    /// Adds `count` jobs for `host` (names are unique across hosts) and returns their ids.
    @discardableResult
    private func addJobs(_ host: String, _ count: Int, to queue: JobQueue, in directory: TempDirectory,
                         maxAttempts: Int = 5) throws -> [Int] {
        try add((0..<count).map { "https://\(host)/\(host)-\($0)" }, to: queue, in: directory.path, maxAttempts: maxAttempts)
            .compactMap(\.jobID)
    }

    private func hostCounts(_ leases: [Lease]) -> [String: Int] {
        leases.reduce(into: [:]) { $0[$1.job.host, default: 0] += 1 }
    }

    // MARK: - Caps

    func testPerHostCapIsRespected() throws {
        let (queue, directory) = try makeQueue()
        try addJobs("a.example", 10, to: queue, in: directory)
        try addJobs("b.example", 10, to: queue, in: directory)
        let first = try queue.claim(ClaimRequest(limit: 100, perHostCap: 3))
        XCTAssertEqual(hostCounts(first), ["a.example:443": 3, "b.example:443": 3])
        XCTAssertEqual(try QueueInvariants.runningPerHost(queue.database), ["a.example:443": 3, "b.example:443": 3])
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 100, perHostCap: 3)), [], "both hosts are at their cap")
        // Another connection sees the same cap: running jobs are counted in the database.
        let other = try JobQueue(path: directory.file("haul.db"))
        XCTAssertEqual(try other.claim(ClaimRequest(limit: 100, perHostCap: 3)), [])
        // Finishing one job makes room for exactly one more, of the same host.
        let done = try XCTUnwrap(first.first { $0.job.host == "a.example:443" })
        try queue.complete(jobID: done.jobID, token: done.token, status: 200, bytes: 1)
        let next = try other.claim(ClaimRequest(limit: 100, perHostCap: 3))
        XCTAssertEqual(next.map(\.job.host), ["a.example:443"])
        // A larger cap lets more run.
        XCTAssertEqual(hostCounts(try queue.claim(ClaimRequest(limit: 100, perHostCap: 5))), ["a.example:443": 2, "b.example:443": 2])
        // Every claim is an attempt: ended ones have their record, open ones and those that
        // finished their job are on their job's row.
        XCTAssertEqual(try queue.database.scalarInt("""
            SELECT (SELECT count(*) FROM attempts) + (SELECT count(*) FROM jobs WHERE state = 'running')
                + (SELECT count(*) FROM jobs WHERE done_attempt_token IS NOT NULL)
            """), 11)
        try assertCountersConsistent(queue.database)
    }

    func testLimitIsRespectedAndEveryLeaseIsRecorded() throws {
        let (queue, directory) = try makeQueue()
        for host in ["a.example", "b.example", "c.example"] { try addJobs(host, 5, to: queue, in: directory) }
        let leases = try queue.claim(ClaimRequest(limit: 7, perHostCap: 5, leaseMilliseconds: 30_000, owner: "me/1/2", maxAttempts: 9))
        XCTAssertEqual(leases.count, 7)
        XCTAssertEqual(Set(leases.map(\.jobID)).count, 7)
        XCTAssertEqual(Set(leases.map(\.token)).count, 7, "every lease gets its own token")
        for lease in leases {
            let job = try XCTUnwrap(try queue.job(id: lease.jobID))
            XCTAssertEqual(job.state, .running)
            XCTAssertEqual(job.leaseToken, lease.token)
            XCTAssertEqual(job.leaseOwner, "me/1/2")
            XCTAssertEqual(job.attempts, 1)
            XCTAssertEqual(job.maxAttempts, 9)
            XCTAssertEqual(try queue.attempts(jobID: lease.jobID).map(\.number), [1])
        }
        XCTAssertEqual(try queue.leaseOwners(), ["me/1/2"])
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 0, perHostCap: 5)), [])
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 5, perHostCap: 0)), [])
    }

    // MARK: - Leases

    /// An attempt's record is the same whichever connection ends it, the claimer's or another
    /// one: both read it from the job's row (a finishing attempt's record stays there).
    func testAFinishedAttemptIsListedTheSameFromAnyConnection() throws {
        let clock = TestClock()
        clock.set(1_000)
        let (queue, directory) = try makeQueue(clock: clock)
        try addJobs("a.example", 2, to: queue, in: directory)
        let leases = try queue.claim(ClaimRequest(limit: 2, perHostCap: 2))
        XCTAssertEqual(leases.count, 2)
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM attempts"), 0, "open attempts live on their jobs' rows")
        let other = try JobQueue(path: directory.file("haul.db"))
        other.clock = clock.function
        clock.set(2_000)
        try queue.complete(jobID: leases[0].jobID, token: leases[0].token, status: 200, bytes: 7)
        try other.complete(jobID: leases[1].jobID, token: leases[1].token, status: 200, bytes: 8)
        for (lease, bytes) in zip(leases, [7, 8]) {
            let attempts = try queue.attempts(jobID: lease.jobID)
            XCTAssertEqual(attempts.map(\.record),
                           ["1 1000 2000 200 \(bytes)"], "job \(lease.jobID)")
        }
        // A stale token writes no record, on either connection.
        XCTAssertThrowsError(try queue.complete(jobID: leases[0].jobID, token: leases[0].token, status: 200, bytes: 7))
        XCTAssertThrowsError(try other.complete(jobID: leases[1].jobID, token: "stale", status: 200, bytes: 8))
        for (lease, bytes) in zip(leases, [7, 8]) {
            XCTAssertEqual(try queue.attempts(jobID: lease.jobID).map(\.bytes), [bytes], "job \(lease.jobID)")
        }
    }

    func testAnExpiredLeaseReturnsTheJob() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let id = try XCTUnwrap(try addJobs("a.example", 1, to: queue, in: directory).first)
        let first = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1, leaseMilliseconds: 1000)).first)
        XCTAssertEqual(first.job.leaseExpiresAt, clock.now + 1000)
        clock.advance(by: 999)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 1, perHostCap: 5)), [], "the lease is still live")
        XCTAssertEqual(try queue.job(id: id)?.state, .running)
        clock.advance(by: 1)
        let second = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1, leaseMilliseconds: 1000)).first)
        XCTAssertEqual(second.jobID, id)
        XCTAssertNotEqual(second.token, first.token)
        XCTAssertEqual(second.job.attempts, 1, "a lease lost without progress counts no attempt")
        let attempts = try queue.attempts(jobID: id)
        XCTAssertEqual(attempts.map(\.number), [1, 1])
        XCTAssertEqual(attempts[0].finishedAt, clock.now)
        XCTAssertTrue(attempts[0].error?.contains("lease expired") == true && !attempts[0].wasCounted, "\(attempts[0])")
        XCTAssertNil(attempts[1].finishedAt)
        try assertCountersConsistent(queue.database)
    }

    func testRenewingKeepsTheLease() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try addJobs("a.example", 1, to: queue, in: directory)
        let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1, leaseMilliseconds: 1000)).first)
        clock.advance(by: 900)
        XCTAssertEqual(try queue.renew([(lease.jobID, lease.token)], leaseMilliseconds: 1000), [])
        clock.advance(by: 900)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 1, perHostCap: 5)), [], "renewed lease must not expire")
        XCTAssertNoThrow(try queue.complete(jobID: lease.jobID, token: lease.token, status: 200, bytes: 5))
    }

    func testALateResultWithAStaleLeaseIsRefused() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let id = try XCTUnwrap(try addJobs("a.example", 1, to: queue, in: directory).first)
        let stale = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1, leaseMilliseconds: 1000)).first)
        clock.advance(by: 5000)
        let fresh = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1, leaseMilliseconds: 1000)).first)
        XCTAssertEqual(fresh.jobID, id)

        XCTAssertThrowsError(try queue.complete(jobID: id, token: stale.token, status: 200, bytes: 10)) { error in
            XCTAssertEqual((error as? StaleLeaseError)?.jobID, id, "\(error)")
        }
        XCTAssertThrowsError(try queue.reschedule(jobID: id, token: stale.token, at: 0, status: 500, error: "x")) {
            XCTAssertTrue($0 is StaleLeaseError, "\($0)")
        }
        XCTAssertThrowsError(try queue.fail(jobID: id, token: stale.token, status: 404, reason: "gone")) {
            XCTAssertTrue($0 is StaleLeaseError, "\($0)")
        }
        XCTAssertFalse(try queue.release(jobID: id, token: stale.token, reason: "stop"))
        XCTAssertEqual(try queue.renew([(id, stale.token)], leaseMilliseconds: 1000), [id])
        try queue.recordProgress([Progress(jobID: id, token: stale.token, receivedBytes: 999, expectedBytes: 999)])
        let job = try XCTUnwrap(try queue.job(id: id))
        XCTAssertEqual(job.state, .running)
        XCTAssertEqual(job.leaseToken, fresh.token, "the stale holder changed the job")
        XCTAssertEqual(job.receivedBytes, 0)
        XCTAssertNil(job.expectedBytes)

        try queue.complete(jobID: id, token: fresh.token, status: 200, bytes: 10)
        XCTAssertEqual(try queue.job(id: id)?.state, .done)
        XCTAssertThrowsError(try queue.complete(jobID: id, token: fresh.token, status: 200, bytes: 10), "completing twice")
        try assertCountersConsistent(queue.database)
    }

    /// A lease lost on the last attempt, before any progress, does not fail the job: that
    /// attempt is not counted, and the job is claimed again (`Lease.lostLeaseLimit(maxAttempts:)` bounds it).
    func testALeaseExpiringOnTheLastAttemptWithoutProgressGivesTheJobBack() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let id = try XCTUnwrap(try addJobs("a.example", 1, to: queue, in: directory, maxAttempts: 1).first)
        _ = try queue.claim(ClaimRequest(limit: 1, perHostCap: 1, leaseMilliseconds: 1000))
        clock.advance(by: 1000)
        let again = try queue.claim(ClaimRequest(limit: 1, perHostCap: 1))
        XCTAssertEqual(again.map(\.jobID), [id])
        XCTAssertEqual(again.first?.job.attempts, 1)
        try assertCountersConsistent(queue.database)
    }

    func testExpireLeasesOfOwnersFreesTheirJobsAtOnce() throws {
        let (queue, directory) = try makeQueue()
        try addJobs("a.example", 4, to: queue, in: directory)
        let gone = try queue.claim(ClaimRequest(limit: 2, perHostCap: 4, leaseMilliseconds: 3_600_000, owner: "m/1/1"))
        let alive = try queue.claim(ClaimRequest(limit: 2, perHostCap: 4, leaseMilliseconds: 3_600_000, owner: "m/2/2"))
        XCTAssertEqual(Set(try queue.leaseOwners()), ["m/1/1", "m/2/2"])
        try queue.expireLeases(ofOwners: ["m/1/1"])
        XCTAssertEqual(try queue.leaseOwners(), ["m/2/2"])
        let again = try queue.claim(ClaimRequest(limit: 4, perHostCap: 4))
        XCTAssertEqual(Set(again.map(\.jobID)), Set(gone.map(\.jobID)))
        XCTAssertTrue(Set(again.map(\.jobID)).isDisjoint(with: alive.map(\.jobID)))
    }

    // MARK: - Retries

    func testRescheduleFailsTheJobAfterMaxAttempts() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let id = try XCTUnwrap(try addJobs("a.example", 1, to: queue, in: directory, maxAttempts: 3).first)
        var results: [RescheduleResult] = []
        for _ in 1...3 {
            let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)).first, "attempt \(results.count + 1)")
            results.append(try queue.reschedule(jobID: id, token: lease.token, at: clock.now, status: 503, error: "HTTP 503", bytes: 7))
            clock.advance(by: 10)
        }
        XCTAssertEqual(results.dropLast(), [.queued(at: clock.now - 30), .queued(at: clock.now - 20)])
        XCTAssertEqual(results.last, .failed(reason: "gave up after 3 attempts: HTTP 503"))
        let job = try XCTUnwrap(try queue.job(id: id))
        XCTAssertEqual(job.state, .failed)
        XCTAssertEqual(job.lastError, "gave up after 3 attempts: HTTP 503")
        XCTAssertEqual(job.lastStatus, 503)
        XCTAssertEqual(job.attempts, 3)
        XCTAssertNotNil(job.finishedAt)
        XCTAssertNil(job.leaseToken)
        let attempts = try queue.attempts(jobID: id)
        XCTAssertEqual(attempts.map(\.number), [1, 2, 3])
        XCTAssertTrue(attempts.allSatisfy { $0.finishedAt != nil && $0.status == 503 && $0.bytes == 7 }, "\(attempts)")
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)), [], "a failed job is not claimed")
        XCTAssertEqual(try queue.job(id: id)?.lastError, "gave up after 3 attempts: HTTP 503", "the reason, whole")
        XCTAssertEqual(try queue.status().topFailures.first?.reason, "HTTP 503", "grouped by its kind")
        try assertCountersConsistent(queue.database)
    }

    func testARescheduledJobWaitsUntilItsTime() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let id = try XCTUnwrap(try addJobs("a.example", 1, to: queue, in: directory).first)
        let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)).first)
        let due = clock.now + 60_000
        XCTAssertEqual(try queue.reschedule(jobID: id, token: lease.token, at: due, status: nil, error: "connection reset"), .queued(at: due))
        let status = try queue.status()
        XCTAssertEqual(status.waitingForRetry, 1)
        XCTAssertEqual(status.nextRetryAt, due)
        clock.advance(by: 59_999)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)), [])
        clock.advance(by: 1)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)).map(\.jobID), [id])
        XCTAssertEqual(try queue.status().waitingForRetry, 0)
    }

    func testReleaseDoesNotCountTheAttempt() throws {
        let (queue, directory) = try makeQueue()
        let id = try XCTUnwrap(try addJobs("a.example", 1, to: queue, in: directory, maxAttempts: 1).first)
        for _ in 0..<3 {
            let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 1)).first)
            XCTAssertTrue(try queue.release(jobID: id, token: lease.token, reason: "interrupted"))
        }
        let job = try XCTUnwrap(try queue.job(id: id))
        XCTAssertEqual(job.state, .queued)
        XCTAssertEqual(job.attempts, 0)
        try assertCountersConsistent(queue.database)
    }

    // MARK: - Fairness

    func testABigHostDoesNotStarveASmallOne() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try addJobs("big.example", 1000, to: queue, in: directory)
        try addJobs("small.example", 10, to: queue, in: directory)
        let first = try queue.claim(ClaimRequest(limit: 8, perHostCap: 4))
        XCTAssertEqual(hostCounts(first), ["big.example:443": 4, "small.example:443": 4])
        for lease in first { try queue.complete(jobID: lease.jobID, token: lease.token, status: 200, bytes: 1) }
        // Claiming one at a time, hosts take turns until the small one runs dry.
        var order: [String] = []
        for _ in 0..<12 {
            clock.advance(by: 1)
            let lease = try XCTUnwrap(try queue.claim(ClaimRequest(limit: 1, perHostCap: 100)).first)
            order.append(lease.job.host == "small.example:443" ? "s" : "b")
        }
        XCTAssertEqual(order.filter { $0 == "s" }.count, 6, "turns were \(order.joined())")
        XCTAssertEqual(order.prefix(12).joined().replacingOccurrences(of: "sb", with: "").replacingOccurrences(of: "bs", with: ""), "",
                       "hosts must alternate: \(order.joined())")
    }

    func testAPausedHostIsSkippedUntilItsPauseEnds() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try addJobs("a.example", 3, to: queue, in: directory)
        try addJobs("b.example", 3, to: queue, in: directory)
        try queue.pauseHost("a.example:443", until: clock.now + 10_000, reason: "Retry-After: 10")
        try queue.pauseHost("a.example:443", until: clock.now + 5_000, reason: "shorter")  // the later pause is kept
        XCTAssertEqual(Set(try queue.claim(ClaimRequest(limit: 10, perHostCap: 10)).map(\.job.host)), ["b.example:443"])
        let status = try queue.status()
        XCTAssertEqual(status.pausedHosts.map(\.host), ["a.example:443"])
        XCTAssertEqual(status.pausedHosts.first?.until, clock.now + 10_000)
        XCTAssertEqual(status.pausedHosts.first?.reason, "Retry-After: 10")
        clock.advance(by: 9_999)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 10, perHostCap: 10)), [])
        clock.advance(by: 1)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 10, perHostCap: 10)).count, 3)
        XCTAssertEqual(try queue.status().pausedHosts.count, 0)
    }

    // MARK: - Cancel and retry

    func testCancelAndRetry() throws {
        let (queue, directory) = try makeQueue()
        let ids = try addJobs("a.example", 5, to: queue, in: directory, maxAttempts: 1)
        let tokens = Dictionary(uniqueKeysWithValues: try queue.claim(ClaimRequest(limit: 5, perHostCap: 10)).map { ($0.jobID, $0.token) })
        XCTAssertEqual(Set(tokens.keys), Set(ids))
        // ids[0] queued, ids[1] running, ids[2] done, ids[3] failed, ids[4] running.
        XCTAssertTrue(try queue.release(jobID: ids[0], token: tokens[ids[0]]!, reason: "set-up"))
        try queue.complete(jobID: ids[2], token: tokens[ids[2]]!, status: 200, bytes: 1)
        try queue.fail(jobID: ids[3], token: tokens[ids[3]]!, status: 404, reason: "HTTP 404 Not Found")

        XCTAssertEqual(try queue.cancel([ids[0], ids[1], ids[2], ids[3], 999_999]),
                       [.changed, .changed, .unchanged(.done), .changed, .notFound])
        XCTAssertEqual(try queue.cancel([ids[0]]), [.unchanged(.cancelled)])
        XCTAssertThrowsError(try queue.complete(jobID: ids[1], token: tokens[ids[1]]!, status: 200, bytes: 1),
                             "a cancelled job's worker must not complete it") { XCTAssertTrue($0 is StaleLeaseError, "\($0)") }
        let cancelledRunning = try XCTUnwrap(try queue.job(id: ids[1]))
        XCTAssertEqual(cancelledRunning.state, .cancelled)
        XCTAssertNil(cancelledRunning.leaseToken)
        XCTAssertNotNil(cancelledRunning.finishedAt)
        XCTAssertEqual(try queue.attempts(jobID: ids[1]).last?.error, "cancelled")
        XCTAssertNotNil(try queue.attempts(jobID: ids[1]).last?.finishedAt)
        XCTAssertEqual(try queue.job(id: ids[3])?.lastError, "HTTP 404 Not Found", "cancelling keeps the failure reason")
        XCTAssertEqual(try queue.status().counts, [.queued: 0, .running: 1, .done: 1, .failed: 0, .cancelled: 3])

        XCTAssertEqual(try queue.retry([ids[0], ids[2], ids[4], ids[3], 999_999]),
                       [.changed, .unchanged(.done), .unchanged(.running), .changed, .notFound])
        let retried = try XCTUnwrap(try queue.job(id: ids[3]))
        XCTAssertEqual(retried.state, .queued)
        XCTAssertEqual(retried.attempts, 0)
        XCTAssertNil(retried.lastError)
        XCTAssertNil(retried.finishedAt)
        XCTAssertEqual(try queue.retry([ids[0]]), [.unchanged(.queued)])
        XCTAssertEqual(Set(try queue.claim(ClaimRequest(limit: 5, perHostCap: 10)).map(\.jobID)), [ids[0], ids[3]])
        try assertCountersConsistent(queue.database)
    }

    func testRetryAllFailedRequeuesOnlyFailedJobs() throws {
        let (queue, directory) = try makeQueue()
        let ids = try addJobs("a.example", 4, to: queue, in: directory, maxAttempts: 1)
        let leases = try queue.claim(ClaimRequest(limit: 4, perHostCap: 4))
        XCTAssertEqual(leases.count, 4)
        try queue.fail(jobID: leases[0].jobID, token: leases[0].token, status: 500, reason: "boom")
        try queue.fail(jobID: leases[1].jobID, token: leases[1].token, status: 500, reason: "boom")
        try queue.complete(jobID: leases[2].jobID, token: leases[2].token, status: 200, bytes: 1)
        _ = try queue.cancel([leases[3].jobID])
        XCTAssertEqual(try queue.retryAllFailed(rowsPerStatement: 1), 2, "a statement a job, until none is left")
        XCTAssertEqual(try queue.status().counts, [.queued: 2, .running: 0, .done: 1, .failed: 0, .cancelled: 1])
        XCTAssertEqual(try queue.retryAllFailed(), 0)
        let requeued = try queue.claim(ClaimRequest(limit: 4, perHostCap: 4))
        XCTAssertEqual(Set(requeued.map(\.jobID)), [leases[0].jobID, leases[1].jobID])
        XCTAssertTrue(requeued.allSatisfy { $0.job.attempts == 1 }, "attempts were reset")
        XCTAssertEqual(ids.count, 4)
        try assertCountersConsistent(queue.database)
    }

    /// Failed jobs of three hosts, between done ones, requeued a few at a time: each chunk moves
    /// its own rows' counts (jobs, bytes, each host's queued), whatever the chunk size.
    func testRetryAllFailedInChunksKeepsEveryCounter() throws {
        for chunk in [2, 3, 100] {
            let (queue, directory) = try makeQueue()
            var ids: [Int] = []
            for round in 0..<4 {
                for host in ["a.example", "b.example", "c.example"] {
                    ids += try add(["https://\(host)/\(round)"], to: queue, in: directory.path, maxAttempts: 1).compactMap(\.jobID)
                }
            }
            let leases = try queue.claim(ClaimRequest(limit: 12, perHostCap: 4))
            XCTAssertEqual(leases.count, 12)
            var failed: Set<Int> = []
            for (index, lease) in leases.enumerated() {
                try queue.recordProgress([Progress(jobID: lease.jobID, token: lease.token, receivedBytes: 10 * index,
                                                   expectedBytes: index % 2 == 0 ? 100 : nil)])
                if index % 3 == 0 {
                    try queue.complete(jobID: lease.jobID, token: lease.token, status: 200, bytes: 100)
                } else {
                    try queue.fail(jobID: lease.jobID, token: lease.token, status: 500, reason: "boom", bytes: 10 * index)
                    failed.insert(lease.jobID)
                }
            }
            XCTAssertEqual(try queue.retryAllFailed(rowsPerStatement: chunk), failed.count, "chunks of \(chunk)")
            XCTAssertEqual(try queue.status().counts, [.queued: failed.count, .running: 0, .done: 12 - failed.count, .failed: 0, .cancelled: 0])
            try assertCountersConsistent(queue.database)
            XCTAssertEqual(Set(try queue.claim(ClaimRequest(limit: 12, perHostCap: 4)).map(\.jobID)), failed)
        }
    }

    // MARK: - Status

    func testStatusCounts() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try addJobs("a.example", 6, to: queue, in: directory, maxAttempts: 1)
        try addJobs("b.example", 4, to: queue, in: directory, maxAttempts: 2)
        let leases = try queue.claim(ClaimRequest(limit: 10, perHostCap: 10))
        XCTAssertEqual(leases.count, 10)
        let a = leases.filter { $0.job.host == "a.example:443" }
        let b = leases.filter { $0.job.host == "b.example:443" }
        try queue.recordProgress([Progress(jobID: a[0].jobID, token: a[0].token, receivedBytes: 40, expectedBytes: 100)])
        try queue.complete(jobID: a[1].jobID, token: a[1].token, status: 200, bytes: 1000)
        try queue.fail(jobID: a[2].jobID, token: a[2].token, status: 404, reason: "HTTP 404")
        try queue.fail(jobID: a[3].jobID, token: a[3].token, status: 404, reason: "HTTP 404")
        try queue.fail(jobID: a[4].jobID, token: a[4].token, status: nil, reason: "checksum mismatch")
        _ = try queue.cancel([a[5].jobID])
        try queue.reschedule(jobID: b[0].jobID, token: b[0].token, at: clock.now + 30_000, status: 503, error: "HTTP 503")
        try queue.reschedule(jobID: b[1].jobID, token: b[1].token, at: clock.now + 10_000, status: 503, error: "HTTP 503")
        try queue.release(jobID: b[2].jobID, token: b[2].token, reason: "stopped")
        try queue.pauseHost("b.example:443", until: clock.now + 20_000, reason: "Retry-After")
        try queue.pauseHost("c.example:443", until: clock.now - 1, reason: "over")

        let status = try queue.status()
        XCTAssertEqual(status.counts, [.queued: 3, .running: 2, .done: 1, .failed: 3, .cancelled: 1])
        XCTAssertEqual(status.total, 10)
        XCTAssertEqual(status.receivedBytes, 1040)
        XCTAssertEqual(status.expectedBytes, 1100)
        XCTAssertEqual(status.unknownSize, 7, "jobs without a known size, cancelled ones aside")
        XCTAssertEqual(status.waitingForRetry, 2)
        XCTAssertEqual(status.nextRetryAt, clock.now + 10_000)
        XCTAssertEqual(status.pausedHosts.map(\.host), ["b.example:443"])
        XCTAssertEqual(status.topFailures.map(\.reason), ["HTTP 404", "checksum mismatch"])
        XCTAssertEqual(status.topFailures.map(\.count), [2, 1])
        // Counted from an index in kind order: no failed job's reason is sorted in memory (a
        // temporary B-tree of every failed job: 419 MB for 1,000,000 of them).
        let plan = try queue.database.rows("EXPLAIN QUERY PLAN " + JobQueue.topFailuresSQL) { $0.string(3) }
        XCTAssertTrue(plan.contains { $0.contains("jobs_failed_kind") } && !plan.contains { $0.contains("GROUP BY") }, "\(plan)")
        try assertCountersConsistent(queue.database)

        clock.advance(by: 10_000)
        XCTAssertEqual(try queue.status().waitingForRetry, 1, "a retry that is due no longer waits")
    }

    /// Every way a job changes state or bytes keeps the counters equal to the jobs table (the
    /// queue keeps them itself: no trigger runs on an UPDATE of a job since migration 0015).
    func testCountersFollowEveryChangeOfAJob() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try addJobs("a.example", 8, to: queue, in: directory, maxAttempts: 1)
        try addJobs("b.example", 8, to: queue, in: directory, maxAttempts: 3)
        let leases = try queue.claim(ClaimRequest(limit: 16, perHostCap: 16, leaseMilliseconds: 1000))
        XCTAssertEqual(leases.count, 16)
        let a = leases.filter { $0.job.host == "a.example:443" }
        let b = leases.filter { $0.job.host == "b.example:443" }
        var step = "claim"
        func check(_ name: String, line: UInt = #line) throws {
            step = name
            try assertCountersConsistent(queue.database, line: line)
        }
        try check(step)
        try queue.recordProgress([Progress(jobID: b[0].jobID, token: b[0].token, receivedBytes: 40, expectedBytes: 100)])
        try check("progress")
        try queue.complete(jobID: a[0].jobID, token: a[0].token, status: 200, bytes: 1000)
        try check("complete")
        try queue.markUnchanged(jobID: a[1].jobID, token: a[1].token)
        try check("unchanged")
        try queue.keep(jobID: a[2].jobID, token: a[2].token, bytes: 77)
        try check("keep")
        try queue.reschedule(jobID: a[3].jobID, token: a[3].token, at: clock.now, status: 503, error: "HTTP 503")
        try check("reschedule to failed")
        try queue.reschedule(jobID: b[0].jobID, token: b[0].token, at: clock.now + 5_000, status: 503, error: "HTTP 503", bytes: 40)
        try check("reschedule to queued")
        try queue.fail(jobID: a[4].jobID, token: a[4].token, status: 404, reason: "HTTP 404")
        try check("fail")
        try queue.release(jobID: b[1].jobID, token: b[1].token, reason: "stopped")
        try check("release")
        XCTAssertThrowsError(try queue.complete(jobID: a[4].jobID, token: a[4].token, status: 200, bytes: 5), "stale")
        try check("stale completion")
        // The other leases expire: b's go back to the queue, a's (one attempt each) fail.
        clock.advance(by: 1000)
        XCTAssertEqual(try queue.claim(ClaimRequest(limit: 1, perHostCap: 16)).count, 1)
        try check("expiry and a claim")
        XCTAssertEqual(try queue.cancel([a[5].jobID, b[2].jobID, a[0].jobID]), [.changed, .changed, .unchanged(.done)])
        try check("cancel")
        XCTAssertEqual(try queue.retry([a[5].jobID, a[0].jobID]), [.changed, .unchanged(.done)])
        try check("retry")
        XCTAssertGreaterThan(try queue.retryAllFailed(), 1)
        try check("retry all failed")
        XCTAssertEqual(try queue.refetch([Refetch(jobID: a[0].jobID, adopt: nil, conditional: false),
                                          Refetch(jobID: a[2].jobID, adopt: nil, conditional: true),
                                          Refetch(jobID: b[3].jobID, adopt: nil, conditional: false)]), 2)
        try check("refetch")
        let status = try queue.status()
        XCTAssertEqual(status.counts[.done], 1, "the job kept 304 is still done")
        XCTAssertEqual(status.total, 16, step)
    }

    // MARK: - Concurrent claimers

    /// Two claimers on two connections, on two threads, claim and finish concurrently: no job is
    /// ever held by both, and together they never run more than the cap per host. SQLite's lock
    /// is not fair, so a round in which one claimer did all the work is run again (fresh
    /// database), up to three rounds.
    func testTwoClaimersOnTwoConnectionsNeverShareAJobOrExceedTheCap() throws {
        let directory = try makeTempDirectory()
        for round in 1...3 {
            let claims = try claimRound(in: try directory.makeDirectory("round-\(round)"))
            print("round \(round): claims per claimer \(claims)")
            if claims.allSatisfy({ $0 > 0 }) { return }
        }
        XCTFail("in three rounds, one claimer always did all the work: the claims never overlapped")
    }

    private func claimRound(in folder: String) throws -> [Int] {
        let path = folder + "/haul.db"
        let cap = 2
        do {
            let queue = try JobQueue(path: path)
            for host in ["a.example", "b.example", "c.example"] {
                try add((0..<200).map { "https://\(host)/\(host)-\($0)" }, to: queue, in: folder)
            }
        }
        let held = Mutex(Set<Int>())
        let duplicates = Mutex([String]())
        let reports = Mutex([ClaimWorker.Report]())
        let errors = Mutex([String]())
        let finished = DispatchGroup()
        // Both threads start claiming together: one alone can finish every job first.
        let arrived = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        for worker in 0..<2 {
            finished.enter()
            arrived.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                arrived.leave()
                go.wait()
                do {
                    let report = try ClaimWorker.run(
                        path: path, perHostCap: cap, seed: UInt64(worker + 1), owner: "worker-\(worker)", rescheduleOneIn: 4,
                        maximumHeld: 4,
                        onClaimed: { leases in
                            held.withLock { ids in
                                for lease in leases where !ids.insert(lease.jobID).inserted {
                                    duplicates.withLock { $0.append("job \(lease.jobID) claimed by worker \(worker) while held") }
                                }
                            }
                        },
                        willRelease: { id in _ = held.withLock { $0.remove(id) } })
                    reports.withLock { $0.append(report) }
                } catch {
                    errors.withLock { $0.append("worker \(worker): \(error)") }
                }
            }
        }
        arrived.wait()
        go.signal()
        go.signal()
        XCTAssertEqual(finished.wait(timeout: .now() + 45), .success, "claimers did not finish")
        XCTAssertEqual(errors.withLock { $0 }, [])
        XCTAssertEqual(duplicates.withLock { $0 }, [])
        let all = reports.withLock { $0 }
        XCTAssertEqual(all.count, 2)
        XCTAssertEqual(all.flatMap(\.violations), [])
        let database = try Database(path: path)
        XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM jobs WHERE state <> 'done'"), 0)
        XCTAssertEqual(all.reduce(0) { $0 + $1.claimed.count }, try database.scalarInt("""
            SELECT (SELECT count(*) FROM attempts) + (SELECT count(*) FROM jobs WHERE done_attempt_token IS NOT NULL)
            """), "every claim is one attempt")
        XCTAssertEqual(Set(all.flatMap(\.claimed)).count, 600)
        XCTAssertEqual(try database.scalarInt("SELECT count(*) FROM attempts WHERE finished_at IS NULL"), 0)
        try assertCountersConsistent(database)
        return all.map(\.claimed.count)
    }
}

extension QueueClaimTests {
    /// Lease tokens come from a pool of the system generator's bytes: across refills and
    /// threads, each is handed out once.
    func testLeaseTokensAreNeverHandedOutTwice() {
        let tokens = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let mine = (0..<2_000).map { _ in JobQueue.newToken() }
            tokens.withLock { $0 += mine }
        }
        let all = tokens.withLock { $0 }
        XCTAssertEqual(Set(all).count, all.count, "a token was handed out twice")
        let alphabet = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_")
        XCTAssertTrue(all.allSatisfy { $0.utf8.count == 15 && $0.allSatisfy(alphabet.contains) }, "\(all.prefix(3))")
        // Every character position takes many values (the bits are spread over all fifteen).
        for position in 0..<15 {
            let seen = Set(all.map { Array($0.utf8)[position] })
            XCTAssertGreaterThan(seen.count, 32, "position \(position)")
        }
    }
}
