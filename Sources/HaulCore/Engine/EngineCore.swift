import Foundation

/// The download engine's decisions as a value: events go in (`handle`), actions come out. It
/// does no I/O, reads no clock and starts no thread: times come in with the events. The runner
/// (`DownloadEngine`) performs the actions and feeds back what happened.
///
/// Guarantees:
/// - at most `workers` transfers at once; a transfer starts only inside a slot of its host held
///   by this process, and a slot passes to the host's next job when a transfer ends, without a
///   round trip to the queue;
/// - jobs are claimed ahead (`claimAheadRounds` times the workers in all, at most that many
///   times a host's cap in hand per host) so the next job of every busy host is already held;
/// - outcomes (done, retry, failure, release), progress and pauses are sent in batches with the
///   next exchange, one exchange at a time; a job is sent as done only after its file was placed
///   durably;
/// - a transfer whose job lease was lost is cancelled and its result dropped;
/// - on `stop`, nothing more is claimed, transfers are cancelled and their jobs handed back
///   uncounted, verified files are still placed, and every slot is given back before `finish`.
struct EngineCore {
    struct Config {
        /// Outcomes and verified files in one batch, unless `batchDelay` passes first.
        static let defaultBatchSize = 128
        var workers: Int
        var owner: String
        /// The worker's name (see `Exchange.worker`).
        var worker = ""
        var leaseMilliseconds: Int
        var maxAttempts: Int?
        var policy: RetryPolicy
        /// A host unreachable for less than this (ms) since it last answered keeps its jobs,
        /// however often it was probed (see `hostDown`).
        var hostDownLimit = 0
        /// Outcomes (and verified files) wait for at most this many, or this long, before a batch.
        var batchSize = Config.defaultBatchSize
        var batchDelay = 100
        var progressEvery = 1000
        /// How long after a slot request is refused before asking again, in ms.
        var slotRetry = 20
        /// At most this many jobs in hand are prepared (files examined, temp file opened) before
        /// a slot is free for them, the first ones of each host, so a freed slot starts its next
        /// request at once. 0: a job is prepared only once it holds a slot.
        var prepareAhead = 0
        /// Once this many jobs are prepared ahead, more are asked for only when at least this
        /// many are missing, so preparations go out in batches (the runner hands a batch to a
        /// preparing thread at once, instead of waking one for each job). 1: one at a time.
        var prepareBatch = 1
        /// Rounds of work kept in hand: claims keep this many times `workers` jobs claimed and
        /// not started (see `JobStore.claimAheadRounds`).
        var claimAheadRounds = 2
        /// A claim is due once fewer than this many rounds are in hand, or a quarter round short
        /// of `claimAheadRounds` when that comes first (see `JobStore.claimBelowRounds`).
        var claimBelowRounds = 4
        /// Jobs are still being added while the run goes on (`haul get` reading its list): a
        /// drained queue does not end the run until `inputClosed`.
        var inputOpen = false
    }

    /// How a transfer ended, as the runner saw it.
    enum TransferEnd: Equatable {
        case verified(status: Int, bytes: Int64)
        case failed(DownloadAttempt.Failure, status: Int?, snapshot: DownloadAttempt.Snapshot?)
        /// Nothing was fetched: the destination holds the user's file, which the job keeps.
        case kept(size: Int64)
        /// A conditional request was answered 304: haul's file placed before is current.
        case unchanged
    }

    enum Event {
        case begin
        case exchanged(ExchangeResult)
        case exchangeFailed(String)
        /// The temp file is open. `forget`: the partial file's validator must be forgotten in the
        /// queue before any new byte is written (it is starting over).
        case prepared(token: String, forget: Progress?)
        /// The temp file could not be opened (or the URL is invalid): the attempt failed.
        case prepareFailed(token: String, DownloadAttempt.Failure)
        /// A big file's head was accepted: record its validator soon, for a resume after a crash.
        case headAccepted(token: String, Progress)
        case transferEnded(token: String, TransferEnd, resumedFrom: Int64)
        /// Placement results by token.
        case placed([String: Placement.Result])
        case tick
        case stop
        /// Jobs were added to the queue: a claim that found none looks again now.
        case inputAdded
        /// No more jobs will be added: a drained queue ends the run (see `Config.inputOpen`).
        case inputClosed
    }

    enum Action {
        /// Open the temp file and decide how to resume; answer with `prepared` or `prepareFailed`.
        case prepare(Lease)
        /// Send the request.
        case fetch(token: String)
        case cancel(token: String)
        /// A job prepared ahead left the jobs in hand before it held a slot: close what its
        /// preparation opened (now, or when it ends), and tell the core nothing of it.
        case dropPrepared(token: String)
        /// One round trip to the queue; add the progress of these transfers to it.
        case exchange(Exchange, progressOf: [String])
        /// Place these verified files as one batch; answer with `placed`.
        case place([String])
        /// Drop the job's partial file.
        case removeTemp(Lease)
        /// Close a verified file that will not be placed (its lease was lost), keeping it.
        case drop(token: String)
        case report(EngineEvent)
        /// Send `tick` at this time (Unix ms), unless another event comes first.
        case wake(at: Int)
        case finish
    }

    private struct Host {
        var free: [SlotLease] = []
        var busy = 0
        var ready: [Lease] = []
        var readyStart = 0
        var pausedUntil = 0
        /// Give the next slot that falls free back (another claimer waits for one).
        var yieldOne = false
        var noSlotsUntil = 0
        /// The host's cap, once the queue told it.
        var cap: Int?
        /// Slot requests refused in a row.
        var refusals = 0
        /// Since when the host has free slots and no job for them.
        var idleSince: Int?
        /// Times in a row the host could not be reached (0 once it answers). While above 0, one
        /// request at a time goes to it: a probe.
        var downFailures = 0
        /// When the first of those failures came (ms).
        var downSince = 0
        /// Set once the host failed to be reached as often as a job may be tried, over at least
        /// `Config.hostDownLimit`: every job of it fails with this reason, without a request.
        var unreachable: String?
        /// Transfers at once it is held to, below its cap, since it said it is overloaded (429,
        /// 503): halved at each such answer, one more after a run of successes (`growthRun`).
        var limit: Int?
        var successes = 0
        /// Transfers started since the limit last changed (answers from before it do not count
        /// again: one burst halves once).
        var startsSinceLimit = 0
        var limitCap: Int { min(cap ?? .max, limit ?? .max) }
        var readyCount: Int { ready.count - readyStart }
        /// How many ready jobs at the front are known to be prepared ahead already: where
        /// `prepareAhead` starts looking. Only a hint (a job it skips wrongly is prepared when it
        /// starts), kept so a step does not look up every job of the front again.
        var preparedFront = 0

        /// Puts back a lease that left the ready jobs (a parked one): marked as tried, since a
        /// try of it may have named a temp file (see `Lease.firstTry`).
        mutating func pushFront(_ lease: Lease) {
            preparedFront = 0
            if readyStart > 0 {
                readyStart -= 1
                ready[readyStart] = lease.triedOnce
            } else {
                ready.insert(lease.triedOnce, at: 0)
            }
        }

        /// The ready job claimed last (for handing back; see `handBackUnstarted`).
        mutating func popLastReady() -> Lease? {
            guard readyStart < ready.count else { return nil }
            let lease = ready.removeLast()
            preparedFront = min(preparedFront, ready.count - readyStart)
            return lease
        }

        mutating func popReady() -> Lease? {
            guard readyStart < ready.count else { return nil }
            let lease = ready[readyStart]
            readyStart += 1
            if preparedFront > 0 { preparedFront -= 1 }
            if readyStart > 64 && readyStart * 2 > ready.count {
                ready.removeFirst(readyStart)
                readyStart = 0
            }
            return lease
        }
    }

    private enum Phase { case preparing, forgetting, fetching }

    /// A job in hand prepared before it holds a slot: still preparing, or what its preparation
    /// ended with (`prepared`, `prepareFailed` or `transferEnded`), handled once it holds one.
    private enum Ahead {
        case preparing
        case done(Event)
    }

    private struct Transfer {
        let lease: Lease
        var slot: SlotLease
        var phase: Phase
        var abandoned = false
        var slotLost = false
    }

    /// A verified file waiting to be placed, or an outcome waiting to be sent: what to report.
    private struct Pending {
        let lease: Lease
        var status = 0
        var bytes: Int64 = 0
        var resumedFrom: Int64 = 0
        var stale = false
    }

    let config: Config
    private(set) var stats = EngineStats()
    private(set) var summary = RunSummary()
    private var failureReasons: [String: Int] = [:]
    private var hosts: [Int: Host] = [:]
    private var hostOrder: [Int] = []
    /// Hosts with nothing in hand whose state must outlive that (down, unreachable), out of
    /// `hosts` so that each step's walks over `hostOrder` follow the hosts in
    /// hand only; at most `rememberedHostsLimit`, the oldest forgotten first.
    private var remembered: [Int: (host: Host, entry: Int)] = [:]
    /// The order hosts were set aside in, by entry number: an entry whose host came back in hand
    /// (or was set aside again since, under a newer number) is stale and skipped.
    private var rememberedOrder: [(id: Int, entry: Int)] = []
    private var rememberedStart = 0
    private var rememberedEntries = 0

    /// An output folder that could not be written. Its jobs wait in hand ("parked", leases
    /// renewed, no attempt used) until `until`; then one of them is tried (the probe), and the
    /// rest follow once it got past the folder.
    private struct BlockedFolder {
        var until: Int
        var failures: Int
        var reason: String
        var since: Int
        var parked: [Lease] = []
        /// The token of the one job let through to try the folder again, while it is tried.
        var probe: String?
    }
    private var blockedFolders: [String: BlockedFolder] = [:]
    /// Folders already reported as not writable in this run (each is said once).
    private var warnedFolders = Set<String>()
    /// Overload limits changed since the last exchange, by host id.
    private var limitChanges: [Int: Int?] = [:]
    private var parkedCount: Int { blockedFolders.values.reduce(0) { $0 + $1.parked.count } }
    private var cursor = 0
    private var transfers = TokenMap<Transfer>()
    /// Jobs in hand prepared ahead (see `Config.prepareAhead`), by lease token, and their job ids
    /// (looked up for every job in hand considered: an Int hashes far cheaper than a token).
    private var ahead = TokenMap<Ahead>()
    private var aheadJobs = Set<Int>()
    /// Set when the jobs in hand or those prepared ahead changed: only then is there anything
    /// new to prepare ahead.
    private var aheadStale = false
    private var verified = TokenMap<Pending>()
    private var oldestVerified: Int?
    private var placing = TokenMap<Pending>()
    private var outbox: [(Outcome, Pending)] = []
    private var oldestOutbox: Int?
    private var pauses: [HostPause] = []
    private var headProgress: [Progress] = []
    /// Transfers waiting for their `forget` to be recorded before they may write.
    private var forgetting: [Progress] = []
    private var releasing: [SlotLease] = []
    /// The exchange in flight: what it carried that must be sent again if it fails.
    private struct Sent {
        var outcomes: [(Outcome, Pending)]
        var forgets: [Progress]
        var pauses: [HostPause]
        var releases: [SlotLease]
        var slotsWanted: Set<Int>
        var renewed = false
        var limits: [Int: Int?] = [:]
        /// `inputEvents` when it was sent: a claim's answer that input events overtook may
        /// predate jobs they announced.
        var inputEvents = 0
        /// When it was sent: the leases it renews or takes run from no earlier than this.
        var sentAt = 0
    }
    private var inFlight: Sent?
    private var lastRenewal = 0
    /// Every lease this engine holds (jobs and slots) runs in the queue at least until this
    /// moment: a lease's length after the last exchange that renewed them all was sent, or after
    /// the one that took the oldest of them. `.max` while it holds none.
    private var leasesHeldUntil = Int.max
    /// The queue takes this engine's work back from this moment if it hears nothing more
    /// (`ExchangeResult.silenceLimit` after the last exchange that succeeded was sent); `.max`
    /// for a queue where only leases end.
    private var heardUntil = Int.max
    /// When the last exchange that succeeded was sent.
    private var lastHeard = 0
    /// When this engine lets go of what it holds if the queue has not answered by then (see
    /// `letLeasesGo`): a margin before its leases end or before the queue would take its work
    /// back for its silence, whichever comes first; `.max` while it holds nothing.
    private var letGoAt: Int {
        guard leasesHeldUntil != .max else { return .max }
        let heard = heardUntil == .max ? Int.max : heardUntil - max(1, min(5000, (heardUntil - lastHeard) / 6))
        return min(leasesHeldUntil - leaseMargin, heard)
    }
    /// When the queue should hear from this engine again (a third of its silence limit after the
    /// last answer), so that a slow exchange still comes well before `letGoAt`.
    private var beatDueAt: Int { heardUntil == .max ? .max : lastHeard + (heardUntil - lastHeard) / 3 }
    /// Exchanges failed in a row: the next waits longer (1, 2, 4, then 8 s).
    private var failedInARow = 0
    private var lastProgress = 0
    private var claimNotBefore = 0
    /// When a claim last brought jobs (0: never).
    private var lastClaimedAt = 0
    /// Transfers started since `since` (ms), over about a second: while claims are slowed, a
    /// second that started two rounds brings back the store's full hand.
    private var startWindow = (since: 0, count: 0)
    /// Hosts that answered in this run, kept apart from `hosts`, whose records are pruned.
    private var answeredHosts = Set<Int>()
    /// Jobs claimed ahead went unstarted for `handBackAfter`: claims keep two rounds in hand,
    /// not the store's, until jobs start fast enough that the store's hand would not wait that
    /// long (see `handBackUnstarted`).
    private var claimsSlowed = false
    private var exchangeNotBefore = 0
    private var drained = false
    /// Queued jobs the last claim that found none saw.
    private var lastQueued: Int?
    /// Claims in a row that found the queue empty while this engine held no job (others ran the
    /// rest): spaces the next look (`waitingPoll`).
    private var waitingPolls = 0
    /// Outcomes were recorded since: one claim may look again at once whether the queue is done.
    private var confirmDrain = false
    /// The last claim found jobs queued but no room for them in hand (each host at twice its
    /// cap): claim again as soon as fewer than this many are ready.
    private var claimBlockedReady: Int?
    private var stopping = false
    /// See `Config.inputOpen`.
    private var inputOpen: Bool
    /// Whether the run is stopping (a signal): its runner then gives up on a queue that cannot
    /// be reached after a few tries, not after `DownloadEngine.outageLimit`.
    var isStopping: Bool { stopping }
    /// `inputAdded` and `inputClosed` events so far.
    private var inputEvents = 0
    private var begun = false
    private var finished = false
    private var started = 0
    private var transferArea = 0.0
    private var lastAreaUpdate = 0

    init(config: Config) {
        self.config = config
        inputOpen = config.inputOpen
    }

    private var renewEvery: Int { config.leaseMilliseconds / 3 }
    /// Jobs claims keep in hand, not started.
    private var claimTarget: Int { (claimsSlowed ? min(2, config.claimAheadRounds) : config.claimAheadRounds) * config.workers }
    /// A claim is due once fewer than this many are in hand: a quarter round short of the
    /// target, or the store's `claimBelowRounds` when that is fewer (why SQLite claims below eight
    /// of its twelve rounds: `JobQueue.claimBelowRounds`; eight rounds cover an exchange's
    /// slowest answers there, 10–12 ms at 10,000 files a second, with outcomes in batches of up
    /// to `exchangeOutcomes`).
    private var claimBelow: Int { min(claimTarget - max(1, config.workers / 4), config.claimBelowRounds * config.workers) }
    /// No job of ours is ready, running, being placed or waiting to be recorded.
    private var holdsNoJob: Bool {
        transfers.isEmpty && verified.isEmpty && placing.isEmpty && outbox.isEmpty && inFlight == nil && readyTotal == 0
    }
    /// Jobs in hand not yet started, parked ones included (claims stay bounded by it).
    private var readyTotal: Int { hosts.values.reduce(0) { $0 + $1.readyCount } + parkedCount }
    /// Jobs in hand as claims count them: up to a round of parked jobs (waiting for a folder)
    /// do not count, so other folders' jobs are still claimed; more than that do, so what waits
    /// in hand stays bounded.
    private var heldForClaims: Int { readyTotal - min(parkedCount, 2 * config.workers) }

    // MARK: Events

    mutating func handle(_ event: Event, now: Int) -> [Action] {
        handle([event], now: now)
    }

    /// Takes in `events`, in order, then decides once what to do: the same actions, in kind, as
    /// handling them one by one, with one look at every host, claim and batch instead of one
    /// per event (a turn of libcurl's loop often ends several transfers).
    mutating func handle(_ events: [Event], now: Int) -> [Action] {
        guard !finished else { return [] }
        transferArea += Double(transfers.count) * Double(max(0, now - lastAreaUpdate))
        lastAreaUpdate = now
        var actions: [Action] = []
        for event in events { take(event, now: now, into: &actions) }
        step(now: now, into: &actions)
        return actions
    }

    /// What one event changes, and the actions it calls for at once (the rest comes from `step`).
    private mutating func take(_ event: Event, now: Int, into actions: inout [Action]) {
        switch event {
        case .begin:
            begun = true
            started = now
            lastRenewal = now
            lastProgress = now
        case .exchanged(let result):
            absorb(result, now: now, into: &actions)
        case .exchangeFailed(let why):
            if let sent = inFlight {
                // Sent again with the next exchange.
                outbox.insert(contentsOf: sent.outcomes, at: 0)
                if oldestOutbox == nil && !outbox.isEmpty { oldestOutbox = now }
                forgetting.insert(contentsOf: sent.forgets, at: 0)
                pauses.insert(contentsOf: sent.pauses, at: 0)
                limitChanges.merge(sent.limits) { newer, _ in newer }
                releasing.insert(contentsOf: sent.releases, at: 0)
                if sent.renewed { lastRenewal = 0 }  // due again as soon as the store answers
            }
            inFlight = nil
            failedInARow += 1
            var wait = StoreOutage.retryDelay(afterFailures: failedInARow)
            if letGoAt != .max {
                // One more try a second before letting go, should the queue be back by then.
                wait = max(250, min(wait, letGoAt - 1000 - now))
            }
            exchangeNotBefore = now + wait
            actions.append(.report(.warning("database: \(why); trying again in \(wait >= 1000 ? "\(wait / 1000) s" : "\(wait) ms")")))
        case .prepared, .prepareFailed, .transferEnded:
            transferEvent(event, now: now, into: &actions)
        case .headAccepted(let token, let progress):
            if transfers[token] != nil { headProgress.append(progress) }
        case .placed(let results):
            for (token, result) in results {
                guard let item = placing.removeValue(forKey: token) else { continue }
                let folder = item.lease.job.destination.parentFolder
                if blockedFolders[folder]?.probe == token {
                    switch result {
                    case .placed, .kept: folderWorks(folder, now: now, into: &actions)  // it wrote: the others go on
                    case .unwritable: break  // folderFailed counts it
                    case .failed: blockedFolders[folder]?.probe = nil  // the folder is tried with another job
                    }
                }
                switch result {
                case .failed(let problem):
                    decide(.disk(problem), status: nil, snapshot: nil, item: item, now: now, into: &actions)
                case .unwritable(let folder, let why):
                    decide(.local(folder: folder, why: why), status: nil, snapshot: nil, item: item, now: now, into: &actions)
                case .placed(let file):
                    queue(.done(jobID: item.lease.jobID, token: item.lease.token, status: item.status, bytes: Int(item.bytes),
                                placed: file), item, now: now)
                case .kept(let size):
                    // A file appeared at the destination during the download: it stays.
                    queue(.kept(jobID: item.lease.jobID, token: item.lease.token, bytes: Int(size)), item, now: now)
                }
            }
        case .tick:
            break
        case .inputAdded:
            inputEvents += 1
            claimAgain(now: now)
        case .inputClosed:
            inputEvents += 1
            inputOpen = false
            claimNotBefore = min(claimNotBefore, now)  // to see at once whether the queue is drained
        case .stop:
            guard !stopping else { break }
            stopping = true
            for token in transfers.keys.sorted() { actions.append(.cancel(token: token)) }
            for id in hostOrder {
                while let lease = hosts[id]?.popReady() {
                    dropAhead(lease.token, jobID: lease.jobID, into: &actions)
                    queue(.release(jobID: lease.jobID, token: lease.token, reason: Self.stopped, progress: nil),
                          Pending(lease: lease), now: now)
                }
            }
            releaseParked(reason: Self.stopped, now: now)
        }
    }

    private mutating func ended(_ token: String, _ transfer: Transfer, _ end: TransferEnd, resumedFrom: Int64, now: Int,
                                into actions: inout [Action]) {
        transfers[token] = nil
        let hostID = transfer.slot.hostID
        hosts[hostID, default: Host()].busy -= 1
        if transfer.slotLost {
            // Not ours any more: nothing to give back.
        } else if stopping || hosts[hostID]?.yieldOne == true && (hosts[hostID].map { $0.busy + $0.free.count } ?? 0) >= 1 {
            // Another claimer waits for a slot of this host and we hold others: this one goes back.
            if hosts[hostID]?.yieldOne == true {
                hosts[hostID]?.yieldOne = false
                hosts[hostID]?.noSlotsUntil = now + 10 * config.slotRetry  // let the other claimer take it
            }
            releasing.append(transfer.slot)
        } else {
            hosts[hostID]?.free.append(transfer.slot)
        }
        let item = Pending(lease: transfer.lease, resumedFrom: resumedFrom)
        if !blockedFolders.isEmpty, case let folder = transfer.lease.job.destination.parentFolder, blockedFolders[folder]?.probe == token {
            switch end {
            case .verified:
                break  // its placement says (a small body is written only then)
            case .failed(.local, _, _):
                break  // folderFailed counts it
            case .failed(_, _, let snapshot) where (snapshot?.bytesOnDisk ?? 0) > 0:
                folderWorks(folder, now: now, into: &actions)
            default:
                blockedFolders[folder]?.probe = nil  // it wrote nothing: the folder is tried with another job
            }
        }
        if transfer.abandoned {
            // Its lease was lost: the result is not ours to record; a verified file is closed
            // (a named temp file stays for whoever holds the job now; an unnamed one is gone).
            if case .verified = end { actions.append(.drop(token: token)) }
            return
        }
        switch end {
        case .verified(let status, let bytes):
            hostAnswered(hostID)
            succeeded(hostID)
            var waiting = item
            waiting.status = status
            waiting.bytes = bytes
            if verified.isEmpty { oldestVerified = now }
            verified[token] = waiting
        case .failed(let failure, let status, let snapshot):
            if let snapshot { stats.bytesThisRun += max(0, snapshot.bytesOnDisk - resumedFrom) }
            decide(failure, status: status, snapshot: snapshot, item: item, now: now, into: &actions)
        case .kept(let size):
            queue(.kept(jobID: item.lease.jobID, token: item.lease.token, bytes: Int(size)), item, now: now)
        case .unchanged:
            hostAnswered(hostID)
            queue(.unchanged(jobID: item.lease.jobID, token: item.lease.token), item, now: now)
        }
    }

    /// The job's host could not be reached. The first failure since the host last answered (or
    /// since its pause ended) counts against the host, not the job: the host pauses with
    /// backoff, and the job goes back uncounted. Once the host failed as often as a job may be
    /// tried, and, when it answered earlier in the run, over at least `Config.hostDownLimit` (a
    /// restart or a blip of the network is not a batch's end), this job and every other of that
    /// host fail with "host unreachable".
    private mutating func hostDown(_ failure: DownloadAttempt.Failure, item: Pending, snapshot: DownloadAttempt.Snapshot?,
                                   now: Int, into actions: inout [Action]) {
        let lease = item.lease
        let job = lease.job
        var host = hosts[job.hostID, default: Host()]
        if host.unreachable == nil && host.pausedUntil <= now {
            host.downFailures += 1
            if host.downFailures == 1 { host.downSince = now }
            let probed = host.downFailures >= (config.maxAttempts ?? job.maxAttempts)
            // A host never heard from in this run (a dead name in a list, a mistyped port) is not
            // waited for: its jobs fail after the probes alone.
            let left = (answeredHosts.contains(job.hostID) ? config.hostDownLimit : 0) - (now - host.downSince)
            if probed && left <= 0 {
                let tries = host.downFailures == 1 ? "1 attempt" : "\(host.downFailures) attempts in a row"
                let span = now - host.downSince >= 1000 ? " over \((now - host.downSince) / 1000) s" : ""
                host.unreachable = "host unreachable: \(failure.description) (\(tries) to reach \(job.host) failed\(span))"
            } else {
                var delay = Int(config.policy.backoff.delay(afterAttempt: host.downFailures) * 1000)
                // Its probes spent: the next comes when the time is up, at the latest.
                if probed { delay = min(delay, left) }
                let until = now + max(delay, config.slotRetry)
                host.pausedUntil = max(host.pausedUntil, until)
                pauses.append(HostPause(host: job.host, until: until, reason: "unreachable: \(failure.description)"))
                actions.append(.report(.hostPaused(host: job.host, seconds: Double(until - now) / 1000,
                                                   reason: "unreachable: \(failure.description)")))
            }
        }
        hosts[job.hostID] = host
        if let reason = host.unreachable {
            actions.append(.removeTemp(lease))
            queue(.fail(jobID: job.id, token: lease.token, status: nil, reason: reason), item, now: now)
            failUnreachable(job.hostID, now: now, into: &actions)
        } else {
            queue(.release(jobID: job.id, token: lease.token, reason: "host unreachable (\(failure.description)); not counted",
                           progress: snapshot.map { Self.progress($0, lease: lease) }), item, now: now)
        }
    }

    /// A job could not write in `folder`: the first failure since the folder was last tried
    /// counts, and blocks it for a growing interval; the job waits parked, its attempt unspent.
    private mutating func folderFailed(_ folder: String, why: String, lease: Lease, snapshot: DownloadAttempt.Snapshot?,
                                       now: Int, into actions: inout [Action]) {
        guard !stopping else {
            queue(.release(jobID: lease.jobID, token: lease.token, reason: Self.stopped,
                           progress: snapshot.map { Self.progress($0, lease: lease) }), Pending(lease: lease), now: now)
            return
        }
        var block = blockedFolders[folder] ?? BlockedFolder(until: 0, failures: 0, reason: why, since: now)
        if block.failures == 0 || block.probe == lease.token {
            block.failures += 1
            block.reason = why
            block.probe = nil
            let delay = config.policy.backoff.delay(afterAttempt: block.failures)
            block.until = now + max(Int(delay * 1000), 250)
            if warnedFolders.insert(folder).inserted {
                actions.append(.report(.warning(
                    "cannot write in \(folder): \(why). Its jobs wait, using no attempts; haul tries the folder again at growing intervals")))
            }
        }
        if let snapshot, snapshot.bytesOnDisk > 0 {
            // Part of its body is on disk: the queue records it (with its validator) so the job
            // resumes; handed back uncounted, it is claimed again and waits here like the rest.
            queue(.release(jobID: lease.jobID, token: lease.token, reason: "waiting for \(folder) to be writable",
                           progress: Self.progress(snapshot, lease: lease)), Pending(lease: lease), now: now)
        } else {
            block.parked.append(lease)
        }
        blockedFolders[folder] = block
    }

    /// A job of `folder` got past it: the folder works (again), and its parked jobs go on.
    private mutating func folderWorks(_ folder: String, now: Int, into actions: inout [Action]) {
        guard let block = blockedFolders.removeValue(forKey: folder) else { return }
        for lease in block.parked.reversed() {
            enter(lease.job.hostID)
            hosts[lease.job.hostID, default: Host()].pushFront(lease)
            aheadStale = true
        }
        let waiting = block.parked.count + 1
        actions.append(.report(.warning("\(folder) can be written again; "
                                        + (waiting == 1 ? "its waiting job goes on" : "its \(waiting) waiting jobs go on"))))
    }

    /// The host answered (whatever it said): it is reachable, and if it cannot be reached later
    /// in the run, it is more likely down for a while (restarting) than gone: it is given
    /// `Config.hostDownLimit` to come back (see `hostDown`).
    private mutating func hostAnswered(_ hostID: Int) {
        hosts[hostID]?.downFailures = 0
        if answeredHosts.count >= Self.answeredHostsLimit { answeredHosts.removeAll(keepingCapacity: true) }
        answeredHosts.insert(hostID)
    }

    /// The most hosts `answeredHosts` remembers (about 1 MB); past it, it starts again, so a
    /// list over millions of hosts keeps memory flat (a host forgotten is not waited for).
    static let answeredHostsLimit = 65_536

    /// The host said it is overloaded: it gets half the transfers it had (never fewer than 1),
    /// once per burst — as TCP halves its window once per loss.
    private mutating func overloaded(_ hostID: Int) {
        guard var host = hosts[hostID], host.limit == nil || host.startsSinceLimit > 0 else { return }
        let had = host.limit.map { min($0, host.busy + 1) } ?? (host.busy + 1)
        host.limit = max(1, had / 2)
        host.successes = 0
        host.startsSinceLimit = 0
        hosts[hostID] = host
        limitChanges[hostID] = .some(host.limit)
    }

    /// Successes in a row (at least; twice the limit when that is more) before an overloaded
    /// host gets one more transfer at once.
    static let growthRun = 8

    /// A transfer of the host succeeded: after a run of successes, one more transfer at once,
    /// until it is back at its cap.
    private mutating func succeeded(_ hostID: Int) {
        guard var host = hosts[hostID], let limit = host.limit else { return }
        host.successes += 1
        if host.successes >= max(2 * limit, Self.growthRun) {
            host.successes = 0
            host.startsSinceLimit = 0
            let grown = limit + 1
            host.limit = grown >= (host.cap ?? .max) ? nil : grown
            limitChanges[hostID] = .some(host.limit)
        }
        hosts[hostID] = host
    }

    /// A lease that was to probe a folder leaves the hand without running: another is chosen.
    private mutating func forgetProbe(_ token: String) {
        for (folder, block) in blockedFolders where block.probe == token { blockedFolders[folder]?.probe = nil }
    }

    /// Hands every parked job back to the queue, uncounted.
    private mutating func releaseParked(reason: String, now: Int) {
        for (folder, block) in blockedFolders {
            for lease in block.parked {
                queue(.release(jobID: lease.jobID, token: lease.token, reason: reason, progress: nil), Pending(lease: lease), now: now)
            }
            blockedFolders[folder]?.parked = []
        }
    }

    /// Due folders send one parked job back to be tried; a folder that failed as often as a job
    /// may be tried, with nothing else left to do, ends the run (its jobs stay queued).
    private mutating func reviewBlockedFolders(now: Int, into actions: inout [Action]) {
        guard !blockedFolders.isEmpty, !stopping else { return }
        for (folder, block) in blockedFolders where block.until <= now && block.probe == nil && !block.parked.isEmpty {
            var changed = block
            let probe = changed.parked.removeFirst()
            changed.probe = probe.token
            blockedFolders[folder] = changed
            enter(probe.job.hostID)
            hosts[probe.job.hostID, default: Host()].pushFront(probe)
            aheadStale = true
        }
        let limit = config.maxAttempts ?? 5
        let othersInHand = hosts.values.reduce(0) { $0 + $1.readyCount }
        if let (folder, worst) = blockedFolders.first(where: { $0.value.failures >= limit && $0.value.probe == nil }),
           transfers.isEmpty, othersInHand == 0, verified.isEmpty, placing.isEmpty,
           lastQueued != nil || parkedCount >= 2 * config.workers {  // the queue has nothing else to give
            let seconds = max(1, (now - worst.since) / 1000)
            summary.localFault = "cannot write in \(folder): \(worst.reason) (tried \(worst.failures) times over \(seconds) s); mend it, then run haul again: its jobs stay queued"
            stopping = true
            releaseParked(reason: "stopped: cannot write in \(folder)", now: now)
        }
    }

    /// Fails every job in hand of a host found unreachable, without a request (a temp file an
    /// earlier attempt left goes too).
    private mutating func failUnreachable(_ hostID: Int, now: Int, into actions: inout [Action]) {
        guard let reason = hosts[hostID]?.unreachable else { return }
        while let lease = hosts[hostID]?.popReady() {
            forgetProbe(lease.token)
            dropAhead(lease.token, jobID: lease.jobID, into: &actions)
            actions.append(.removeTemp(lease))
            queue(.fail(jobID: lease.jobID, token: lease.token, status: nil, reason: reason), Pending(lease: lease), now: now)
        }
    }

    /// What follows a failed attempt: the retry policy's decision, as an outcome to send.
    private mutating func decide(_ failure: DownloadAttempt.Failure, status: Int?, snapshot: DownloadAttempt.Snapshot?,
                                 item: Pending, now: Int, into actions: inout [Action]) {
        let lease = item.lease
        let job = lease.job
        let decision: RetryPolicy.Decision = stopping && failure == .cancelled
            ? .release : config.policy.decide(failure, attempt: job.attempts, resumed: item.resumedFrom > 0,
                                              now: Date(timeIntervalSince1970: Double(now) / 1000))
        let kept = snapshot ?? DownloadAttempt.Snapshot(bytesOnDisk: 0, expectedTotal: nil, validator: nil)
        if status != nil || failure.isAnswer { hostAnswered(job.hostID) }
        // (An overload said by a redirect's host slows the job's host too: its jobs lead there.)
        if case .http(let code, _, _) = failure, code == 429 || code == 503 { overloaded(job.hostID) }
        switch decision {
        case .release:
            queue(.release(jobID: job.id, token: lease.token, reason: Self.stopped,
                           progress: snapshot.map { Self.progress($0, lease: lease) }), item, now: now)
        case .hostDown:
            hostDown(failure, item: item, snapshot: snapshot, now: now, into: &actions)
        case .postpone(let delay):
            queue(.release(jobID: job.id, token: lease.token, reason: "\(failure.description); not counted",
                           progress: nil, notBefore: now + Int(delay * 1000)), item, now: now)
        case .restart:
            actions.append(.removeTemp(lease))
            queue(.release(jobID: job.id, token: lease.token, reason: "\(failure.description); starting over, not counted",
                           progress: Progress(jobID: job.id, token: lease.token, receivedBytes: 0, expectedBytes: nil)), item, now: now)
        case .localFault:
            guard case .local(let folder, let why) = failure else { break }
            folderFailed(folder, why: why, lease: lease, snapshot: snapshot, now: now, into: &actions)
        case .fail:
            // An unsafe way to the destination is not followed, not even to clean up.
            if case .unsafeDestination = failure {} else { actions.append(.removeTemp(lease)) }
            queue(.fail(jobID: job.id, token: lease.token, status: status, reason: failure.description), item, now: now)
        case .retry(let delay, let pauseHost, let discardPartial):
            var progress = Self.progress(kept, lease: lease)
            if discardPartial {
                actions.append(.removeTemp(lease))
                progress = Progress(jobID: job.id, token: lease.token, receivedBytes: 0, expectedBytes: nil)
            }
            if let pauseHost {
                let until = now + Int(pauseHost * 1000)
                // The host that asked for the wait is paused for every worker and every job on
                // it: a redirect's, when it led elsewhere, and then the job's host too, whose
                // jobs lead there (requests that reach a host by a redirect are not held back by
                // its own pause).
                if case .http(_, _, let answeredBy?) = failure {
                    pauses.append(HostPause(host: answeredBy, until: until, reason: "Retry-After from \(failure.description)"))
                    actions.append(.report(.hostPaused(host: answeredBy, seconds: pauseHost, reason: "Retry-After after \(failure.description)")))
                    pauses.append(HostPause(host: job.host, until: until, reason: "Retry-After from \(answeredBy), where it redirects: \(failure.description)"))
                    actions.append(.report(.hostPaused(host: job.host, seconds: pauseHost, reason: "its jobs are redirected to \(answeredBy), which sent Retry-After after \(failure.description)")))
                } else {
                    pauses.append(HostPause(host: job.host, until: until, reason: "Retry-After from \(failure.description)"))
                    actions.append(.report(.hostPaused(host: job.host, seconds: pauseHost, reason: "Retry-After after \(failure.description)")))
                }
                let current = hosts[job.hostID]?.pausedUntil ?? 0
                hosts[job.hostID, default: Host()].pausedUntil = max(current, until)
            }
            queue(.retry(jobID: job.id, token: lease.token, at: now + Int(delay * 1000), status: status,
                         error: failure.description, progress: progress), item, now: now)
        }
    }

    /// Lets go of job leases and slots the queue no longer holds for this engine: jobs in hand
    /// are dropped, their transfers abandoned (their results are not ours to record), and a
    /// transfer on a lost slot stops rather than run beyond the cap.
    private mutating func lose(jobs: [JobLeaseID], slots: [SlotLease], into actions: inout [Action]) {
        let lostJobs = Set(jobs.map(\.token))
        if !lostJobs.isEmpty {
            for id in hostOrder {
                guard var host = hosts[id] else { continue }
                let before = host.readyCount
                let kept = host.ready[host.readyStart...].filter { !lostJobs.contains($0.token) }
                host.ready = Array(kept)
                host.readyStart = 0
                host.preparedFront = 0
                if kept.count != before { hosts[id] = host }
            }
            for lost in jobs { dropAhead(lost.token, jobID: lost.jobID, into: &actions) }
            for (token, transfer) in transfers where lostJobs.contains(token) && !transfer.abandoned {
                transfers[token]?.abandoned = true
                actions.append(.report(.warning("job \(transfer.lease.jobID): lease lost (cancelled, or expired); abandoning its transfer")))
                actions.append(.cancel(token: token))
            }
            for token in lostJobs {
                verified[token]?.stale = true
                placing[token]?.stale = true
            }
            for (folder, block) in blockedFolders {
                var changed = block
                changed.parked.removeAll { lostJobs.contains($0.token) }
                if let probe = changed.probe, lostJobs.contains(probe) { changed.probe = nil }
                blockedFolders[folder] = changed
            }
        }
        for slot in slots {
            if let index = hosts[slot.hostID]?.free.firstIndex(of: slot) {
                hosts[slot.hostID]?.free.remove(at: index)
            } else if let token = transfers.first(where: { $0.value.slot == slot })?.key {
                // Another claimer may hold it now: stop this transfer (its job is handed back
                // uncounted) rather than run beyond the cap.
                transfers[token]?.slotLost = true
                if transfers[token]?.abandoned != true { actions.append(.cancel(token: token)) }  // else cancelled already
            }
        }
    }

    /// How long before its leases could lapse an engine the queue does not answer lets them go:
    /// a sixth of a lease, at most 5 s (the stop itself takes milliseconds).
    private var leaseMargin: Int { max(1, min(5000, config.leaseMilliseconds / 6)) }

    /// Nothing has been heard from the queue for nearly as long as this engine's hold on its work
    /// lasts there (a lease's length after the last renewal, or the queue's worker timeout after
    /// the last answer, whichever ends first): before another worker can take a job or a slot of
    /// it while it still runs, every transfer stops and every job in hand and slot is let go. The
    /// jobs go back to the queue when their leases end there (an interrupted download resumes
    /// from its temp file). Files already verified and outcomes already waiting hold no slot and
    /// run nothing: they go on, and the queue judges their outcomes by their tokens. Claims start
    /// again when the queue answers.
    private mutating func letLeasesGo(now: Int, into actions: inout [Action]) {
        leasesHeldUntil = .max
        heardUntil = .max
        let (jobs, slots) = leasesInHand()
        guard !jobs.isEmpty || !slots.isEmpty else { return }
        actions.append(.report(.warning("nothing heard from the queue for \((now - lastHeard) / 1000) s: stopping \(transfers.count) transfers and letting go of \(jobs.count) jobs before another worker may take them (they go back to the queue); claims start again when the queue answers")))
        lose(jobs: jobs, slots: slots, into: &actions)
    }

    /// The leases of the work this engine has not finished: the jobs in hand (ready, parked) and
    /// those of its running transfers, with the slots they run in and its hosts' free slots.
    /// Verified files, their placement and outcomes waiting to be sent hold job leases too (the
    /// renewal adds them).
    private func leasesInHand() -> (jobs: [JobLeaseID], slots: [SlotLease]) {
        var jobs: [JobLeaseID] = []
        var slots: [SlotLease] = []
        for host in hosts.values {
            jobs += host.ready[host.readyStart...].map { JobLeaseID(jobID: $0.jobID, token: $0.token) }
            slots += host.free
        }
        for (token, transfer) in transfers {
            if !transfer.abandoned { jobs.append(JobLeaseID(jobID: transfer.lease.jobID, token: token)) }
            if !transfer.slotLost { slots.append(transfer.slot) }
        }
        for block in blockedFolders.values { jobs += block.parked.map { JobLeaseID(jobID: $0.jobID, token: $0.token) } }
        return (jobs, slots)
    }

    private mutating func queue(_ outcome: Outcome, _ item: Pending, now: Int) {
        if outbox.isEmpty { oldestOutbox = now }
        outbox.append((outcome, item))
    }

    private mutating func absorb(_ result: ExchangeResult, now: Int, into actions: inout [Action]) {
        guard let sent = inFlight else { return }
        inFlight = nil
        failedInARow = 0
        lastHeard = sent.sentAt
        heardUntil = result.silenceLimit.map { sent.sentAt + $0 } ?? .max
        if sent.renewed {
            leasesHeldUntil = sent.sentAt + config.leaseMilliseconds
        } else if !result.claimed.isEmpty || !result.grantedSlots.isEmpty {
            leasesHeldUntil = min(leasesHeldUntil, sent.sentAt + config.leaseMilliseconds)
        }
        for ((outcome, item), recorded) in zip(sent.outcomes, result.outcomes) {
            report(outcome, item, recorded, now: now, into: &actions)
        }
        for token in sent.forgets.map(\.token) where transfers[token]?.phase == .forgetting {
            transfers[token]?.phase = .fetching
            actions.append(.fetch(token: token))
        }
        lose(jobs: result.lostJobs, slots: result.lostSlots, into: &actions)
        for claimed in result.claimed where stopping {
            // Claimed while the stop was on its way: handed back at once, uncounted.
            queue(.release(jobID: claimed.jobID, token: claimed.token, reason: Self.stopped, progress: nil),
                  Pending(lease: claimed), now: now)
        }
        if !stopping, !result.claimed.isEmpty, !transfers.isEmpty {
            // An older transfer of a job claimed again lost its lease when the job was claimed.
            let claimedJobs = Set(result.claimed.map(\.jobID))
            for (token, transfer) in transfers where claimedJobs.contains(transfer.lease.jobID) && !transfer.abandoned {
                transfers[token]?.abandoned = true
                actions.append(.cancel(token: token))
            }
        }
        if !result.claimed.isEmpty { lastClaimedAt = now }
        for claimed in result.claimed where !stopping {
            let id = claimed.job.hostID
            enter(id)
            hosts[id, default: Host()].ready.append(claimed)
            aheadStale = true
        }
        for slot in result.grantedSlots where stopping { releasing.append(slot) }
        for slot in result.grantedSlots where !stopping {
            enter(slot.hostID)
            hosts[slot.hostID, default: Host()].free.append(slot)
        }
        for id in sent.slotsWanted {
            if result.grantedSlots.contains(where: { $0.hostID == id }) {
                hosts[id]?.refusals = 0
            } else {
                // Refused (other claimers hold the cap): ask again later, less often each time.
                let refusals = min(2, (hosts[id]?.refusals ?? 0))
                hosts[id]?.refusals = refusals + 1
                hosts[id]?.noSlotsUntil = now + config.slotRetry << refusals
            }
        }
        for id in hostOrder where hosts[id]?.busy ?? 0 > 0 || hosts[id]?.free.isEmpty == false {
            hosts[id]?.yieldOne = result.contendedHosts.contains(id)
        }
        for (id, until) in result.pausedHosts {
            let current = hosts[id]?.pausedUntil ?? 0
            hosts[id]?.pausedUntil = max(current, until)
        }
        if result.unfinished != nil, sent.inputEvents != inputEvents {
            // Jobs were added since this claim was sent (its answer may have been read before
            // their batch was committed): what it found says nothing of them.
            claimAgain(now: now)
        } else if let unfinished = result.unfinished {
            // Nothing claimable now: ask again when a waiting job falls due (or in a second, for
            // jobs another process may hand back).
            drained = unfinished.queued == 0 && unfinished.running == 0
            lastQueued = unfinished.queued
            // Holding nothing while others run the rest: look again soon, to end soon after them
            // (or to take back what they hand back), then less often (`waitingPoll`). Queued jobs
            // that none of ours held back, none due later, and none claimable now are being
            // claimed by another worker (a claim skips the rows another is taking): the same.
            let waiting = holdsNoJob && (unfinished.queued == 0 || result.nextWake == nil)
            let poll = waiting ? Self.waitingPoll(after: waitingPolls) : 1000
            waitingPolls = waiting ? waitingPolls + 1 : 0
            claimNotBefore = now + max(10, min(poll, (result.nextWake ?? (now + poll)) - now))
            if unfinished.queued > 0 && result.nextWake == nil { claimBlockedReady = heldForClaims }
        } else {
            drained = false
            if !result.claimed.isEmpty {
                waitingPolls = 0
                lastQueued = nil
                claimNotBefore = 0  // the queue had work: claim again as soon as more is needed
            }
        }
        if !sent.outcomes.isEmpty { confirmDrain = true }
        for (id, cap) in result.caps { hosts[id]?.cap = cap }
        if sent.outcomes.contains(where: { if case .retry = $0.0 { return true } else if case .release = $0.0 { return true }; return false }) {
            claimNotBefore = 0  // a job handed back may be claimable at once
        }
    }

    /// Jobs were added: what the last claim found no longer holds (the queue drained, how many
    /// were queued, the polls spaced out); claim again as soon as there is room.
    private mutating func claimAgain(now: Int) {
        drained = false
        lastQueued = nil
        waitingPolls = 0
        claimNotBefore = min(claimNotBefore, now)
    }

    private mutating func report(_ outcome: Outcome, _ item: Pending, _ recorded: OutcomeResult, now: Int,
                                 into actions: inout [Action]) {
        let job = item.lease.job
        if recorded == .stale || item.stale {
            if case .release = outcome { return }
            actions.append(.report(.warning("job \(job.id): lease lost (cancelled, or taken back after expiry); its result was discarded")))
            return
        }
        switch (outcome, recorded) {
        case (.done(_, _, _, let bytes, let placed), _):
            stats.done += 1
            stats.bytesThisRun += Int64(bytes) - item.resumedFrom
            stats.doneBytes += Int64(bytes)
            actions.append(.report(.finished(jobID: job.id, url: job.url, destination: placed?.path ?? job.destination, bytes: Int64(bytes))))
        case (.kept(_, _, let bytes), _):
            stats.done += 1
            stats.kept += 1
            actions.append(.report(.kept(jobID: job.id, url: job.url, destination: job.destination, bytes: Int64(bytes))))
        case (.unchanged, _):
            stats.done += 1
            stats.unchanged += 1
            actions.append(.report(.unchanged(jobID: job.id, url: job.url, destination: job.placed?.path ?? job.destination)))
        case (.fail(_, _, _, let reason), _):
            failed(job, reason: reason, into: &actions)
        case (.retry(_, _, _, _, let error, _), .gaveUp(let reason)):
            actions.append(.removeTemp(item.lease))
            failed(job, reason: reason, counted: error, into: &actions)
        case (.retry(_, _, let at, _, let error, _), _):
            stats.retriesScheduled += 1
            let delay = TimeInterval(max(0, at - now)) / 1000
            actions.append(.report(.retryScheduled(jobID: job.id, url: job.url, attempt: job.attempts, delay: delay, reason: error)))
        case (.release, _):
            break
        }
    }

    private mutating func failed(_ job: Job, reason: String, counted: String? = nil, into actions: inout [Action]) {
        stats.failed += 1
        failureReasons[FailureKind.of(counted ?? reason), default: 0] += 1
        actions.append(.report(.failed(jobID: job.id, url: job.url, reason: reason)))
    }

    // MARK: Deciding

    private mutating func step(now: Int, into actions: inout [Action]) {
        if now >= letGoAt { letLeasesGo(now: now, into: &actions) }
        reviewBlockedFolders(now: now, into: &actions)
        startTransfers(now: now, into: &actions)
        handBackUnstarted(now: now, into: &actions)
        prepareAhead(into: &actions)
        pruneHosts(now: now)
        if holdsNoJob && (lastQueued == 0 || claimBlockedReady == 0) && !drained && confirmDrain {
            // The last claim found nothing queued, or queued jobs only others could take (none
            // due later, and we held none back), and our own jobs are all recorded now: look
            // again at once (once), to see whether the queue is drained.
            confirmDrain = false
            claimNotBefore = min(claimNotBefore, now)
        }
        placeIfDue(now: now, into: &actions)
        exchangeIfDue(now: now, into: &actions)
        if stopping || drained && !inputOpen, transfers.isEmpty, verified.isEmpty, placing.isEmpty, outbox.isEmpty, inFlight == nil,
           forgetting.isEmpty, releasing.isEmpty, readyTotal == 0 || stopping, hosts.values.allSatisfy({ $0.free.isEmpty && $0.busy == 0 }) {
            finished = true
            summary.done = stats.done
            summary.kept = stats.kept
            summary.unchanged = stats.unchanged
            summary.failed = stats.failed
            summary.retriesScheduled = stats.retriesScheduled
            summary.bytes = stats.bytesThisRun
            summary.interrupted = stopping && summary.localFault == nil
            summary.averageTransfers = now > started ? transferArea / Double(now - started) : 0
            summary.failuresByReason = failureReasons.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
                .map { (reason: $0.key, count: $0.value) }
            actions.append(.finish)
            return
        }
        if let wake = nextWake(now: now) { actions.append(.wake(at: wake)) }
    }

    /// Forgets hosts with nothing in hand (no job, no slot, no pause, no wait), so memory and the
    /// work per event follow the hosts in hand, not every host the run has seen. A host that is
    /// down is set aside in `remembered` instead, so its next jobs do not
    /// start over (see `enter`): kept among the hosts in hand, every dead host of a list over
    /// many hosts stayed, and each step walked them all (100,000 jobs on as many dead hosts:
    /// 17,000 failed in the first 45 s, then 40 a second, and memory grew to 215 MB).
    private mutating func pruneHosts(now: Int) {
        guard hostOrder.count > 2 * config.workers else { return }
        let parkedHosts = Set(blockedFolders.values.flatMap { $0.parked.map(\.job.hostID) })
        let releasingHosts = Set(releasing.map(\.hostID))
        var setAside: [(Int, Host)] = []
        hostOrder.removeAll { id in
            guard let host = hosts[id] else { return true }
            let empty = host.readyCount == 0 && host.busy == 0 && host.free.isEmpty && host.pausedUntil <= now
                && host.noSlotsUntil <= now && !releasingHosts.contains(id) && !parkedHosts.contains(id)
            // A host held to a limit stays: its limit is sent again at each renewal, so that it
            // holds for every worker (see `Exchange.limits`).
            guard empty, host.limit == nil else { return false }
            if host.downFailures > 0 || host.unreachable != nil { setAside.append((id, host)) }
            hosts[id] = nil
            return true
        }
        for (id, host) in setAside { remember(id, host) }
        cursor = 0
    }

    private mutating func remember(_ id: Int, _ host: Host) {
        var kept = Host()
        kept.downFailures = host.downFailures
        kept.downSince = host.downSince
        kept.unreachable = host.unreachable
        kept.cap = host.cap
        rememberedEntries += 1
        remembered[id] = (kept, rememberedEntries)
        rememberedOrder.append((id, rememberedEntries))
        while remembered.count > Self.rememberedHostsLimit, rememberedStart < rememberedOrder.count {
            let oldest = rememberedOrder[rememberedStart]
            if remembered[oldest.id]?.entry == oldest.entry { remembered[oldest.id] = nil }
            rememberedStart += 1
        }
        // Stale entries (hosts that came back in hand) are dropped once they outnumber the live
        // ones, so the order follows the hosts set aside, not every time one was.
        if rememberedOrder.count - rememberedStart > 2 * remembered.count + 1024 {
            rememberedOrder = rememberedOrder[rememberedStart...].filter { remembered[$0.id]?.entry == $0.entry }
            rememberedStart = 0
        }
    }

    /// A host comes in hand (a job claimed, a slot granted, a parked job back): joins the hosts
    /// walked each step, with what was remembered of it. (`hostOrder` holds exactly the hosts of
    /// `hosts`: `pruneHosts` takes them out of both at once.)
    private mutating func enter(_ id: Int) {
        guard hosts[id] == nil else { return }
        hosts[id] = remembered.removeValue(forKey: id)?.host ?? Host()
        hostOrder.append(id)
    }

    /// The most hosts set aside with their state (about 10 MB); past it the oldest is forgotten,
    /// and its next job probes it again as a host never seen.
    static let rememberedHostsLimit = 65_536

    /// Verified files not yet placed, at most, before transfers wait for placement: each holds
    /// its temp file open, and a disk slow to sync must not let them pile up without bound.
    var unplacedLimit: Int { Self.unplacedBatches * config.batchSize }
    static let unplacedBatches = 4

    /// Starts transfers while there is room, a ready job and a free slot of its host, and
    /// fewer than `unplacedLimit` verified files wait to be placed.
    private mutating func startTransfers(now: Int, into actions: inout [Action]) {
        guard !stopping, !hostOrder.isEmpty, verified.count + placing.count < unplacedLimit else { return }
        var idle = 0
        while transfers.count < config.workers && idle < hostOrder.count {
            let id = hostOrder[cursor % hostOrder.count]
            cursor = (cursor + 1) % hostOrder.count
            if hosts[id]?.unreachable != nil { failUnreachable(id, now: now, into: &actions) }
            // A host that could not be reached is probed with one request at a time.
            guard var host = hosts[id], host.pausedUntil <= now, !host.free.isEmpty, host.downFailures == 0 || host.busy == 0,
                  host.busy < host.limitCap, let lease = host.popReady() else {
                idle += 1
                continue
            }
            idle = 0
            if !blockedFolders.isEmpty, case let folder = lease.job.destination.parentFolder, var block = blockedFolders[folder],
               block.probe != lease.token {
                block.parked.append(lease)  // waits for the folder, holding no slot
                blockedFolders[folder] = block
                hosts[id] = host
                dropAhead(lease.token, jobID: lease.jobID, into: &actions)
                continue
            }
            let slot = host.free.removeLast()
            host.busy += 1
            host.startsSinceLimit += 1
            hosts[id] = host
            transfers[lease.token] = Transfer(lease: lease, slot: slot, phase: .preparing)
            startWindow.count += 1
            aheadStale = true  // the front moved
            let preparedAhead = ahead.removeValue(forKey: lease.token)
            if preparedAhead != nil { aheadJobs.remove(lease.jobID) }
            switch preparedAhead {
            case nil: actions.append(.prepare(lease))
            case .preparing?: break  // its preparation's end comes as an event
            case .done(let event)?: transferEvent(event, now: now, into: &actions)
            }
        }
    }

    /// A transfer's preparation or the transfer itself ended (`prepared`, `prepareFailed`,
    /// `transferEnded`). For a job prepared ahead that holds no slot yet, the event is kept
    /// and handled here again once it holds one (see `startTransfers`).
    private mutating func transferEvent(_ event: Event, now: Int, into actions: inout [Action]) {
        let token: String
        switch event {
        case .prepared(let t, _), .prepareFailed(let t, _), .transferEnded(let t, _, _): token = t
        default: return
        }
        guard let transfer = transfers[token] else {
            if case .preparing? = ahead[token] { ahead[token] = .done(event) }
            return
        }
        switch event {
        case .prepared(_, let forget):
            if let forget {
                transfers[token]?.phase = .forgetting
                forgetting.append(forget)
            } else {
                transfers[token]?.phase = .fetching
                actions.append(.fetch(token: token))
            }
        case .prepareFailed(_, let failure):
            ended(token, transfer, .failed(failure, status: nil, snapshot: nil), resumedFrom: 0, now: now, into: &actions)
        case .transferEnded(_, let end, let resumedFrom):
            ended(token, transfer, end, resumedFrom: resumedFrom, now: now, into: &actions)
        default:
            break
        }
    }

    /// Prepares the first jobs in hand of each host before they hold a slot, up to
    /// `config.prepareAhead` in all, least recently served hosts first.
    private mutating func prepareAhead(into actions: inout [Action]) {
        guard config.prepareAhead > 0, aheadStale, !stopping, ahead.count < config.prepareAhead else { return }
        aheadStale = false
        // Most steps find every ready job prepared already (a job prepared ahead is one of them
        // until it starts or is dropped): not worth looking through up to `prepareAhead` of them.
        let wanted = min(config.prepareAhead, hosts.values.reduce(0) { $0 + $1.readyCount })
        guard ahead.count < wanted else { return }
        // Topped up a batch at a time once a batch is in hand (see `Config.prepareBatch`).
        guard ahead.count < config.prepareBatch || wanted - ahead.count >= config.prepareBatch else { return }
        for id in hostOrder where ahead.count < config.prepareAhead {
            guard let host = hosts[id], host.unreachable == nil, host.readyCount > 0 else { continue }
            // The jobs before `preparedFront` are prepared: look from there, and move it past
            // every job found or made prepared while none was skipped.
            var prepared = host.preparedFront
            var contiguous = true
            let end = min(host.ready.count, host.readyStart + config.prepareAhead)
            for lease in host.ready[min(host.readyStart + prepared, end)..<end] where ahead.count < config.prepareAhead {
                if !aheadJobs.contains(lease.jobID) {
                    if !blockedFolders.isEmpty, blockedFolders[lease.job.destination.parentFolder] != nil {
                        contiguous = false
                        continue
                    }
                    ahead[lease.token] = .preparing
                    aheadJobs.insert(lease.jobID)
                    actions.append(.prepare(lease))
                }
                if contiguous { prepared += 1 }
            }
            hosts[id]?.preparedFront = prepared
        }
    }

    /// How long jobs claimed ahead may wait unstarted, beyond two rounds, before they go back.
    static let handBackAfter = 5000
    static let handedBack = "\(Attempt.interruptedPrefix) handed back unstarted (claimed ahead, not started within \(handBackAfter / 1000) s), for any worker to take"

    /// Jobs claimed ahead that no slot started for `handBackAfter` since the last claim, beyond
    /// two rounds, go back to the queue uncounted, the last claimed first, and later claims keep
    /// two rounds in hand: another worker on the queue takes them, where slow downloads (large
    /// files) held by one worker's hand left another idle (with `-j 2` on PostgreSQL, sixteen
    /// rounds: 28 of 30 jobs of three seconds each, and a second worker did none). Jobs that
    /// start quickly never wait that long. A folder's probe handed back is forgotten, so another
    /// of its jobs probes it.
    private mutating func handBackUnstarted(now: Int, into actions: inout [Action]) {
        let keep = 2 * config.workers
        if now - startWindow.since >= 1000 {
            // Jobs start fast again: at the window's rate the store's full hand lasts at most
            // half of `handBackAfter`, so it is not handed back, and it is what keeps them going
            // between exchanges.
            let fullHand = config.claimAheadRounds * config.workers
            if claimsSlowed && startWindow.count * Self.handBackAfter >= 2 * fullHand * (now - startWindow.since) { claimsSlowed = false }
            startWindow = (now, 0)
        }
        guard !stopping, lastClaimedAt > 0, now - lastClaimedAt >= Self.handBackAfter else { return }
        var surplus = readyTotal - parkedCount - keep
        guard surplus > 0 else { return }
        claimsSlowed = true
        var took = true
        while surplus > 0 && took {
            took = false
            for id in hostOrder.reversed() where surplus > 0 {
                guard let lease = hosts[id]?.popLastReady() else { continue }
                took = true
                surplus -= 1
                forgetProbe(lease.token)  // a folder's probe: another of its jobs is chosen
                dropAhead(lease.token, jobID: lease.jobID, into: &actions)
                queue(.release(jobID: lease.jobID, token: lease.token, reason: Self.handedBack, progress: nil), Pending(lease: lease), now: now)
            }
        }
    }

    /// A job in hand leaves the ready list without a transfer: its preparation, if one was
    /// made ahead, is dropped (its temp file closed; nothing comes back of it).
    private mutating func dropAhead(_ token: String, jobID: Int, into actions: inout [Action]) {
        aheadStale = true
        guard ahead.removeValue(forKey: token) != nil else { return }
        aheadJobs.remove(jobID)
        actions.append(.dropPrepared(token: token))
    }

    private mutating func placeIfDue(now: Int, into actions: inout [Action]) {
        guard placing.isEmpty, !verified.isEmpty else { return }
        let due = verified.count >= config.batchSize || now - (oldestVerified ?? now) >= config.batchDelay
            || transfers.isEmpty || stopping
        guard due else { return }
        let tokens = Array(verified.keys)
        placing = verified
        verified.removeAll()
        oldestVerified = nil
        actions.append(.place(tokens))
    }

    private mutating func exchangeIfDue(now: Int, into actions: inout [Action]) {
        guard begun, inFlight == nil, now >= exchangeNotBefore else { return }
        // Most steps find no reason to exchange: the request is built only once there is one.
        var wantSlots: [Int: Int] = [:]
        var claim = 0
        var reasons = 0
        // Slots: ask for those ready jobs need; give back those no job of their host waits for
        // (at once when another host needs the room, else after `idleSlot`), those of paused
        // hosts, and one of each host another claimer waits on.
        var idleFree = 0
        for id in hostOrder {
            guard var host = hosts[id] else { continue }
            if host.readyCount == 0 && !host.free.isEmpty {
                if host.idleSince == nil { host.idleSince = now }
                idleFree += host.free.count
            } else {
                host.idleSince = nil
            }
            hosts[id] = host
        }
        var room = config.workers - transfers.count - hosts.values.reduce(0) { $0 + $1.free.count } + idleFree
        if !stopping && room > 0 {
            for id in hostOrder where room > 0 {
                guard let host = hosts[id], host.pausedUntil <= now, host.noSlotsUntil <= now else { continue }
                let need = min(host.readyCount, room, host.limitCap - host.busy) - host.free.count
                if need > 0 {
                    wantSlots[id] = need
                    room -= need
                }
            }
        }
        for id in hostOrder {
            guard var host = hosts[id], !host.free.isEmpty else { continue }
            if stopping || drained || host.pausedUntil > now || transfers.isEmpty && readyTotal == 0
                || host.idleSince.map({ !wantSlots.isEmpty || now - $0 >= Self.idleSlot }) == true {
                releasing.append(contentsOf: host.free)
                host.free.removeAll()
                host.idleSince = nil
            } else if host.limit != nil && host.busy + host.free.count > host.limitCap {
                let extra = min(host.free.count, host.busy + host.free.count - host.limitCap)
                releasing.append(contentsOf: host.free.suffix(extra))
                host.free.removeLast(extra)
            } else if host.yieldOne && host.busy + host.free.count > 1 {
                releasing.append(host.free.removeLast())
                host.yieldOne = false
                host.noSlotsUntil = now + 10 * config.slotRetry  // let the other claimer take it
            }
            hosts[id] = host
        }
        if !wantSlots.isEmpty { reasons += 1 }
        if !releasing.isEmpty { reasons += 1 }
        let ready = heldForClaims
        // Rounds of work in hand: one exchange (with a batch of outcomes) may take as long as
        // many transfers.
        let claimDue = now >= claimNotBefore || claimBlockedReady.map { ready < $0 } == true
        if !stopping && claimDue && ready < claimBelow {
            claim = claimTarget - ready
            reasons += 1
        }
        let outboxDue = !outbox.isEmpty && (outbox.count >= config.batchSize || now - (oldestOutbox ?? now) >= config.batchDelay
            || transfers.isEmpty || stopping || !forgetting.isEmpty)
        if outboxDue || !forgetting.isEmpty || !pauses.isEmpty || !headProgress.isEmpty && now - lastProgress >= config.batchDelay {
            reasons += 1
        }
        let renewal = now - lastRenewal >= renewEvery
        let progressDue = now - lastProgress >= config.progressEvery && !transfers.isEmpty
        if renewal || progressDue || now >= beatDueAt { reasons += 1 }
        guard reasons > 0 else { return }
        if claim > 0 { claimBlockedReady = nil }
        var request = Exchange(owner: config.owner, leaseMilliseconds: config.leaseMilliseconds)
        request.worker = config.worker
        request.maxAttempts = config.maxAttempts
        request.wantSlots = wantSlots
        request.claim = claim
        if claim > 0, hosts.isEmpty {
            // The run's first claim: the slots to start its jobs come with them, not one round
            // trip later. Only then: once a host is known, its overload limit, refusals and
            // failures shape what is asked for it (wantSlots), which a grant by jobs would not.
            request.slotsForClaimed = config.workers
        }
        if !releasing.isEmpty { request.releaseSlots = releasing }
        var parkedByHost: [Int: Int] = [:]
        for block in blockedFolders.values { for lease in block.parked { parkedByHost[lease.job.hostID, default: 0] += 1 } }
        for id in hostOrder {
            let parked = parkedByHost[id] ?? 0
            if let host = hosts[id], host.readyCount > 0 || host.busy > 0 || !host.free.isEmpty || parked > 0 {
                request.heldByHost[id] = host.readyCount + parked
            }
        }
        // Whatever goes anyway travels with it; outcomes at most `exchangeOutcomes` at a time, so
        // a big batch does not hold back the claims of the next jobs.
        let sending = Array(outbox.prefix(Self.exchangeOutcomes))
        request.outcomes = sending.map(\.0)
        request.pauses = pauses
        if renewal {
            // The limits this worker still holds hosts to, sent again so they keep holding for
            // every worker's grants (see `Exchange.limitLifetime`).
            for (id, host) in hosts where host.limit != nil && limitChanges[id] == nil { limitChanges[id] = .some(host.limit) }
        }
        request.limits = limitChanges
        let sentLimits = limitChanges
        limitChanges.removeAll()
        request.progress = headProgress + forgetting
        if renewal {
            lastRenewal = now
            var (leases, slots) = leasesInHand()
            request.renewSlots = slots
            for (token, item) in verified {
                leases.append(JobLeaseID(jobID: item.lease.jobID, token: token))
            }
            for (token, item) in placing where verified[token] == nil {
                leases.append(JobLeaseID(jobID: item.lease.jobID, token: token))
            }
            // Outcomes still waiting for their exchange hold their leases too.
            for (_, item) in outbox.dropFirst(sending.count) {
                leases.append(JobLeaseID(jobID: item.lease.jobID, token: item.lease.token))
            }
            request.renewJobs = leases
        }
        var progressOf: [String] = []
        if progressDue {
            lastProgress = now
            progressOf = transfers.filter { $0.value.phase == .fetching && !$0.value.abandoned }.map(\.key)
        }
        inFlight = Sent(outcomes: sending, forgets: forgetting, pauses: pauses, releases: releasing,
                        slotsWanted: Set(request.wantSlots.keys), renewed: renewal, limits: sentLimits, inputEvents: inputEvents,
                        sentAt: now)
        outbox.removeFirst(sending.count)
        if outbox.isEmpty { oldestOutbox = nil }
        pauses.removeAll()
        headProgress.removeAll()
        forgetting.removeAll()
        releasing.removeAll()
        actions.append(.exchange(request, progressOf: progressOf))
    }

    /// The soonest time something is due without another event.
    private func nextWake(now: Int) -> Int? {
        // The soonest so far (no array: this runs after nearly every event).
        var soonest: Int?
        func add(_ time: Int) { soonest = min(soonest ?? .max, max(time, now + 1)) }
        if placing.isEmpty, !verified.isEmpty, let oldest = oldestVerified { add(oldest + config.batchDelay) }
        if lastClaimedAt > 0, lastClaimedAt + Self.handBackAfter > now, readyTotal - parkedCount > 2 * config.workers {
            add(lastClaimedAt + Self.handBackAfter)
        }
        if letGoAt != .max { add(letGoAt) }
        if inFlight == nil && exchangeNotBefore > now {
            add(exchangeNotBefore)  // after a failed exchange, nothing is sent before this
        } else if inFlight == nil {
            if beatDueAt != .max { add(beatDueAt) }
            if !outbox.isEmpty, let oldest = oldestOutbox { add(oldest + config.batchDelay) }
            if !headProgress.isEmpty { add(lastProgress + config.batchDelay) }
            add(lastRenewal + renewEvery)
            if !transfers.isEmpty { add(lastProgress + config.progressEvery) }
            if !stopping && heldForClaims < claimBelow { add(claimNotBefore) }
            for block in blockedFolders.values where block.probe == nil && !block.parked.isEmpty { add(block.until) }
            for host in hosts.values {
                if let idle = host.idleSince { add(idle + Self.idleSlot) }
                guard host.readyCount > 0 else { continue }
                if host.noSlotsUntil > now { add(host.noSlotsUntil) }
                if host.pausedUntil > now { add(host.pausedUntil) }
            }
        }
        return soonest
    }

    /// Why a job is handed back uncounted when haul stops (see `Attempt.wasCounted`).
    static let stopped = "\(Attempt.interruptedPrefix) haul was stopped"

    /// How long to wait before looking again at a queue whose last jobs others run, after
    /// `polls` such looks, in ms: 10 ms at first, a quarter longer each time, at most a second.
    /// On two `haul run`s sharing one queue, the first to run out of work waited a fixed 100 ms
    /// between looks and so ended up to 100 ms after the other; a long wait (another worker's
    /// big file) costs about one look a second after the first five seconds.
    static func waitingPoll(after polls: Int) -> Int {
        var interval = 10
        for _ in 0..<min(polls, 30) { interval += interval / 4 }
        return min(interval, 1000)
    }

    /// How long a free slot with no job for it is kept before it is given back, in ms.
    static let idleSlot = 100
    /// Outcomes sent in one exchange at most: two batches of placed files, so a batch goes in
    /// one exchange and a backlog does not hold back the claims that travel with it for long.
    static let exchangeOutcomes = 256

    static func progress(_ snapshot: DownloadAttempt.Snapshot, lease: Lease) -> Progress {
        var etag: String?, lastModified: String?
        switch snapshot.validator {
        case .etag(let tag): etag = tag
        case .lastModified(let date): lastModified = date
        case nil: break
        }
        return Progress(jobID: lease.jobID, token: lease.token, receivedBytes: Int(snapshot.bytesOnDisk),
                        expectedBytes: snapshot.expectedTotal.map(Int.init), etag: etag, lastModified: lastModified,
                        url: snapshot.validator == nil ? nil : snapshot.url)
    }

    /// Transfers running now (for the display).
    var activeTransfers: Int { transfers.count }

    /// Hosts walked at each step, and hosts set aside with their state (for tests).
    var hostCounts: (inHand: Int, remembered: Int, order: Int) { (hostOrder.count, remembered.count, rememberedOrder.count - rememberedStart) }
}
