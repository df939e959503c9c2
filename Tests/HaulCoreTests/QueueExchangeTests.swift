import Foundation
import XCTest
@testable import HaulCore

/// The queue port's exchange on SQLite: slots, claims ahead, batched outcomes, renewals — each
/// guarantee written on `JobStore` and `Exchange`, checked on two connections where it matters.
final class QueueExchangeTests: XCTestCase {
    private func request(_ owner: String, claim: Int = 0, want: [Int: Int] = [:]) -> Exchange {
        var request = Exchange(owner: owner, leaseMilliseconds: 60_000)
        request.claim = claim
        request.wantSlots = want
        return request
    }

    private func hostID(_ queue: JobQueue, _ host: String) throws -> Int {
        try queue.database.scalarInt("SELECT id FROM hosts WHERE host = ?", [host])
    }

    func testLiveSlotsOfAHostNeverOutnumberItsCapOverTwoConnections() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try add((0..<10).map { "https://a.example/\($0)" }, to: queue, in: directory.path)
        try queue.setHostCap(3, host: nil)
        let other = try JobQueue(path: directory.file("haul.db"))
        other.clock = clock.function
        let a = try hostID(queue, "a.example:443")

        let mine = try queue.exchange(request("m/1/1", want: [a: 2])).grantedSlots
        XCTAssertEqual(mine.map(\.index), [0, 1])
        let theirs = try other.exchange(request("m/2/2", want: [a: 5]))
        XCTAssertEqual(theirs.grantedSlots.map(\.index), [2], "only the cap's last slot is left")
        XCTAssertEqual(try queue.liveSlots(), ["a.example:443": 3])
        // The refused claimer is remembered, so the holder hears that it is wanted.
        var renew = request("m/1/1")
        renew.heldByHost = [a: 0]
        XCTAssertEqual(try queue.exchange(renew).contendedHosts, [], "2 against 1: shares one apart, nobody gives one back")

        // A slot given back goes to the next asker; an expired one too, and its renewal fails.
        var giveBack = request("m/1/1")
        giveBack.releaseSlots = [mine[0]]
        _ = try queue.exchange(giveBack)
        XCTAssertEqual(try other.exchange(request("m/2/2", want: [a: 5])).grantedSlots.map(\.index), [0])
        clock.advance(by: 60_001)
        XCTAssertEqual(try other.exchange(request("m/2/2", want: [a: 1])).grantedSlots.map(\.index), [0],
                       "expired slots are free again (the lowest index first)")
        var late = request("m/1/1")
        late.renewSlots = [mine[1]]
        XCTAssertEqual(try queue.exchange(late).lostSlots, [mine[1]], "an expired slot is not renewed")
        XCTAssertLessThanOrEqual(try queue.liveSlots()["a.example:443"] ?? 0, 3)
    }

    /// Claims read the hosts with queued jobs a page at a time: hosts whose jobs all wait to be
    /// retried, more than a page of them ahead in the order, do not hide a host with a job due.
    func testAClaimLooksPastAPageOfHostsWithNothingDue() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let hosts = JobQueue.hostsPerClaimPage + 44
        try add((0..<hosts).map { "https://h\($0).example/f" }, to: queue, in: directory.path)
        var claim = request("m/1/1", claim: hosts)
        claim.heldByHost = [:]
        let claimed = try queue.exchange(claim).claimed
        XCTAssertEqual(claimed.count, hosts)
        // Every host but the last claimed waits an hour; the last is due at once, and the claims
        // put it behind all the others.
        var outcomes = request("m/1/1")
        outcomes.outcomes = claimed.enumerated().map { index, lease in
            .retry(jobID: lease.jobID, token: lease.token, at: index == hosts - 1 ? clock.now : clock.now + 3_600_000,
                   status: 503, error: "HTTP 503", progress: Progress(jobID: lease.jobID, token: lease.token, receivedBytes: 0, expectedBytes: nil))
        }
        XCTAssertTrue(try queue.exchange(outcomes).outcomes.allSatisfy { $0 == .recorded })
        let again = try queue.exchange(request("m/1/1", claim: 1)).claimed
        XCTAssertEqual(again.map(\.jobID), [claimed[hosts - 1].jobID], "the host with a job due, past the first page")
        try assertCountersConsistent(queue.database)
    }

    func testALoweredCapRefusesTheRenewalOfSlotsBeyondIt() throws {
        let (queue, directory) = try makeQueue(clock: TestClock())
        try add(["https://a.example/1"], to: queue, in: directory.path)
        try queue.setHostCap(4, host: nil)
        let a = try hostID(queue, "a.example:443")
        let slots = try queue.exchange(request("m/1/1", want: [a: 4])).grantedSlots
        XCTAssertEqual(slots.count, 4)
        try queue.setHostCap(2, host: "a.example:443")
        var renew = request("m/1/1")
        renew.renewSlots = slots
        XCTAssertEqual(Set(try queue.exchange(renew).lostSlots.map(\.index)), [2, 3])
        XCTAssertEqual(try queue.liveSlots(), ["a.example:443": 2])
    }

    func testAPausedHostGetsNoSlotAndIsReported() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try add(["https://a.example/1"], to: queue, in: directory.path)
        let a = try hostID(queue, "a.example:443")
        var pause = request("m/1/1", want: [a: 1])
        pause.pauses = [HostPause(host: "a.example:443", until: clock.now + 5_000, reason: "Retry-After")]
        let result = try queue.exchange(pause)
        XCTAssertEqual(result.grantedSlots, [], "pauses are recorded before slots are granted")
        XCTAssertEqual(result.pausedHosts, [a: clock.now + 5_000])
        clock.advance(by: 5_001)
        XCTAssertEqual(try queue.exchange(request("m/1/1", want: [a: 1])).grantedSlots.count, 1)
    }

    func testClaimsAheadCountAttemptsButNotAgainstTheCapAndOutcomesAreFencedByToken() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        let inHand = queue.claimAheadRounds * 2
        try add((0..<(inHand + 4)).map { "https://a.example/\($0)" }, to: queue, in: directory.path)
        try queue.setHostCap(2, host: nil)
        let claimed = try queue.exchange(request("m/1/1", claim: inHand + 4)).claimed
        XCTAssertEqual(claimed.count, inHand, "at most the store's rounds times the cap in hand per host")
        XCTAssertTrue(claimed.allSatisfy { $0.job.attempts == 1 && $0.job.state == .running })
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM jobs WHERE state = 'running' AND attempt_started_at IS NOT NULL"), inHand)
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM attempts"), 0, "an open attempt's record is on its job's row")

        var outcomes = request("m/1/1")
        outcomes.outcomes = [
            .done(jobID: claimed[0].jobID, token: claimed[0].token, status: 200, bytes: 5),
            .retry(jobID: claimed[1].jobID, token: claimed[1].token, at: clock.now + 1_000, status: 503, error: "HTTP 503",
                   progress: Progress(jobID: claimed[1].jobID, token: claimed[1].token, receivedBytes: 3, expectedBytes: 9)),
            .fail(jobID: claimed[2].jobID, token: "not-the-token", status: 404, reason: "HTTP 404"),
            .release(jobID: claimed[3].jobID, token: claimed[3].token, reason: "interrupted: stop", progress: nil),
        ]
        let result = try queue.exchange(outcomes)
        XCTAssertEqual(result.outcomes, [.recorded, .recorded, .stale, .recorded])
        XCTAssertEqual(try queue.job(id: claimed[0].jobID)?.state, .done)
        XCTAssertEqual(try queue.job(id: claimed[1].jobID)?.state, .queued)
        XCTAssertEqual(try queue.job(id: claimed[1].jobID)?.receivedBytes, 3)
        XCTAssertEqual(try queue.job(id: claimed[2].jobID)?.state, .running, "a wrong token moves nothing")
        XCTAssertEqual(try queue.job(id: claimed[3].jobID)?.attempts, 0, "a released attempt is not counted")
        try assertCountersConsistent(queue.database)
    }

    /// The per-job statements run `OR FAIL` (no statement journal, see `JobQueue`): what makes
    /// that safe is that a failure anywhere in an exchange undoes the whole exchange.
    func testAFailureMidExchangeUndoesEveryChangeOfIt() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try add((0..<6).map { "https://a.example/\($0)" }, to: queue, in: directory.path)
        try queue.setHostCap(8, host: nil)
        let claimed = try queue.exchange(request("m/1/1", claim: 3)).claimed
        XCTAssertEqual(claimed.count, 3)
        let totals = { try queue.database.rows("SELECT state, jobs, received_bytes FROM job_totals ORDER BY state") {
            "\($0.string(0)) \($0.int(1)) \($0.int(2))" } }
        let before = try totals()
        // The third completion fails inside SQLite, after the first two and their triggers ran.
        try queue.database.execute("""
            CREATE TRIGGER test_refuse BEFORE UPDATE OF state ON jobs WHEN NEW.id = \(claimed[2].jobID) AND NEW.state = 'done'
            BEGIN SELECT RAISE(FAIL, 'refused by the test'); END;
            """)
        var outcomes = request("m/1/1", claim: 3)
        outcomes.outcomes = claimed.map { .done(jobID: $0.jobID, token: $0.token, status: 200, bytes: 7) }
        XCTAssertThrowsError(try queue.exchange(outcomes)) { error in
            XCTAssertTrue(String(describing: error).contains("refused by the test"), "\(error)")
        }
        for lease in claimed {
            XCTAssertEqual(try queue.job(id: lease.jobID)?.state, .running, "job \(lease.jobID)")
            XCTAssertEqual(try queue.job(id: lease.jobID)?.receivedBytes, 0, "job \(lease.jobID)")
        }
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM jobs WHERE state = 'queued'"), 3, "nothing more claimed")
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM attempts WHERE finished_at IS NOT NULL"), 0)
        XCTAssertEqual(try queue.database.scalarInt("SELECT count(*) FROM jobs WHERE done_attempt_token IS NOT NULL"), 0)
        XCTAssertEqual(try totals(), before)
        try assertCountersConsistent(queue.database)
        // The same exchange goes through once nothing refuses it.
        try queue.database.execute("DROP TRIGGER test_refuse")
        XCTAssertEqual(try queue.exchange(outcomes).outcomes, [.recorded, .recorded, .recorded])
        try assertCountersConsistent(queue.database)
    }

    func testAnExpiredJobLeaseIsNeverRenewed() throws {
        let clock = TestClock()
        let (queue, directory) = try makeQueue(clock: clock)
        try add(["https://a.example/1"], to: queue, in: directory.path)
        let lease = try XCTUnwrap(try queue.exchange(request("m/1/1", claim: 1)).claimed.first)
        clock.advance(by: 60_000)
        var renew = request("m/1/1")
        renew.renewJobs = [JobLeaseID(jobID: lease.jobID, token: lease.token)]
        XCTAssertEqual(try queue.exchange(renew).lostJobs, [JobLeaseID(jobID: lease.jobID, token: lease.token)])
    }

    func testDeadOwnersLoseTheirSlotsAtOnce() throws {
        let (queue, directory) = try makeQueue(clock: TestClock())
        try add(["https://a.example/1"], to: queue, in: directory.path)
        let a = try hostID(queue, "a.example:443")
        _ = try queue.exchange(request("gone/1/1", want: [a: 2]))
        XCTAssertEqual(try queue.leaseOwners(), ["gone/1/1"], "slot holders are lease owners")
        try queue.expireLeases(ofOwners: ["gone/1/1"])
        XCTAssertEqual(try queue.liveSlots(), [:])
    }
}
