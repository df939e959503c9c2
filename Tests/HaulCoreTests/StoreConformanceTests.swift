import Foundation
import HaulCore
import HaulPostgres
import HaulTestSupport
import Synchronization
import Testing

/// Every guarantee written on `JobStore` and `Exchange`, once, run against both backends: the
/// SQLite `JobQueue` and `PostgresJobStore` (on a throwaway cluster the test support starts).
@Suite(.serialized) struct StoreConformanceTests {
    private func request(_ owner: String, claim: Int = 0, want: [Int: Int] = [:], lease: Int = 60_000) -> Exchange {
        var request = Exchange(owner: owner, leaseMilliseconds: lease)
        request.worker = String(owner.prefix { $0 != "/" })
        request.claim = claim
        request.wantSlots = want
        return request
    }

    private func urls(_ host: String, _ count: Int) -> [String] {
        (0..<count).map { "https://\(host)/\(host)-\($0)" }
    }

    /// `claimers` connections to the fixture's store, which holds 20 jobs of a.example with
    /// every host's cap at `cap`; and that host's id.
    private func claimersOfOneHost(_ fixture: StoreFixture, _ claimers: Int, cap: Int) throws -> (stores: [any JobStore], host: Int) {
        let stores = try (0..<claimers).map { _ in try fixture.open() }
        try fixture.add(urls("a.example", 20), to: stores[0])
        try stores[0].setHostCap(cap, host: nil)
        return (stores, try fixture.hostID(stores[0], "a.example:443"))
    }

    // MARK: Adding

    @Test(arguments: StoreKind.allCases) func addingIsIdempotentAndDestinationsStayUnique(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let store = try fixture.open()
        let first = try fixture.add(["https://a.example/x.iso", "https://a.example/y.iso out=z.iso"], to: store)
        guard case .added(let x) = first[0], case .added(let z) = first[1] else { Issue.record("\(first)"); return }
        #expect(x < z, "ids follow the lines")
        let again = try fixture.add(["https://a.example/x.iso", "https://a.example/y.iso out=z.iso"], to: store)
        #expect(again == [.alreadyQueued(jobID: x), .alreadyQueued(jobID: z)])
        // out= a destination another URL holds: rejected with the holder; a name from the URL: suffixed.
        let clash = try fixture.add(["https://b.example/q out=z.iso", "https://b.example/x.iso"], to: store)
        #expect(clash[0] == .rejected(.destinationTaken(byJob: z, url: "https://a.example/y.iso")))
        guard case .added(let suffixed) = clash[1] else { Issue.record("\(clash)"); return }
        #expect(try store.job(id: suffixed)?.destination == JobBatch.suffixed(fixture.directory.file("x.iso"), for: "https://b.example/x.iso"))
        #expect(try fixture.add(["https://b.example/x.iso"], to: store) == [.alreadyQueued(jobID: suffixed)])
        // Repeats within one batch: the first line wins.
        let batch = try fixture.add(["https://c.example/r out=r", "https://c.example/r out=r", "https://c.example/s out=r"], to: store)
        guard case .added(let r) = batch[0] else { Issue.record("\(batch)"); return }
        #expect(Array(batch.dropFirst()) == [.alreadyQueued(jobID: r), .rejected(.destinationTaken(byJob: r, url: "https://c.example/r"))])
        #expect(try store.status().counts[.queued] == 4)
        let job = try #require(try store.job(id: x))
        #expect(job.state == .queued && job.attempts == 0 && job.host == "a.example:443" && job.url == "https://a.example/x.iso")
    }

    /// A checksum on a repeated line is never dropped unsaid: a job that has none and has not
    /// started takes it; another checksum, or one for a job already started, refuses the line.
    @Test(arguments: StoreKind.allCases) func aRepeatedLinesChecksumIsTakenBeforeItsJobStartsElseRefused(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let store = try fixture.open()
        let (a, b) = ("sha256=" + String(repeating: "ab", count: 32), "sha256=" + String(repeating: "cd", count: 32))
        guard case .added(let f) = try fixture.add(["https://a.example/f"], to: store)[0] else { Issue.record("not added"); return }
        #expect(try fixture.add(["https://a.example/f \(a)"], to: store) == [.alreadyQueued(jobID: f)])
        #expect(try store.job(id: f)?.checksum == a)
        #expect(try fixture.add(["https://a.example/f \(b)"], to: store) == [.rejected(.checksumConflict(byJob: f, held: a))])
        #expect(try fixture.add(["https://a.example/f \(a)", "https://a.example/f"], to: store) == [.alreadyQueued(jobID: f), .alreadyQueued(jobID: f)])
        #expect(try store.job(id: f)?.checksum == a)
        // Within one batch, in line order.
        let batch = try fixture.add(["https://a.example/h", "https://a.example/h \(a)", "https://a.example/h \(b)"], to: store)
        guard case .added(let h) = batch[0] else { Issue.record("\(batch)"); return }
        #expect(Array(batch.dropFirst()) == [.alreadyQueued(jobID: h), .rejected(.checksumConflict(byJob: h, held: a))])
        #expect(try store.job(id: h)?.checksum == a)
        // Once its job has started, a checksum would not be checked: refused.
        guard case .added(let g) = try fixture.add(["https://a.example/g"], to: store)[0] else { Issue.record("not added"); return }
        #expect(try store.exchange(request("m/1/1", claim: 10)).claimed.count == 3)
        #expect(try fixture.add(["https://a.example/g \(a)"], to: store) == [.rejected(.checksumTooLate(byJob: g, state: .running))])
        #expect(try store.job(id: g)?.checksum == nil)
    }

    /// A queue's identity (which names its temp files) is not 0, the same for every connection
    /// to it and on every read, and another queue's differs.
    @Test(arguments: StoreKind.allCases) func eachQueueHasItsOwnIdentity(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let (one, two) = (try fixture.open(), try fixture.open())
        let identity = try one.identity()
        #expect(identity != 0)
        #expect(try two.identity() == identity && one.identity() == identity)
        #expect(try StoreFixture(kind).open().identity() != identity)
    }

    @Test(arguments: StoreKind.allCases) func addingKeepsChecksumsProfilesAndPolicies(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let store = try fixture.open()
        let profile = RequestProfile(headers: [(name: "X-Token", value: "s3cret")], userAgent: "ua/1")
        let profileID = try store.storeProfile(profile)
        #expect(try store.storeProfile(profile) == profileID, "one row per distinct profile")
        #expect(try store.profile(id: profileID) == profile)
        let resolver = DestinationResolver(directory: fixture.directory.path)
        let sha = String(repeating: "ab", count: 32)
        let line = try #require(try InputLine.parse(Array("https://a.example/f sha256=\(sha)".utf8), resolver: resolver))
        let outcome = try store.add([line], maxAttempts: 3, profileID: profileID, ifExists: .rename)
        let id = try #require(outcome.first?.jobID)
        let job = try #require(try store.job(id: id))
        #expect(job.checksum == "sha256=\(sha)")
        #expect(job.profileID == profileID && job.ifExists == .rename && job.maxAttempts == 3)
        #expect(job.root == nil, "a batch that names no output folder")
        // The output folder a batch names is kept with each job, and a claim hands it on.
        var batch = JobBatch([try #require(try InputLine.parse(Array("https://a.example/g".utf8), resolver: resolver))])
        batch.root = resolver.directory
        let rooted = try #require(try store.add(batch, maxAttempts: 3, profileID: nil, ifExists: .skip).first?.jobID)
        #expect(try store.job(id: rooted)?.root == resolver.directory)
        let claimed = try store.exchange(request("m/1/1", claim: 2)).claimed
        #expect(claimed.first { $0.jobID == rooted }?.job.root == resolver.directory)
    }

    // MARK: Slots and the cap

    @Test(arguments: StoreKind.allCases) func liveSlotsOfAHostNeverOutnumberItsCapOverTwoConnections(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(urls("a.example", 10), to: queue)
        try queue.setHostCap(3, host: nil)
        let other = try fixture.open()
        let a = try fixture.hostID(queue, "a.example:443")

        let mine = try queue.exchange(request("m/1/1", want: [a: 2])).grantedSlots
        #expect(mine.map(\.index) == [0, 1])
        let theirs = try other.exchange(request("m/2/2", want: [a: 5]))
        #expect(theirs.grantedSlots.map(\.index) == [2], "only the cap's last slot is left")
        #expect(theirs.caps == [a: 3])
        #expect(try queue.liveSlots() == ["a.example:443": 3])
        var renew = request("m/1/1")
        renew.heldByHost = [a: 0]
        #expect(try queue.exchange(renew).contendedHosts == [], "2 against 1: shares one apart, nobody gives one back")

        var giveBack = request("m/1/1")
        giveBack.releaseSlots = [mine[0]]
        _ = try queue.exchange(giveBack)
        #expect(try other.exchange(request("m/2/2", want: [a: 5])).grantedSlots.map(\.index) == [0])
        fixture.advance(by: 60_001)
        #expect(try other.exchange(request("m/2/2", want: [a: 1])).grantedSlots.map(\.index) == [0],
                "expired slots are free again, the lowest index first")
        var late = request("m/1/1")
        late.renewSlots = [mine[1]]
        #expect(try queue.exchange(late).lostSlots == [mine[1]], "an expired slot is not renewed")
        #expect(try queue.liveSlots()["a.example:443"] ?? 0 <= 3)
    }

    @Test(arguments: StoreKind.allCases) func aLoweredCapRefusesTheRenewalOfSlotsBeyondIt(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(["https://a.example/1"], to: queue)
        try queue.setHostCap(4, host: nil)
        let a = try fixture.hostID(queue, "a.example:443")
        let slots = try queue.exchange(request("m/1/1", want: [a: 4])).grantedSlots
        #expect(slots.count == 4)
        try queue.setHostCap(2, host: "a.example:443")
        var renew = request("m/1/1")
        renew.renewSlots = slots
        #expect(Set(try queue.exchange(renew).lostSlots.map(\.index)) == [2, 3])
        #expect(try queue.liveSlots() == ["a.example:443": 2])
    }

    /// A host one worker holds below its cap (it said 429 or 503) gets no more live slots in all
    /// than that limit, from any worker's grant; back at its cap, the others get theirs. (Only
    /// the worker that saw the answers held itself to the limit: one that started later got the
    /// whole cap.)
    @Test(arguments: StoreKind.allCases) func aHostsOverloadLimitHoldsForEveryWorkersGrants(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let (stores, host) = try claimersOfOneHost(fixture, 2, cap: 4)
        var limited = request("a/1/1", want: [host: 1])
        limited.limits = [host: 1]
        #expect(try stores[0].exchange(limited).grantedSlots.count == 1)
        #expect(try stores[1].exchange(request("b/1/1", want: [host: 3])).grantedSlots.isEmpty, "beyond the shared limit")
        var raised = request("a/1/1")
        raised.limits = [host: 2]
        _ = try stores[0].exchange(raised)
        #expect(try stores[1].exchange(request("b/1/1", want: [host: 3])).grantedSlots.count == 1, "up to the limit in all")
        var back = request("a/1/1")
        back.limits = [host: Int?.none]
        _ = try stores[0].exchange(back)
        #expect(try stores[1].exchange(request("b/1/1", want: [host: 3])).grantedSlots.count == 2, "back at the cap of 4")
    }

    @Test(arguments: StoreKind.allCases) func aPausedHostGetsNoSlotNorClaimAndIsReported(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(["https://a.example/1"], to: queue)
        let a = try fixture.hostID(queue, "a.example:443")
        let now = try queue.now()
        var pause = request("m/1/1", claim: 5, want: [a: 1])
        pause.pauses = [HostPause(host: "a.example:443", until: now + 5_000, reason: "Retry-After")]
        let result = try queue.exchange(pause)
        #expect(result.grantedSlots == [] && result.claimed == [], "pauses are recorded before claims and slots")
        #expect(abs((result.pausedHosts[a] ?? 0) - (now + 5_000)) < 50)
        #expect(try queue.status().pausedHosts.map(\.host) == ["a.example:443"])
        let wake = try #require(result.nextWake)
        #expect(abs(wake - (now + 5_000)) < 50, "the pause's end is when to look again")
        fixture.advance(by: 5_001)
        let after = try queue.exchange(request("m/1/1", claim: 5, want: [a: 1]))
        #expect(after.grantedSlots.count == 1 && after.claimed.count == 1)
    }

    // MARK: Claims and outcomes

    @Test(arguments: StoreKind.allCases) func claimsAheadCountAttemptsAndOutcomesAreFencedByToken(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let inHand = 2 * queue.claimAheadRounds  // the store's rounds times the cap
        try fixture.add(urls("a.example", inHand + 4), to: queue)
        try queue.setHostCap(2, host: nil)
        let claimed = try queue.exchange(request("m/1/1", claim: inHand + 4)).claimed
        #expect(claimed.count == inHand, "at most the store's claimAheadRounds times the cap in hand per host")
        #expect(claimed.allSatisfy { $0.job.attempts == 1 && $0.job.state == .running && $0.job.leaseOwner == "m/1/1" })
        #expect(Set(claimed.map(\.token)).count == inHand, "every lease has its own token")
        for lease in claimed { #expect(try queue.attempts(jobID: lease.jobID).map(\.number) == [1]) }
        let now = try queue.now()
        var outcomes = request("m/1/1")
        outcomes.outcomes = [
            .done(jobID: claimed[0].jobID, token: claimed[0].token, status: 200, bytes: 5,
                  placed: PlacedFile(path: nil, identity: FileIdentity(size: 5, modified: 1, changed: 2, inode: 3),
                                     metadata: ResponseMetadata(etag: "\"e\"", contentType: "text/plain"))),
            .retry(jobID: claimed[1].jobID, token: claimed[1].token, at: now + 1_000, status: 503, error: "HTTP 503",
                   progress: Progress(jobID: claimed[1].jobID, token: claimed[1].token, receivedBytes: 3, expectedBytes: 9, etag: "\"v\"",
                                      url: "https://b.example/v2/1")),
            .fail(jobID: claimed[2].jobID, token: "not-the-token", status: 404, reason: "HTTP 404"),
            .release(jobID: claimed[3].jobID, token: claimed[3].token, reason: "interrupted: stop", progress: nil),
        ]
        let result = try queue.exchange(outcomes)
        #expect(result.outcomes == [.recorded, .recorded, .stale, .recorded])
        let done = try #require(try queue.job(id: claimed[0].jobID))
        #expect(done.state == .done && done.receivedBytes == 5 && done.placed?.identity.inode == 3)
        #expect(done.placed?.metadata.contentType == "text/plain" && done.placedBy == "m")
        #expect(try queue.attempts(jobID: claimed[0].jobID).first?.status == 200)
        let retried = try #require(try queue.job(id: claimed[1].jobID))
        #expect(retried.state == .queued && retried.receivedBytes == 3 && retried.etag == "\"v\"" && retried.lastStatus == 503)
        #expect(retried.partialURL == "https://b.example/v2/1", "where the partial file's bytes came from, with its validator")
        #expect(try queue.job(id: claimed[2].jobID)?.state == .running, "a wrong token moves nothing")
        #expect(try queue.job(id: claimed[3].jobID)?.attempts == 0, "a released attempt is not counted")
        #expect(try queue.job(id: claimed[3].jobID)?.state == .queued)
        // Completing twice is stale.
        var twice = request("m/1/1")
        twice.outcomes = [.done(jobID: claimed[0].jobID, token: claimed[0].token, status: 200, bytes: 5)]
        #expect(try queue.exchange(twice).outcomes == [.stale])
    }

    @Test(arguments: StoreKind.allCases) func aRetryWaitsForItsTimeAndTheLastAttemptGivesUp(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let id = try #require(try fixture.add(["https://a.example/1"], to: queue, maxAttempts: 2).first?.jobID)
        let first = try #require(try queue.exchange(request("m/1/1", claim: 1)).claimed.first)
        let now = try queue.now()
        var retry = request("m/1/1", claim: 1)
        retry.outcomes = [.retry(jobID: id, token: first.token, at: now + 10_000, status: 500, error: "HTTP 500",
                                 progress: Progress(jobID: id, token: first.token, receivedBytes: 0, expectedBytes: nil))]
        let answer = try queue.exchange(retry)
        #expect(answer.outcomes == [.recorded] && answer.claimed == [], "not claimable before its time")
        #expect(abs((answer.nextWake ?? 0) - (now + 10_000)) < 50)
        #expect(answer.unfinished.map { [$0.queued, $0.running] } == [1, 0])
        #expect(try queue.status().waitingForRetry == 1)
        fixture.advance(by: 10_001)
        let second = try #require(try queue.exchange(request("m/1/1", claim: 1)).claimed.first)
        #expect(second.jobID == id && second.job.attempts == 2)
        var last = request("m/1/1")
        last.outcomes = [.retry(jobID: id, token: second.token, at: 0, status: 500, error: "HTTP 500",
                                progress: Progress(jobID: id, token: second.token, receivedBytes: 0, expectedBytes: nil))]
        guard case .gaveUp(let reason) = try queue.exchange(last).outcomes.first else { Issue.record("did not give up"); return }
        #expect(reason.contains("gave up after 2 attempts"))
        let failed = try #require(try queue.job(id: id))
        #expect(failed.state == .failed && failed.lastError == reason && failed.errorKind != nil)
        #expect(try queue.status().topFailures.count == 1)
    }

    /// A claim fills from the hosts that have jobs when another has fewer than its share.
    @Test(arguments: StoreKind.allCases) func aClaimFillsFromTheHostsThatHaveJobs(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(urls("a.example", 1) + urls("b.example", 20), to: queue)
        try queue.setHostCap(4, host: nil)
        let claimed = try queue.exchange(request("m/1/1", claim: 8)).claimed
        #expect(claimed.count == 8)
        #expect(Dictionary(grouping: claimed, by: \.job.host).mapValues(\.count) == ["a.example:443": 1, "b.example:443": 7])
    }

    /// A claim that also asks for slots for what it claims gets one slot for each of the first
    /// jobs it claimed, on their hosts, under each host's cap and beside the slots it asked for.
    @Test(arguments: StoreKind.allCases) func aClaimCanBringTheSlotsForItsJobs(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(urls("a.example", 1) + urls("b.example", 20), to: queue)
        try queue.setHostCap(4, host: nil)
        let a = try fixture.hostID(queue, "a.example:443"), b = try fixture.hostID(queue, "b.example:443")
        let other = try fixture.open()
        #expect(try other.exchange(request("m/2/2", want: [b: 1])).grantedSlots.count == 1, "another claimer holds one of b")
        var first = request("m/1/1", claim: 12)
        first.slotsForClaimed = 8
        let result = try queue.exchange(first)
        #expect(result.claimed.count == 12)
        #expect(Dictionary(grouping: result.grantedSlots, by: \.hostID).mapValues(\.count) == [a: 1, b: 3],
                "a: its one job; b: the cap less the other claimer's slot")
        #expect(result.caps[b] == 4)
        #expect(try queue.liveSlots() == ["a.example:443": 1, "b.example:443": 4])
        var none = request("m/3/3", claim: 4)
        none.slotsForClaimed = 0
        #expect(try fixture.open().exchange(none).grantedSlots.isEmpty, "asked for none, given none")
    }

    /// Outcomes of one exchange are judged in order: a second outcome for a job completed before
    /// it in the same exchange is stale, whatever its kind.
    @Test(arguments: StoreKind.allCases) func outcomesOfOneExchangeAreJudgedInOrder(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(urls("a.example", 2), to: queue)
        let leases = try queue.exchange(request("m/1/1", claim: 2)).claimed
        #expect(leases.count == 2)
        var both = request("m/1/1")
        both.outcomes = [.done(jobID: leases[0].jobID, token: leases[0].token, status: 200, bytes: 5),
                         .release(jobID: leases[0].jobID, token: leases[0].token, reason: "stop", progress: nil),
                         .done(jobID: leases[1].jobID, token: leases[1].token, status: 200, bytes: 5),
                         .done(jobID: leases[1].jobID, token: leases[1].token, status: 200, bytes: 6)]
        #expect(try queue.exchange(both).outcomes == [.recorded, .stale, .recorded, .stale])
        #expect(try queue.job(id: leases[0].jobID)?.state == .done)
        #expect(try queue.job(id: leases[1].jobID)?.receivedBytes == 5)
    }

    /// A job handed back with a time is not claimable before it, and its attempt is not counted.
    @Test(arguments: StoreKind.allCases) func aReleaseWithATimeWaitsWithoutCountingTheAttempt(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let id = try #require(try fixture.add(["https://a.example/1"], to: queue).first?.jobID)
        let lease = try #require(try queue.exchange(request("m/1/1", claim: 1)).claimed.first)
        let now = try queue.now()
        var release = request("m/1/1", claim: 1)
        release.outcomes = [.release(jobID: id, token: lease.token, reason: "temp file in use", progress: nil, notBefore: now + 5_000)]
        let answer = try queue.exchange(release)
        #expect(answer.outcomes == [.recorded] && answer.claimed == [])
        #expect(abs((answer.nextWake ?? 0) - (now + 5_000)) < 50)
        #expect(try queue.job(id: id)?.attempts == 0)
        fixture.advance(by: 5_001)
        #expect(try queue.exchange(request("m/1/1", claim: 1)).claimed.first?.job.attempts == 1)
    }

    /// A lease is a first try only on its job's first claim ever: a claim handed back uncounted,
    /// an expired lease, a retry and a refetch leave the job claimed before; a cancel and retry of
    /// a job nobody claimed does not.
    @Test(arguments: StoreKind.allCases) func onlyAJobsFirstClaimIsAFirstTry(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let other = try fixture.open()
        let ids = try fixture.add(urls("a.example", 4), to: queue).compactMap(\.jobID)
        func claimOne(_ store: any JobStore, _ owner: String, lease: Int = 60_000) throws -> Lease {
            try #require(try store.exchange(request(owner, claim: 1, lease: lease)).claimed.first)
        }
        func send(_ outcome: Outcome) throws {
            var exchange = request("m/1/1")
            exchange.outcomes = [outcome]
            #expect(try queue.exchange(exchange).outcomes == [.recorded])
        }
        // Handed back uncounted, then done and fetched again.
        let first = try claimOne(queue, "m/1/1")
        #expect(first.jobID == ids[0] && first.firstTry)
        try send(.release(jobID: ids[0], token: first.token, reason: "stop", progress: nil))
        let second = try claimOne(queue, "m/1/1")
        #expect(second.jobID == ids[0] && !second.firstTry && second.job.attempts == 1)
        try send(.done(jobID: ids[0], token: second.token, status: 200, bytes: 1))
        #expect(try queue.refetch([Refetch(jobID: ids[0], adopt: nil, conditional: false)]) == 1)
        let refetched = try claimOne(queue, "m/1/1")
        #expect(refetched.jobID == ids[0] && !refetched.firstTry)
        try send(.done(jobID: ids[0], token: refetched.token, status: 200, bytes: 1))
        // Its lease expired, and another claimer took it back.
        let expiring = try claimOne(queue, "m/1/1", lease: 1_000)
        #expect(expiring.jobID == ids[1] && expiring.firstTry)
        fixture.advance(by: 1_001)
        let takenBack = try claimOne(other, "m/2/2")
        #expect(takenBack.jobID == ids[1] && !takenBack.firstTry)
        // Failed for good, then retried.
        let failing = try claimOne(queue, "m/1/1")
        #expect(failing.jobID == ids[2] && failing.firstTry)
        try send(.fail(jobID: ids[2], token: failing.token, status: 404, reason: "HTTP 404"))
        #expect(try queue.retry([ids[2]]) == [.changed])
        let retried = try claimOne(queue, "m/1/1")
        #expect(retried.jobID == ids[2] && !retried.firstTry)
        // Cancelled and retried before anyone claimed it: still a first try.
        #expect(try queue.cancel([ids[3]]) == [.changed])
        #expect(try queue.retry([ids[3]]) == [.changed])
        let untouched = try claimOne(queue, "m/1/1")
        #expect(untouched.jobID == ids[3] && untouched.firstTry)
    }

    // MARK: Leases

    @Test(arguments: StoreKind.allCases) func anExpiredLeaseReturnsTheJobAndIsNeverRenewed(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let other = try fixture.open()
        let id = try #require(try fixture.add(["https://a.example/1"], to: queue).first?.jobID)
        let stale = try #require(try queue.exchange(request("m/1/1", claim: 1, lease: 1_000)).claimed.first)
        #expect(try other.exchange(request("m/2/2", claim: 1)).claimed == [], "the lease is live")
        fixture.advance(by: 1_001)
        let fresh = try #require(try other.exchange(request("m/2/2", claim: 1)).claimed.first)
        #expect(fresh.jobID == id && fresh.token != stale.token && fresh.job.attempts == 1, "lost without progress: not counted")
        let attempts = try other.attempts(jobID: id)
        #expect(attempts.map(\.number) == [1, 1])
        #expect(attempts[0].error?.contains("lease expired") == true)
        // The stale holder: its renewal is refused and its outcomes and progress change nothing.
        var late = request("m/1/1")
        late.renewJobs = [JobLeaseID(jobID: id, token: stale.token)]
        late.progress = [Progress(jobID: id, token: stale.token, receivedBytes: 999, expectedBytes: 999)]
        late.outcomes = [.done(jobID: id, token: stale.token, status: 200, bytes: 1),
                         .fail(jobID: id, token: stale.token, status: 404, reason: "x"),
                         .release(jobID: id, token: stale.token, reason: "stop", progress: nil)]
        let answer = try queue.exchange(late)
        #expect(answer.lostJobs == [JobLeaseID(jobID: id, token: stale.token)])
        #expect(answer.outcomes == [.stale, .stale, .stale])
        let job = try #require(try queue.job(id: id))
        #expect(job.state == .running && job.leaseToken == fresh.token && job.receivedBytes == 0)
        // An expired lease is not renewed even before anyone took the job back.
        fixture.advance(by: 60_001)
        var renew = request("m/2/2")
        renew.renewJobs = [JobLeaseID(jobID: id, token: fresh.token)]
        #expect(try other.exchange(renew).lostJobs == [JobLeaseID(jobID: id, token: fresh.token)])
    }

    /// Progress sent for a lease no longer the sender's (its job cancelled) is not written, and
    /// the lease comes back as lost in that exchange: the engine stops the transfer then, not at
    /// its next renewal (after which a cancelled job's file could already be placed).
    @Test(arguments: StoreKind.allCases) func progressOnALeaseNoLongerHeldReportsItLost(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let store = try fixture.open()
        _ = try fixture.add(urls("a.example", 2), to: store)
        let claimed = try store.exchange(request("m/1/1", claim: 2)).claimed
        #expect(claimed.count == 2)
        let (cancelled, kept) = (claimed[0], claimed[1])
        #expect(try store.cancel([cancelled.jobID]) == [.changed])
        var report = request("m/1/1")
        report.progress = [cancelled, kept].map { Progress(jobID: $0.jobID, token: $0.token, receivedBytes: 10, expectedBytes: 100) }
        let result = try store.exchange(report)
        #expect(result.lostJobs == [JobLeaseID(jobID: cancelled.jobID, token: cancelled.token)])
        #expect(try store.job(id: kept.jobID)?.receivedBytes == 10)
        #expect(try store.job(id: cancelled.jobID)?.state == .cancelled)
    }

    /// A lease that expires before its job made progress counts no attempt, even the last one (a
    /// worker killed with jobs claimed ahead, which no server saw): the job goes back to the
    /// queue. A job whose lease is lost so `Lease.lostLeaseLimit` times (twice its attempts, at
    /// least 10: one that stops its
    /// worker every time) fails, that last attempt counted, with a reason that says so.
    @Test(arguments: StoreKind.allCases) func aLeaseExpiringWithoutProgressCountsNoAttemptUntilTheLimit(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let id = try #require(try fixture.add(["https://a.example/1"], to: queue, maxAttempts: 1).first?.jobID)
        let limit = Lease.lostLeaseLimit(maxAttempts: 1)
        #expect(limit == 10 && Lease.lostLeaseLimit(maxAttempts: 30) == 60)
        for loss in 1...limit {
            #expect(try queue.exchange(request("m/1/1", claim: 1, lease: 1_000)).claimed.map(\.jobID) == [id], "loss \(loss)")
            fixture.advance(by: 2_000)
            _ = try queue.exchange(request("m/2/2"))  // the lease expiry is swept here
            let job = try #require(try queue.job(id: id))
            if loss < limit {
                #expect(job.state == .queued && job.attempts == 0, "loss \(loss): \(job)")
            } else {
                #expect(job.state == .failed && job.attempts == 1 && job.lastError == Lease.lostLeasesReason(times: limit), "\(job)")
            }
        }
        let attempts = try queue.attempts(jobID: id)
        #expect(attempts.map(\.wasCounted) == Array(repeating: false, count: limit - 1) + [true], "\(attempts)")
        #expect(attempts.allSatisfy { $0.error?.contains("lease expired") == true }, "\(attempts)")
        // Queued again by retry: the count starts over.
        try queue.retryAllFailed()
        _ = try queue.exchange(request("m/3/3", claim: 1, lease: 1_000))
        fixture.advance(by: 2_000)
        _ = try queue.exchange(request("m/2/2"))
        #expect(try queue.job(id: id)?.state == .queued)
    }

    /// The limit counts losses in a row: one after progress starts the count again.
    @Test(arguments: StoreKind.allCases) func aLeaseLostAfterProgressStartsTheCountAgain(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let id = try #require(try fixture.add(["https://a.example/1"], to: queue, maxAttempts: 1).first?.jobID)
        let limit = Lease.lostLeaseLimit(maxAttempts: 1)
        for loss in 1...(2 * limit - 2) {  // without the progress at loss 9, the tenth fails it
            let claimed = try #require(try queue.exchange(request("m/1/1", claim: 1, lease: 1_000)).claimed.first, "loss \(loss)")
            if loss == limit - 1 {
                var report = request("m/1/1")
                report.progress = [Progress(jobID: id, token: claimed.token, receivedBytes: 5_000, expectedBytes: 90_000_000)]
                _ = try queue.exchange(report)
            }
            fixture.advance(by: 2_000)
            _ = try queue.exchange(request("m/2/2"))
            #expect(try queue.job(id: id)?.state == .queued, "loss \(loss)")
        }
    }

    /// A lease that expires after its attempt recorded progress (bytes past those it began from:
    /// a worker killed while a large file came in) does not count the attempt either, and does
    /// not bring the job nearer to the lost-lease limit: the job goes back to the queue to
    /// resume, and its log says the attempt was not counted.
    @Test(arguments: StoreKind.allCases) func aLeaseExpiringAfterProgressDoesNotCountTheAttempt(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let ids = try fixture.add(["https://a.example/1", "https://a.example/2"], to: queue, maxAttempts: 1).compactMap(\.jobID)
        try queue.setHostCap(2, host: nil)
        let limit = Lease.lostLeaseLimit(maxAttempts: 1)
        for round in 1...(limit + 2) {
            let claimed = try queue.exchange(request("m/1/1", claim: 2, lease: 1_000)).claimed
            let progressing = try #require(claimed.first { $0.jobID == ids[0] }, "round \(round): job 1 was not claimed")
            var report = request("m/1/1")
            report.progress = [Progress(jobID: ids[0], token: progressing.token, receivedBytes: 1_000_000 * round, expectedBytes: 90_000_000)]
            _ = try queue.exchange(report)
            fixture.advance(by: 2_000)
            _ = try queue.exchange(request("m/2/2"))  // the lease expiry is swept here
            let job = try #require(try queue.job(id: ids[0]))
            #expect(job.state == .queued && job.attempts == 0 && job.receivedBytes == 1_000_000 * round, "round \(round): \(job)")
        }
        let attempts = try queue.attempts(jobID: ids[0])
        #expect(attempts.count == limit + 2 && attempts.allSatisfy { !$0.wasCounted }, "\(attempts)")
        #expect(attempts.allSatisfy { $0.error?.contains("lease expired") == true && $0.bytes == 1_000_000 }, "\(attempts)")
        let idle = try #require(try queue.job(id: ids[1]))
        #expect(idle.state == .failed && idle.attempts == 1 && idle.lastError == Lease.lostLeasesReason(times: limit), "\(idle)")
    }

    @Test(arguments: StoreKind.allCases) func deadOwnersLoseTheirJobsAndSlotsAtOnce(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(urls("a.example", 3), to: queue)
        let a = try fixture.hostID(queue, "a.example:443")
        let held = try queue.exchange(request("gone/1/1", claim: 2, want: [a: 2]))
        #expect(held.claimed.count == 2 && held.grantedSlots.count == 2)
        #expect(try queue.leaseOwners() == ["gone/1/1"])
        #expect(try queue.runningJobsByOwner().map(\.jobs) == [2])
        try queue.expireLeases(ofOwners: ["gone/1/1"])
        #expect(try queue.liveSlots() == [:])
        #expect(try queue.status().counts[.queued] == 3)
        #expect(try queue.leaseOwners() == [])
    }

    // MARK: The commands' operations

    @Test(arguments: StoreKind.allCases) func jobFoldersNameEachFolderOnce(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        #expect(try queue.jobFolders() == [])
        try fixture.add(urls("a.example", 3) + ["https://c.example/1  out=sub/one", "https://c.example/2  out=sub/deeper/two",
                                                 "https://c.example/3  out=sub/three", "https://c.example/4  out=sé/four"], to: queue)
        let root = fixture.directory.path
        #expect(try queue.jobFolders() == [root, root + "/sub", root + "/sub/deeper", root + "/sé"])
    }

    @Test(arguments: StoreKind.allCases) func listCountCancelRetryRefetchAndStatus(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        let ids = try fixture.add(urls("a.example", 5) + urls("b.example:8080", 3), to: queue).compactMap(\.jobID)
        #expect(try queue.count(JobFilter(host: "a.example")) == 5)
        #expect(try queue.count(JobFilter(host: "b.example:8080")) == 3)
        #expect(try queue.list(JobFilter(limit: 3, afterID: ids[1])).map(\.id) == Array(ids[2...4]))
        var walked: [Int] = []
        #expect(try queue.forEachJob(state: .queued, after: 0, batch: 3) { walked.append($0.id) } == 8)
        #expect(walked == ids)

        #expect(try queue.cancel([ids[0], 999_999]) == [.changed, .notFound])
        #expect(try queue.cancel([ids[0]]) == [.unchanged(.cancelled)])
        #expect(try queue.retry([ids[0], ids[1]]) == [.changed, .unchanged(.queued)])
        // Finish one, fail one: refetch puts a done job back, retryAllFailed the failed.
        let claimed = try queue.exchange(request("m/1/1", claim: 2)).claimed
        var finish = request("m/1/1")
        finish.outcomes = [.done(jobID: claimed[0].jobID, token: claimed[0].token, status: 200, bytes: 7),
                           .fail(jobID: claimed[1].jobID, token: claimed[1].token, status: 404, reason: "HTTP 404 for it")]
        _ = try queue.exchange(finish)
        let status = try queue.status()
        #expect(status.counts[.done] == 1 && status.counts[.failed] == 1 && status.counts[.queued] == 6)
        #expect(status.receivedBytes == 7 && status.topFailures.first?.count == 1)
        #expect(try queue.jobs(url: claimed[0].job.url).map(\.id) == [claimed[0].jobID])
        #expect(try queue.refetch([Refetch(jobID: claimed[0].jobID, adopt: nil, conditional: false),
                                   Refetch(jobID: claimed[1].jobID, adopt: nil, conditional: false)]) == 1,
                "only done jobs are fetched again")
        #expect(try queue.retryAllFailed() == 1)
        #expect(try queue.status().counts[.queued] == 8)
        #expect(try queue.job(id: claimed[1].jobID)?.attempts == 0)
    }

    /// The attempt that finishes a job keeps its record on the job's row (done_attempt_token):
    /// it is listed once, after the job's earlier attempts, while the job is done, and still once,
    /// in its place, after a refetch moved it to the attempts and the job was fetched again.
    @Test(arguments: StoreKind.allCases) func theFinishingAttemptIsListedOnceBeforeAndAfterARefetch(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let queue = try fixture.open()
        try fixture.add(urls("a.example", 1), to: queue)
        func attempt(_ outcome: (Lease) -> Outcome) throws {
            let lease = try #require(try queue.exchange(request("m/1/1", claim: 1)).claimed.first)
            var report = request("m/1/1")
            report.outcomes = [outcome(lease)]
            #expect(try queue.exchange(report).outcomes == [.recorded])
        }
        func listed(_ id: Int) throws -> [String] {
            try queue.attempts(jobID: id).map {
                "\($0.number) \($0.status.map(String.init) ?? "-") \($0.error ?? "-") \($0.bytes.map(String.init) ?? "-")"
                    + ($0.finishedAt == nil ? " open" : "")
            }
        }
        let now = try queue.now()
        try attempt { .retry(jobID: $0.jobID, token: $0.token, at: now - 1, status: 503, error: "HTTP 503",
                             progress: Progress(jobID: $0.jobID, token: $0.token, receivedBytes: 0, expectedBytes: nil)) }
        try attempt { .done(jobID: $0.jobID, token: $0.token, status: 200, bytes: 7) }
        let id = try #require(try queue.list(JobFilter(limit: 1, afterID: 0)).first?.id)
        let first = ["1 503 HTTP 503 0", "2 200 - 7"]
        #expect(try listed(id) == first)
        let finished = try #require(try queue.attempts(jobID: id).last)
        let job = try #require(try queue.job(id: id))
        #expect(finished.finishedAt == job.finishedAt && finished.startedAt <= (job.finishedAt ?? 0))
        #expect(try queue.refetch([Refetch(jobID: id, adopt: nil, conditional: false)]) == 1)
        #expect(try listed(id) == first, "a refetch keeps the finished attempt's record, once")
        #expect(try queue.attempts(jobID: id).last == finished)
        try attempt { .done(jobID: $0.jobID, token: $0.token, status: 200, bytes: 9) }
        #expect(try listed(id) == first + ["1 200 - 9"])
        #expect(try queue.refetch([Refetch(jobID: id, adopt: nil, conditional: false)]) == 1)
        #expect(try listed(id) == first + ["1 200 - 9"])
        // A job that ends otherwise after a refetch (here: unchanged, 304) has its record written
        // apart, and nothing left on its row from the attempt before.
        try attempt { .unchanged(jobID: $0.jobID, token: $0.token) }
        #expect(try listed(id) == first + ["1 200 - 9", "1 304 - 0"])
    }

    // MARK: Concurrent claimers

    /// Four claimers on four connections and threads, 3 hosts with cap 2: every job is done once,
    /// no job is held by two claimers at once, and the live slots of a host never exceed its cap.
    @Test(arguments: StoreKind.allCases) func concurrentClaimersNeverShareAJobOrExceedTheCap(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let setup = try fixture.open()
        for host in ["a.example", "b.example", "c.example"] { try fixture.add(urls(host, 60), to: setup) }
        try setup.setHostCap(2, host: nil)
        let stores = try (0..<4).map { _ in try fixture.open() }
        let held = Mutex(Set<Int>())
        let problems = Mutex([String]())
        let doneCount = Atomic(0)
        let slotsNow = Mutex([Int: Int]())
        let group = DispatchGroup()
        for (worker, store) in stores.enumerated() {
            group.enter()
            let box = UncheckedBox(store)
            Thread.detachNewThread {
                defer { group.leave() }
                let store = box.value
                let owner = "w\(worker)/\(worker)/1"
                var inHand: [Lease] = []
                var slots: [SlotLease] = []
                var idle = 0
                do {
                    while idle < 50 {
                        var ask = Exchange(owner: owner, leaseMilliseconds: 60_000)
                        // Finish what is in hand inside the slots held, then give the slots back.
                        var finished: [Outcome] = []
                        var used = Set<Int>()
                        for lease in inHand {
                            if let slot = slots.first(where: { $0.hostID == lease.job.hostID && !used.contains($0.index * 1000 + $0.hostID) }) {
                                used.insert(slot.index * 1000 + slot.hostID)
                                finished.append(.done(jobID: lease.jobID, token: lease.token, status: 200, bytes: 1))
                                _ = held.withLock { $0.remove(lease.jobID) }
                            }
                        }
                        let finishedIDs = Set(finished.map(\.jobID))
                        inHand.removeAll { finishedIDs.contains($0.jobID) }
                        ask.outcomes = finished
                        ask.releaseSlots = slots
                        slotsNow.withLock { for slot in slots { $0[slot.hostID, default: 0] -= 1 } }
                        slots = []
                        ask.claim = inHand.isEmpty ? 6 : 0
                        ask.heldByHost = inHand.reduce(into: [:]) { $0[$1.job.hostID, default: 0] += 1 }
                        ask.wantSlots = ask.heldByHost.mapValues { min($0, 2) }
                        let answer = try store.exchange(ask)
                        if answer.outcomes.contains(where: { $0 != .recorded }) {
                            problems.withLock { $0.append("\(owner): an outcome was refused: \(answer.outcomes)") }
                        }
                        doneCount.add(finished.count, ordering: .relaxed)
                        for lease in answer.claimed {
                            if !held.withLock({ $0.insert(lease.jobID).inserted }) {
                                problems.withLock { $0.append("job \(lease.jobID) claimed by \(owner) while held") }
                            }
                        }
                        inHand += answer.claimed
                        slots = answer.grantedSlots
                        slotsNow.withLock { counts in
                            for slot in slots { counts[slot.hostID, default: 0] += 1 }
                            for (host, count) in counts where count > 2 {
                                problems.withLock { $0.append("host \(host) held \(count) slots at once") }
                            }
                        }
                        idle = answer.claimed.isEmpty && finished.isEmpty && inHand.isEmpty ? idle + 1 : 0
                        if answer.unfinished.map({ $0.queued + $0.running == 0 }) == true { break }
                    }
                } catch {
                    problems.withLock { $0.append("\(owner): \(error)") }
                }
            }
        }
        group.wait()
        #expect(problems.withLock { $0 } == [])
        #expect(doneCount.load(ordering: .relaxed) == 180)
        let status = try setup.status()
        #expect(status.counts[.done] == 180)
        try setup.forEachJob(state: .done) { #expect($0.attempts == 1, "job \($0.id) was claimed more than once") }
    }

    // MARK: Liveness across machines (PostgreSQL)

    @Test func aSilentWorkerIsRemovedItsWorkComesBackAndItIsToldToStop() throws {
        let fixture = try StoreFixture(.postgres)
        let silent = try #require(try fixture.open() as? PostgresJobStore)
        let other = try #require(try fixture.open() as? PostgresJobStore)
        let idle = try #require(try fixture.open() as? PostgresJobStore)
        try fixture.add(urls("a.example", 3), to: silent)
        try silent.setWorkerTimeout(milliseconds: 5_000)
        let a = try fixture.hostID(silent, "a.example:443")
        let held = try silent.exchange(request("far/1/1", claim: 3, want: [a: 2]))
        #expect(held.claimed.count == 3 && held.grantedSlots.count == 2)
        #expect(try other.workers().map(\.name) == ["far"])
        _ = try other.exchange(request("near/2/2"))
        _ = try idle.exchange(request("idle/3/3"))
        #expect(Set(try other.workers().map(\.name)) == ["far", "near", "idle"])
        // Both clocks move on; only `near` beats its heart, every 2 s.
        for _ in 0..<2 {
            fixture.advance(by: 2_000)
            _ = try other.exchange(request("near/2/2"))
        }
        fixture.advance(by: 2_000)
        let taken = try other.exchange(request("near/2/2", claim: 3, want: [a: 2]))
        #expect(taken.claimed.count == 3, "the silent worker's jobs came back before their leases expired")
        #expect(taken.grantedSlots.count == 2, "and its slots")
        #expect(try other.workers().map(\.name) == ["near"])
        #expect(throws: WorkerEvicted.self) { try silent.exchange(request("far/1/1", claim: 1)) }
        #expect(try other.status().counts[.running] == 3, "the evicted worker's exchange wrote nothing")
        // A silent worker that held nothing was only forgotten: it speaks again without harm.
        #expect(throws: Never.self) { try idle.exchange(request("idle/3/3")) }
        #expect(Set(try other.workers().map(\.name)) == ["near", "idle"])
    }

    /// A holder with two slots more than a waiting claimer is told so, and gives them back one by
    /// one until they are one apart.
    @Test(arguments: StoreKind.allCases) func aHolderFarAboveAWaitingClaimerIsToldToGiveOneBack(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let (claimers, a) = try claimersOfOneHost(fixture, 2, cap: 4)
        let x = claimers[0], y = claimers[1]
        var held = try x.exchange(request("x/1/1", want: [a: 4])).grantedSlots
        #expect(held.count == 4)
        #expect(try y.exchange(request("y/2/2", want: [a: 2])).grantedSlots.isEmpty, "the cap is full")
        var gave = 0
        while try giveOneBackIfTold(x, "x/1/1", host: a, held: &held) {
            gave += 1
            // y still wants more than it got, so it stays the waiting claimer.
            #expect(try y.exchange(request("y/2/2", want: [a: 2])).grantedSlots.count == 1)
            #expect(gave <= 2, "gave back more than it should")
            if gave > 2 { break }
        }
        #expect(gave == 2 && held.count == 2, "4 against 0 settles at 2 and 2: gave \(gave)")
    }

    /// One step of a holder of `held` slots of `host`: it renews them (holding a job of the host),
    /// and if the store tells it another claimer waits (`contendedHosts`), gives the last one back.
    /// Returns whether it gave one.
    private func giveOneBackIfTold(_ store: any JobStore, _ owner: String, host: Int, held: inout [SlotLease]) throws -> Bool {
        var renew = request(owner)
        renew.renewSlots = held
        renew.heldByHost = [host: 1]
        guard try store.exchange(renew).contendedHosts.contains(host) else { return false }
        var back = request(owner)
        back.releaseSlots = [held.removeLast()]
        _ = try store.exchange(back)
        return true
    }

    /// Slots given back count as the waiting claimer's until it takes them: a holder is not told
    /// to give more while they wait for the waiter's next request (else it gave all it was told
    /// to between two of the waiter's requests, and the shares swung past even).
    @Test(arguments: StoreKind.allCases) func slotsGivenBackAndNotYetTakenCountAsTheWaiters(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let (claimers, a) = try claimersOfOneHost(fixture, 2, cap: 4)
        let x = claimers[0], y = claimers[1]
        var held = try x.exchange(request("x/1/1", want: [a: 4])).grantedSlots
        #expect(try y.exchange(request("y/2/2", want: [a: 4])).grantedSlots.isEmpty, "the cap is full")
        var gave = 0
        while gave <= 4, try giveOneBackIfTold(x, "x/1/1", host: a, held: &held) {
            gave += 1  // y does not ask meanwhile
        }
        #expect(gave == 2, "4 against 0 with y not asking: x gives 2 and is told no more (gave \(gave))")
        #expect(try y.exchange(request("y/2/2", want: [a: 4])).grantedSlots.count == 2)
    }

    /// After an outage that silenced every worker (the database down), the first back does not
    /// evict the others while they come back: a worker evicts only once it has itself been
    /// beating for the timeout. One that stays silent past that is evicted as before.
    @Test func theFirstWorkerBackFromAnOutageLeavesTheOthersTheirWork() throws {
        let fixture = try StoreFixture(.postgres)
        let setup = try #require(try fixture.open() as? PostgresJobStore)
        try setup.setWorkerTimeout(milliseconds: 5_000)
        try fixture.add(urls("a.example", 4), to: setup)
        let first = try #require(try fixture.open() as? PostgresJobStore)
        let second = try #require(try fixture.open() as? PostgresJobStore)
        #expect(try first.exchange(request("first/1/1", claim: 2)).claimed.count == 2)
        #expect(try second.exchange(request("second/2/2", claim: 2)).claimed.count == 2)
        fixture.advance(by: 20_000)  // nobody could beat for 20 s
        _ = try first.exchange(request("first/1/1"))
        #expect(Set(try first.workers().map(\.name)) == ["first", "second"], "second was evicted on first's return")
        #expect(try first.status().counts[.running] == 4, "second's jobs were taken back")
        fixture.advance(by: 3_000)
        _ = try second.exchange(request("second/2/2"))
        // second falls silent again; first beats on, every 2 s.
        for _ in 0..<4 {
            fixture.advance(by: 2_000)
            _ = try first.exchange(request("first/1/1"))
        }
        #expect(try first.workers().map(\.name) == ["first"], "second, silent 8 s while first beat, was not evicted")
        #expect(throws: WorkerEvicted.self) { try second.exchange(request("second/2/2")) }
    }

    // MARK: From the second review

    /// A worker evicted between its heartbeat and its exchange (a stall there, modelled by the
    /// sweeper's clock being ahead) claims nothing and gets no slot: its exchange fails.
    @Test func anEvictedWorkerClaimsNothingEvenWithinItsBeatInterval() throws {
        let fixture = try StoreFixture(.postgres)
        let silent = try #require(try fixture.open() as? PostgresJobStore)
        let other = try #require(try fixture.open() as? PostgresJobStore)
        try fixture.add(urls("a.example", 6), to: silent)
        try silent.setWorkerTimeout(milliseconds: 5_000)
        let a = try fixture.hostID(silent, "a.example:443")
        let first = try silent.exchange(request("far/1/1", claim: 1, want: [a: 1]))
        #expect(first.claimed.count == 1 && first.grantedSlots.count == 1)
        // The sweeper's clock moves 10 s on, its own heartbeats a few seconds apart (a sweeper
        // evicts others only once it has been beating a timeout itself): far's heartbeat is 10 s
        // old to it.
        for offset in [0, 2_000, 4_000, 6_000, 8_000, 10_000] {
            other.clockOffset = offset
            _ = try other.exchange(request("near/2/2"))
        }
        #expect(try other.workers().map(\.name) == ["near"], "far was evicted")
        // far's next exchange, less than a second after its beat.
        var late = request("far/1/1", claim: 3, want: [a: 2])
        late.renewJobs = first.claimed.map { JobLeaseID(jobID: $0.jobID, token: $0.token) }
        var answer: ExchangeResult?
        var threw = false
        do { answer = try silent.exchange(late) } catch is WorkerEvicted { threw = true }
        let owners = try other.runningJobsByOwner()
        #expect(threw, "an evicted worker's exchange must fail; it claimed \(answer?.claimed.count ?? 0), got \(answer?.grantedSlots.count ?? 0) slots, running by owner: \(owners)")
        #expect(!owners.contains { $0.owner == "far/1/1" }, "jobs held by the evicted owner: \(owners)")
    }

    /// Fair share with an odd cap: two claimers do not pass a slot back and forth (holding 2 of 3
    /// against the other's 1, neither is told to give one back).
    @Test(arguments: StoreKind.allCases) func twoClaimersOnAnOddCapSettle(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let (claimers, a) = try claimersOfOneHost(fixture, 2, cap: 3)
        let x = claimers[0], y = claimers[1]
        let xs = try x.exchange(request("x/1/1", want: [a: 2])).grantedSlots
        let ys = try y.exchange(request("y/2/2", want: [a: 1])).grantedSlots
        #expect(xs.count == 2 && ys.count == 1)
        // y wants one more: refused, so x hears of it.
        #expect(try y.exchange(request("y/2/2", want: [a: 1])).grantedSlots.isEmpty)
        var xr = request("x/1/1"); xr.renewSlots = xs; xr.heldByHost = [a: 1]
        let xContended = try x.exchange(xr).contendedHosts.contains(a)
        // Suppose x gives one back (as it is told to), y takes it; then x wants it back.
        var give = request("x/1/1"); give.releaseSlots = [xs[1]]
        _ = try x.exchange(give)
        let y2 = try y.exchange(request("y/2/2", want: [a: 1])).grantedSlots
        #expect(y2.count == 1)
        #expect(try x.exchange(request("x/1/1", want: [a: 1])).grantedSlots.isEmpty)
        var yr = request("y/2/2"); yr.renewSlots = ys + y2; yr.heldByHost = [a: 1]
        let yContended = try y.exchange(yr).contendedHosts.contains(a)
        #expect(!(xContended && yContended), "2 of cap 3 is told to yield to 1, both ways: x \(xContended), y \(yContended)")
    }

    /// Three claimers on the default cap 4, holding 2, 1 and 1: nobody is told to give one back.
    @Test(arguments: StoreKind.allCases) func threeClaimersOnCapFourSettle(_ kind: StoreKind) throws {
        let fixture = try StoreFixture(kind)
        let (claimers, a) = try claimersOfOneHost(fixture, 3, cap: 4)
        let x = claimers[0], y = claimers[1], z = claimers[2]
        let xs = try x.exchange(request("x/1/1", want: [a: 2])).grantedSlots
        _ = try y.exchange(request("y/2/2", want: [a: 1]))
        _ = try z.exchange(request("z/3/3", want: [a: 1]))
        #expect(try z.exchange(request("z/3/3", want: [a: 1])).grantedSlots.isEmpty)
        var xr = request("x/1/1"); xr.renewSlots = xs; xr.heldByHost = [a: 1]
        #expect(!(try x.exchange(xr).contendedHosts.contains(a)), "2,1,1 of cap 4 is as fair as it gets, yet x is told to yield")
    }

    /// Counting reads every job: counts that took long to make are kept longer (twenty times
    /// as long as they took, and at least 2 s).
    @Test func recentCountsThatTookLongAreKeptLonger() throws {
        let fixture = try StoreFixture(.postgres)
        let store = try fixture.open()
        try fixture.add(urls("a.example", 2), to: store)
        #expect(try store.recentStatus().counts[.queued] == 2)
        let connection = try PostgresConnection(url: fixture.location)
        #expect(try connection.query("SELECT min(count_ms) >= 0 AND max(count_ms) < 1000 FROM state_counts").first?.bool(0) == true)
        try connection.run("UPDATE state_counts SET count_ms = 1000")  // as if counting had taken 1 s
        try fixture.add(urls("b.example", 3), to: store)
        fixture.advance(by: 3_000)
        #expect(try store.recentStatus().counts[.queued] == 2, "counted again after 3 s, though counting took 1 s")
        fixture.advance(by: 18_000)
        #expect(try store.recentStatus().counts[.queued] == 5)
    }

    @Test func recentStatusForgetsAStateThatEmptied() throws {
        let fixture = try StoreFixture(.postgres)
        let store = try fixture.open()
        try fixture.add(urls("a.example", 2), to: store)
        #expect(try store.recentStatus().counts[.queued] == 2)
        let got = try store.exchange(request("w/1/1", claim: 2)).claimed
        fixture.advance(by: 3_000)
        let st = try store.recentStatus(); let fresh = try store.status()
        #expect((st.counts[.queued] ?? 0) == 0, "claimed \(got.count); recent \(st.counts); fresh \(fresh.counts)")
        #expect(try store.recentStatus().counts[.running] == got.count)
    }
}

/// Hands a store to the one thread that uses it. @unchecked Sendable: each box is moved to one
/// thread and used only there.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
