import Dispatch
import Foundation
import Synchronization

/// Drains the job queue: the thin runner of `EngineCore`, which decides; this performs its
/// actions (temp files, fetches, placement, exchanges with the store) and feeds back what
/// happened.
///
/// Guarantees (with `EngineCore`'s):
/// - at most `workers` transfers at once, and at most a host's cap per host over every process
///   sharing the queue (slots held in the store);
/// - a job is marked done only after its file was verified, made durable and renamed into place;
/// - every failed attempt is recorded, then retried after Retry-After (pausing the host) or
///   backoff, or failed with its reason after `maxAttempts`;
/// - leases and slots are renewed while held; a transfer whose lease was lost is abandoned;
/// - on `stop()`, no new job is claimed, transfers are cancelled with their temp files kept, and
///   their jobs are handed back to the queue without counting the attempt;
/// - memory does not grow with the queue: jobs are claimed a few at a time.
public final class DownloadEngine: Sendable {
    private let runner: Runner
    private let store: StoreExecutor
    private let options: EngineOptions

    public init(store: StoreExecutor, transport: Transport, options: EngineOptions,
                events: @escaping @Sendable (EngineEvent) -> Void = { _ in }) {
        self.store = store
        self.options = options
        let config = Self.coreConfig(options, claimAheadRounds: store.claimAheadRounds, claimBelowRounds: store.claimBelowRounds)
        if let limit = options.openFileLimit {
            UnnamedFilePool.keep(atMost: DescriptorBudget.keptRoom(workers: options.workers, limit: limit))
        }
        runner = Runner(core: EngineCore(config: config), store: store, transport: transport, options: options, emit: events)
    }

    /// The core's settings for a run. The jobs in hand are prepared ahead, up to four rounds of
    /// them: a job claimed is started a few milliseconds later, and a preparation takes about
    /// 2 ms from asking to the answer on libcurl's loop (waiting for a preparing thread, then for
    /// the loop's turn), so one prepared only when its turn came was often late. Each holds a
    /// temp file open, so beyond 256 of them no more than two rounds are (as before: with many
    /// workers the descriptors, not the wait, are what runs short).
    ///
    /// Preparations go out a quarter of that (at most a round) at a time: each batch wakes a
    /// preparing thread once, where one preparation at a time woke one for nearly every file.
    static func coreConfig(_ options: EngineOptions, claimAheadRounds: Int, claimBelowRounds: Int) -> EngineCore.Config {
        let policy = RetryPolicy(backoff: Backoff(base: 1, cap: 300), maxRetryAfter: options.maxRetryAfter)
        let prepareAhead = min(min(claimAheadRounds, 4) * options.workers, max(2 * options.workers, 256),
                               options.openFileLimit.map { DescriptorBudget.prepareRoom(workers: options.workers, limit: $0) } ?? .max)
        return EngineCore.Config(workers: options.workers, owner: ProcessIdentity.current.description,
                                 worker: options.workerName, leaseMilliseconds: Int(options.leaseDuration * 1000), maxAttempts: options.maxAttempts,
                                 policy: policy, hostDownLimit: Int(options.maxHostDown * 1000), progressEvery: Int(options.progressInterval * 1000),
                                 prepareAhead: prepareAhead, prepareBatch: max(1, min(options.workers, prepareAhead / 4)),
                                 claimAheadRounds: claimAheadRounds, claimBelowRounds: claimBelowRounds, inputOpen: options.inputOpen)
    }

    /// Asks the run to stop (safe to call from any thread, e.g. a signal handler).
    public func stop() {
        runner.send(.stop)
    }

    /// Jobs were added to the queue while the run goes on (see `EngineOptions.inputOpen`):
    /// they are looked for now, not at the next poll. Safe to call from any thread.
    public func inputAdded() {
        runner.send(.inputAdded)
    }

    /// No more jobs will be added (see `EngineOptions.inputOpen`): the run ends once the queue
    /// is drained. Safe to call from any thread.
    public func inputClosed() {
        runner.send(.inputClosed)
    }

    /// Live figures for a progress display.
    public func currentStats() async -> EngineStats {
        await runner.stats()
    }

    /// Runs until every job is done, failed or cancelled (with `EngineOptions.inputOpen`: and
    /// `inputClosed()` was called), or until `stop()`.
    public func run() async throws -> RunSummary {
        let started = Date()
        let cap = options.perHost
        let (identity, removed) = try await store.perform { store -> (Int, Int) in
            if let cap { try store.setHostCap(cap, host: nil) }
            try Startup.reclaimDeadOwners(store)
            let identity = try store.identity()
            return (identity, try Startup.removeOrphanedTempFiles(store, queueIdentity: identity))
        }
        if removed > 0 { runner.emit(.warning("removed \(removed) temp files that no job owns any more")) }
        var summary = try await runner.run(queueIdentity: identity)
        summary.elapsed = Date().timeIntervalSince(started)
        let owner = ProcessIdentity.current.description
        summary.finalCounts = try await store.perform { store in
            try? store.leave(owner: owner)  // a run that ended holds nothing; failing to say so only leaves a stale name
            return try store.status().counts
        }
        return summary
    }
}

/// Performs `EngineCore`'s actions.
///
/// @unchecked Sendable: every stored `var` is touched only on `queue` (a serial `WorkQueue`):
/// events from other threads (transport completions, store results, placement, timers,
/// `stop`) are handed in with `send`, which runs them there.
private final class Runner: @unchecked Sendable {
    let emit: @Sendable (EngineEvent) -> Void
    /// The transport's own thread when it has one (libcurl's loop), so a transfer's end and
    /// the start of the next one happen on the thread that runs them, with no hand-over
    /// (measured on workload A: with its own dispatch queue, the engine's slots were held
    /// 15.75 on average while libcurl ran about 3 transfers, the rest waiting for threads to
    /// wake); else a serial dispatch queue. Either keeps the core's wake-up timer.
    private let queue: any TimerWorkQueue
    private let store: StoreExecutor
    private let transport: Transport
    private let options: EngineOptions
    private var core: EngineCore
    /// A prepared transfer, from its preparation's end to its own: its lease, its attempt
    /// (temp file open), its URL (parsed once while it was prepared, off this queue: a parse
    /// costs about 7,000 instructions), how its file goes into place (see `ExistingFile`), and
    /// its fetch once sent. One map, so a file's steps look it up once each (measured on
    /// workload A: four maps by token cost about 7,500 instructions a file in hashing alone).
    private struct Transfer {
        let lease: Lease
        let attempt: DownloadAttempt
        let url: URL
        let mode: Placement.Mode
        var handle: FetchHandle?
    }
    private var transfers = TokenMap<Transfer>()
    private var files = TokenMap<(file: VerifiedFile, mode: Placement.Mode)>()
    /// A preparation under way: which one (a token dropped ahead may be prepared again while
    /// its first preparation still runs), and what the core said of it meanwhile.
    private struct Preparing {
        var generation: Int
        /// Cancelled: it ends as cancelled (the core waits for its end).
        var cancelled = false
        /// Dropped: the core forgot it; its file is closed and nothing is reported.
        var dropped = false
    }
    private var preparing = TokenMap<Preparing>()
    /// The queue's identity (`JobStore.identity`), set when the run begins: names temp files.
    private var queueIdentity = 0
    private var preparations = 0
    /// Preparations asked for in this turn, sent out together at its end (see `sendPreparations`).
    private var toPrepare: [(lease: Lease, generation: Int)] = []
    /// At most this many preparations go to a preparing thread as one piece of work.
    private static let preparationChunk = 8
    /// Pieces of preparation sent so far: the next goes to `prepareQueues[pieces % count]`.
    private var preparationPieces = 0
    /// Events waiting for the core (see `process`).
    private var incoming: [EngineCore.Event] = []
    /// Request profiles read so far, by id (few: one per `add` that gave options).
    private var profiles: [Int: RequestProfile] = [:]
    private var missingProfiles = Set<Int>()
    private var queueCounts: [JobState: Int] = [:]
    private var waitingForRetry = 0
    /// The queue's last count of bytes still to come, and this run's bytes when it was taken.
    private var pendingBytes: Int64 = 0
    private var pendingUnknownSize = 0
    private var bytesAtCount: Int64 = 0
    private var lastCounts = 0
    private var continuation: CheckedContinuation<RunSummary, any Error>?
    /// Exchanges the store refused in a row (one it could not be reached for does not count:
    /// see `outageLimit`), and when the last exchange succeeded (0: none yet).
    private var failedExchanges = 0
    private var lastExchanged = 0
    private var exchangedOnce: Bool { lastExchanged > 0 }
    /// The summary, once the core finished.
    private var finished: RunSummary?
    private var abortError: (any Error)?
    /// Set when the run ended on an error: later events are dropped.
    private var aborted = false
    /// The longest run of failed exchanges before the run ends on the error.
    static let failedExchangeLimit = 5
    /// How long (ms) a run waits for a store that cannot be reached (`StoreError.isUnavailable`:
    /// a database server restarting, failing over, or cut off) before it ends on the error. Its
    /// transfers go on meanwhile for as long as their leases hold; then the core stops them and
    /// lets go of every job in hand (`EngineCore.letLeasesGo`), so a long wait holds nothing that
    /// another worker could want.
    static let outageLimit = StoreOutage.limit
    private let started = Date()

    /// Where transfers are prepared, in turn. Serial queues have threads of their own; on
    /// `fileQueue` (concurrent, so limited to about one thread per core) preparations waited
    /// behind placements blocked in `syncfs`. Two, as one was busy enough on workload A that
    /// jobs prepared ahead were often not ready when their slot came.
    private let prepareQueues = [HelperQueue.serial("haul.prepare.0"), HelperQueue.serial("haul.prepare.1")]
    /// Where blocking file work (fsync, rename) runs.
    static let fileQueue = HelperQueue.concurrent("haul.files")
    /// Writes small bodies as their files are verified, ahead of placement; the one way such a
    /// file is placed or closed (see its guarantees).
    private let heldBodies = HeldBodyWriter()
    /// Output folders empty when first looked at: a first try there does not examine its destination.
    private let emptyFolders = EmptyFolders()

    init(core: EngineCore, store: StoreExecutor, transport: Transport, options: EngineOptions,
         emit: @escaping @Sendable (EngineEvent) -> Void) {
        self.core = core
        self.store = store
        self.transport = transport
        queue = transport.workQueue ?? DispatchTimerQueue(label: "haul.engine")
        self.options = options
        self.emit = emit
    }

    /// `queueIdentity`: the store's (`JobStore.identity`), which names its temp files.
    func run(queueIdentity: Int) async throws -> RunSummary {
        try await withCheckedThrowingContinuation { continuation in
            queue.enqueue {
                self.queueIdentity = queueIdentity
                if let summary = self.finished {
                    continuation.resume(returning: summary)  // stopped before it began
                    return
                }
                if let error = self.abortError {
                    continuation.resume(throwing: error)
                    return
                }
                self.continuation = continuation
                self.process(.begin)
            }
        }
    }

    func send(_ event: EngineCore.Event) {
        queue.enqueue { self.process(event) }
    }

    func stats() async -> EngineStats {
        await withCheckedContinuation { continuation in
            queue.enqueue {
                var stats = self.core.stats
                stats.active = self.core.activeTransfers
                stats.started = self.started
                stats.queueCounts = self.queueCounts
                stats.waitingForRetry = self.waitingForRetry
                stats.bytesThisRun = self.bytesThisRun()
                for transfer in self.transfers.values where transfer.handle != nil {
                    let snapshot = transfer.attempt.snapshot
                    stats.transfers.append(TransferStats(jobID: transfer.lease.jobID, destination: transfer.lease.job.destination,
                                                         bytesOnDisk: snapshot.bytesOnDisk, expectedTotal: snapshot.expectedTotal))
                }
                stats.pendingBytes = max(0, self.pendingBytes - (stats.bytesThisRun - self.bytesAtCount))
                stats.pendingUnknownSize = self.pendingUnknownSize
                continuation.resume(returning: stats)
            }
        }
    }

    private static func now() -> Int { Int(Date().timeIntervalSince1970 * 1000) }

    /// Bytes received in this run so far, the transfers in flight included.
    private func bytesThisRun() -> Int64 {
        var bytes = core.stats.bytesThisRun
        for transfer in transfers.values where transfer.handle != nil {
            bytes += max(0, transfer.attempt.snapshot.bytesOnDisk - transfer.attempt.resumeOffset)
        }
        return bytes
    }

    /// Hands `event` to the core with the others that come in this turn of `queue` (transfers
    /// ended in one turn of libcurl's loop, preparations and placements handed in meanwhile):
    /// the core decides once for them all. Measured on workload A: 2.1 decisions a file one
    /// event at a time, at about 8,700 instructions each.
    private func process(_ event: EngineCore.Event) {
        guard !aborted else { return }
        incoming.append(event)
        if incoming.count == 1 { queue.enqueue { self.processIncoming() } }
    }

    /// Hands the events that came in to the core and performs what it asks, then whatever that
    /// brings about.
    private func processIncoming() {
        let batch = incoming
        incoming = []
        guard !aborted, !batch.isEmpty else { return }
        var followUps: [EngineCore.Event] = []
        for action in core.handle(batch, now: Self.now()) { perform(action, then: &followUps) }
        var index = 0
        while index < followUps.count {
            let actions = core.handle(followUps[index], now: Self.now())
            index += 1
            for action in actions { perform(action, then: &followUps) }
        }
        sendPreparations()
    }

    private func perform(_ action: EngineCore.Action, then events: inout [EngineCore.Event]) {
        switch action {
        case .prepare(let lease):
            startPreparing(lease)
        case .fetch(let token):
            if let event = fetch(token) { events.append(event) }
        case .cancel(let token):
            let transfer = transfers[token]
            if let handle = transfer?.handle {
                handle.cancel()
            } else if preparing[token] != nil {
                preparing[token]?.cancelled = true  // it ends when its file is open (see startPreparing)
            } else if let attempt = transfer?.attempt {
                // Not sent yet (waiting for its validator to be forgotten): it ends here.
                events.append(.transferEnded(token: token, .failed(.cancelled, status: nil, snapshot: attempt.snapshot),
                                             resumedFrom: attempt.resumeOffset))
                forget(token)
            }
        case .exchange(var request, let progressOf):
            for token in progressOf {
                guard let transfer = transfers[token] else { continue }
                request.progress.append(EngineCore.progress(transfer.attempt.snapshotForProgress(), lease: transfer.lease))
            }
            exchange(request)
        case .place(let tokens):
            let batch = tokens.compactMap { token in files.removeValue(forKey: token).map { (token, $0) } }
            heldBodies.afterWrites(batch.map { ($0.0, $0.1.file) }) { files in
                Self.fileQueue.async {
                    let placed = Placement.place(zip(files, batch).map { ($0, $1.1.mode) })
                    var results: [String: Placement.Result] = [:]
                    for ((token, _), result) in zip(batch, placed) { results[token] = result }
                    self.send(.placed(results))
                }
            }
        case .dropPrepared(let token):
            if preparing[token] != nil {
                preparing[token]?.dropped = true  // closed when its file is open (see startPreparing)
            } else if let transfer = transfers[token], transfer.handle == nil {
                transfer.attempt.closeUnsent()
                forget(token)
            }
        case .removeTemp(let lease):
            TempFile(destination: lease.job.destination, jobID: lease.jobID, queue: queueIdentity).remove()
        case .drop(let token):
            if let file = files.removeValue(forKey: token)?.file { heldBodies.close(file, token: token) }
        case .report(let event):
            emit(event)
        case .wake(let at):
            schedule(at: at)
        case .finish:
            cancelTimer()
            finished = core.summary
            continuation?.resume(returning: core.summary)
            continuation = nil
        }
    }

    // MARK: Transfers

    /// What the file work of a preparation found.
    private enum Preparation: Sendable {
        /// The temp file is open: the transfer can start.
        case ready(DownloadAttempt, Placement.Mode, URL)
        /// Nothing to fetch: the event that ends the transfer (a kept file, a refusal).
        case ended(EngineCore.Event)
    }

    /// Starts a transfer's preparation: its file work runs on `prepareQueues`, so the many
    /// system calls it makes (the destination, the temp file, its lock) never hold up this
    /// queue, which every transfer's events pass through. Measured on workload A: this queue
    /// was busy about 70 % of the run, half of it preparing. It goes out with the turn's others
    /// (`sendPreparations`).
    private func startPreparing(_ lease: Lease) {
        preparations &+= 1
        preparing[lease.token] = Preparing(generation: preparations)
        toPrepare.append((lease, preparations))
    }

    /// Sends the turn's preparations to `prepareQueues`, in pieces of at most
    /// `preparationChunk` taken by the queues in turn; each piece's results come back to this
    /// queue together. One preparation a piece woke a preparing thread, and then this queue's
    /// thread, for nearly every file of workload A; in pieces, a run of A made 8,740 context
    /// switches instead of 10,506 (means of 8 runs, `perf stat`).
    private func sendPreparations() {
        guard !toPrepare.isEmpty else { return }
        let all = toPrepare
        toPrepare = []
        let queueIdentity = queueIdentity
        for start in stride(from: 0, to: all.count, by: Self.preparationChunk) {
            let chunk = Array(all[start..<min(start + Self.preparationChunk, all.count)])
            // By the piece's number, not its first generation: with pieces of 8 and two
            // queues, every piece of a turn would have gone to the same queue.
            preparationPieces &+= 1
            prepareQueues[preparationPieces % prepareQueues.count].async { [self] in
                // Folders found without links, looked at once a piece (see `TempFile.checkNoNewLinks`).
                var clear: [String: UInt64] = [:]
                let results = chunk.map { ($0.lease, $0.generation, prepareFiles($0.lease, queueIdentity: queueIdentity, clear: &clear)) }
                queue.enqueue { [self] in
                    for (lease, generation, preparation) in results { finishPreparing(lease, generation: generation, preparation) }
                }
            }
        }
    }

    /// A preparation's result, on this queue: to the core, or closed when no longer wanted.
    private func finishPreparing(_ lease: Lease, generation: Int, _ preparation: Preparation) {
        let entry = preparing[lease.token]
        let current = entry?.generation == generation
        if current { preparing[lease.token] = nil }
        guard current, let entry, !entry.dropped, !aborted else {
            // Dropped, or superseded by a later preparation of the same lease: its
            // file closes, and the core hears nothing of it.
            if case .ready(let attempt, _, _) = preparation { attempt.closeUnsent() }
            return
        }
        if case .ready(let attempt, _, _) = preparation, entry.cancelled {
            // Stopped while its file was being opened: it closes unsent.
            attempt.closeUnsent()
            process(.transferEnded(token: lease.token, .failed(.cancelled, status: nil, snapshot: attempt.snapshot),
                                   resumedFrom: attempt.resumeOffset))
            return
        }
        process(prepared(lease, preparation))
    }

    /// Records a prepared transfer (on this queue) and returns what the core hears of it.
    private func prepared(_ lease: Lease, _ preparation: Preparation) -> EngineCore.Event {
        let job = lease.job
        let token = lease.token
        switch preparation {
        case .ended(let event):
            return event
        case .ready(let attempt, let mode, let url):
            transfers[token] = Transfer(lease: lease, attempt: attempt, url: url, mode: mode)
            // Starting over while the queue still holds an earlier partial file's validator:
            // forget it before any new byte is written. Otherwise a kill before the next progress
            // write leaves the old validator on the new bytes, and a later resume (If-Range: old)
            // splices two versions of the file.
            let forget = attempt.resumeOffset == 0 && (job.etag != nil || job.lastModified != nil)
                ? Progress(jobID: job.id, token: token, receivedBytes: 0, expectedBytes: nil) : nil
            return .prepared(token: token, forget: forget)
        }
    }

    /// Looks at what is at the destination, opens the temp file and decides how to resume.
    /// Runs on a `prepareQueues` queue: it reads only constants (`options`) and its arguments, and
    /// sends events through the queue, never touching this runner's state.
    private func prepareFiles(_ lease: Lease, queueIdentity: Int, clear: inout [String: UInt64]) -> Preparation {
        let job = lease.job
        let token = lease.token
        let temp = TempFile(destination: job.destination, jobID: job.id, queue: queueIdentity)
        do {
            try temp.checkNoNewLinks(since: job.createdAt, root: job.root, clear: &clear, now: DispatchTime.now().uptimeNanoseconds)
        } catch {
            return .ended(.prepareFailed(token: token, .unsafeDestination(String(describing: error))))
        }
        var checksum: Checksum? = nil
        if let stored = job.checksum {
            // Only a database changed by hand holds another text: never fetch such a job unchecked.
            guard let parsed = Checksum(stored: stored) else {
                return .ended(.prepareFailed(token: token, .refused(
                    "the jobs table holds checksum '\(stored.prefix(40))' for job \(job.id), which is not ALGORITHM=HEX (md5, sha1, sha256 or sha512); correct it there (or set it to NULL), then haul retry \(job.id)")))
            }
            checksum = parsed
        }
        let policy = options.ifExists ?? job.ifExists
        var mode: Placement.Mode = switch policy {
        case .skip: .keepExisting
        case .replace: .replace
        case .rename: .besideExisting
        }
        var conditional: DownloadAttempt.Conditional? = nil
        // A file haul placed beside the destination (rename) is looked for where it went.
        let found: ExistingFile.Found
        // Haul's own file is replaced (a refresh) only if it is still unchanged when the download
        // is placed: a user who writes there meanwhile keeps their file, as `policy` says.
        if lease.firstTry, job.checksum == nil, emptyFolders.wereEmpty(job.destination.parentFolder) {
            // Never tried (nothing of its own anywhere), in a folder that held nothing when this
            // run first looked: nothing to examine (see `EmptyFolders`). Not with a checksum: a
            // file found there must match it, and is examined.
            found = .nothing
        } else if let beside = job.placed?.path, ExistingFile.examine(beside, placed: job.placed) == .haulsOwn {
            found = .haulsOwn
            mode = policy == .replace ? .replaceAt(beside) : .replaceOwn(beside: beside, placed: job.placed, mark: nil, otherwise: mode)
        } else if policy == .rename, job.placed == nil, case let mark = ExistingFile.mark(for: job),
                  let beside = ExistingFile.markedBeside(job.destination, mark: mark) {
            // Placed beside the user's file, then a crash came before the queue recorded where:
            // the new download goes over it, not to the next free name.
            found = .haulsOwn
            mode = .replaceOwn(beside: beside, placed: nil, mark: mark, otherwise: mode)
        } else {
            let placed = job.placed?.path == nil ? job.placed : nil
            // The mark is made only when needed (examine asks for it only when nothing is recorded).
            found = ExistingFile.examine(job.destination, placed: placed, mark: ExistingFile.mark(for: job))
            if found == .haulsOwn {
                mode = policy == .replace ? .replace
                    : .replaceOwn(beside: nil, placed: placed, mark: ExistingFile.mark(for: job), otherwise: mode)
            }
        }
        switch found {
        case .nothing:
            break
        case .haulsOwn:
            // Haul's own file is still there (a refresh): ask whether it changed.
            if let metadata = job.placed?.metadata, metadata.etag != nil || metadata.lastModified != nil {
                conditional = DownloadAttempt.Conditional(etag: metadata.etag, lastModified: metadata.lastModified)
            }
        case .usersFile(let size) where policy == .skip:
            guard let expected = checksum else { return .ended(.transferEnded(token: token, .kept(size: size), resumedFrom: 0)) }
            do {
                let actual = try ExistingFile.digest(of: job.destination, expected.algorithm)
                return .ended(actual == expected.hex
                    ? .transferEnded(token: token, .kept(size: size), resumedFrom: 0)
                    : .prepareFailed(token: token, .refused(
                        "the file already at \(job.destination) does not match the \(expected.algorithm.rawValue) given (it has \(actual)); it was left alone: remove it, or add the URL with --if-exists replace")))
            } catch {
                return .ended(.prepareFailed(token: token, .disk(String(describing: error))))
            }
        case .usersFile:
            break
        case .folder:
            // Placement would refuse it after the download: refused before, once, not after
            // every attempt's whole body.
            return .ended(.prepareFailed(token: token, .refused(
                "destination \(job.destination) is a folder; remove it or give the URL another out= name, then haul retry \(job.id)")))
        }
        guard let url = URL(string: job.url) else {
            return .ended(.prepareFailed(token: token, .badRedirect("invalid URL: \(HTTPURL.redact(job.url))")))
        }
        let storedValidator: Validator? = job.etag.map(Validator.etag) ?? job.lastModified.map(Validator.lastModified)
        do {
            let attempt = try DownloadAttempt(
                temp: temp, expectedChecksum: checksum, storedValidator: storedValidator,
                storedTotal: job.expectedBytes.map(Int64.init), storedURL: job.partialURL, recordSHA256: options.recordSHA256,
                conditional: conditional,
                unnamed: true,
                // Only an earlier try makes a temp file under the job's name: the store says
                // whether any was claimed (`Lease.firstTry`), and the core marks a lease it tries
                // again itself (a parked one). A recorded validator or bytes say so too.
                lookForEarlier: !lease.firstTry || storedValidator != nil || job.receivedBytes > 0,
                jobHost: job.host,
                onAccepted: { [weak self] snapshot in
                    // Record the validator and length before the body, so a kill -9 mid-body can
                    // resume. Small files are cheaper to fetch again than to record twice.
                    guard snapshot.validator != nil, (snapshot.expectedTotal ?? .max) >= DownloadAttempt.resumableSize else { return }
                    self?.send(.headAccepted(token: token, EngineCore.progress(snapshot, lease: lease)))
                })
            return .ready(attempt, mode, url)
        } catch let error as TransferIOError where error.unsafe {
            return .ended(.prepareFailed(token: token, .unsafeDestination(error.message)))
        } catch let error as TransferIOError where error.code == EWOULDBLOCK {
            return .ended(.prepareFailed(token: token, .tempInUse(error.message + "; it waits for that process to stop")))
        } catch let error as TransferIOError where LocalFault.isLocal(error.code) {
            return .ended(.prepareFailed(token: token, LocalFault.failure(error, destination: job.destination) ?? .disk(error.message)))
        } catch {
            return .ended(.prepareFailed(token: token, .disk(String(describing: error))))
        }
    }

    /// Sends the request of a prepared attempt.
    private func fetch(_ token: String) -> EngineCore.Event? {
        guard let transfer = transfers[token] else { return nil }
        let lease = transfer.lease, attempt = transfer.attempt
        var request = FetchRequest(url: transfer.url, headers: attempt.requestHeaders,
                                   stallTimeout: options.stallTimeout, totalTimeout: options.totalTimeout)
        if let id = lease.job.profileID {
            guard let profile = profiles[id] else {
                forget(token)
                return .transferEnded(token: token, .failed(.disk("its request options (profile \(id)) are missing from the database"),
                                                            status: nil, snapshot: nil), resumedFrom: 0)
            }
            Self.apply(profile, to: &request)
        }
        emit(.started(jobID: lease.job.id, url: lease.job.url, resumeFrom: attempt.resumeOffset))
        transfers[token]?.handle = transport.start(request, into: attempt) { [weak self] result in
            guard let self else { return }
            self.queue.enqueue { self.fetched(token, result) }
        }
        return nil
    }

    /// A fetch ended: verify what it wrote, and tell the core.
    private func fetched(_ token: String, _ result: FetchResult) {
        guard let transfer = transfers.removeValue(forKey: token) else { return }
        let attempt = transfer.attempt
        let end: EngineCore.TransferEnd
        switch attempt.verify(result) {
        case .verified(var file):
            file.mark = ExistingFile.mark(for: transfer.lease.job)
            files[token] = (file, transfer.mode)
            heldBodies.write(file, token: token)
            end = .verified(status: file.status, bytes: file.bytes)
        case .failed(let failure, let status):
            end = .failed(failure, status: status, snapshot: attempt.snapshot)
        case .notModified:
            end = .unchanged
        }
        let resumedFrom = attempt.resumeOffset
        process(.transferEnded(token: token, end, resumedFrom: resumedFrom))
    }

    private func forget(_ token: String) {
        transfers[token] = nil
    }

    /// Adds a job's request options to its request. The attempt's own headers (Range, If-Range)
    /// come first and are never replaced: `add` refuses those names.
    private static func apply(_ profile: RequestProfile, to request: inout FetchRequest) {
        for (name, value) in profile.headers where request.headers[name] == nil {
            request.headers[name] = value
        }
        request.userAgent = profile.userAgent
        switch profile.netrc {
        case .home?:
            request.netrcFile = (ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()) + "/.netrc"
        case .file(let path)?:
            request.netrcFile = path
        case nil:
            break
        }
    }

    // MARK: The store

    private struct Answer: Sendable {
        var result: ExchangeResult
        var profiles: [Int: RequestProfile?]
        var status: QueueStatus?
    }

    /// One exchange on the store's queue; the answer comes back as an event. Request profiles of
    /// newly claimed jobs, and the queue's counts (about once a second), are read with it.
    private func exchange(_ request: Exchange) {
        let known = Set(profiles.keys).union(missingProfiles)
        let now = Self.now()
        let wantCounts = options.readsQueueCounts && now - lastCounts >= 1000
        if wantCounts { lastCounts = now }
        store.async({ store -> Answer in
            let result = try store.exchange(request)
            // The exchange is committed: what follows must not turn it into a failure. A profile
            // that cannot be read fails its job's attempt (as a missing one does); counts wait.
            var read: [Int: RequestProfile?] = [:]
            for lease in result.claimed {
                guard let id = lease.job.profileID, !known.contains(id), read[id] == nil else { continue }
                read[id] = .some(try? store.profile(id: id))
            }
            return Answer(result: result, profiles: read, status: wantCounts ? try? store.recentStatus() : nil)
        }, completion: { [weak self] answer in
            guard let self else { return }
            self.queue.enqueue {
                switch answer {
                case .success(let answer):
                    self.failedExchanges = 0
                    self.lastExchanged = Self.now()
                    for (id, profile) in answer.profiles {
                        if let profile { self.profiles[id] = profile } else { self.missingProfiles.insert(id) }
                    }
                    if let status = answer.status {
                        self.queueCounts = status.counts
                        self.waitingForRetry = status.waitingForRetry
                        self.pendingBytes = Int64(status.pendingBytes)
                        self.pendingUnknownSize = status.pendingUnknownSize
                        self.bytesAtCount = self.bytesThisRun()
                    }
                    self.process(.exchanged(answer.result))
                case .failure(let error):
                    // Taken off a shared queue: its jobs are the queue's again, so it must stop at once.
                    // A queue that cannot be reached is waited for, up to `outageLimit` (unless the
                    // run is stopping); one that refuses is tried `failedExchangeLimit` times in a row.
                    let unreachable = (error as? StoreError)?.isUnavailable == true && !self.core.isStopping
                    if !unreachable { self.failedExchanges += 1 }
                    let waited = unreachable
                        ? Self.now() - self.lastExchanged >= Self.outageLimit : self.failedExchanges >= Self.failedExchangeLimit
                    if !self.exchangedOnce || waited || error is WorkerEvicted {
                        self.abort(error)
                    } else {
                        self.process(.exchangeFailed(String(describing: error)))
                    }
                }
            }
        })
    }

    /// Ends the run on `error` (the queue cannot be written): transfers stop, their temp files
    /// stay, and their jobs' leases expire for a later run to take them back.
    private func abort(_ error: any Error) {
        aborted = true
        abortError = error
        for transfer in transfers.values { transfer.handle?.cancel() }
        heldBodies.closeAll(files.values.map(\.file))
        cancelTimer()
        continuation?.resume(throwing: error)
        continuation = nil
    }

    private func cancelTimer() {
        queue.cancelTimer()
    }

    /// Processes `.tick` at `at` (Unix ms), on the queue's own timer: on libcurl's loop it costs
    /// no system call (the core asks for a wake-up after nearly every event, and a dispatch
    /// timer set that often woke libdispatch's manager thread 0.6 times a file on workload A).
    private func schedule(at: Int) {
        queue.setTimer(afterMilliseconds: max(0, at - Self.now())) { [weak self] in self?.process(.tick) }
    }
}
