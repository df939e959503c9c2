import Foundation
import Synchronization

/// Drains the job queue with a bounded pool of transfers.
///
/// Guarantees:
/// - at most `workers` transfers at once, and at most `perHost` per host counted in the database
///   over every process sharing it (claims are made there, round-robin over hosts);
/// - a job is marked done only after its file was verified, made durable and renamed into place;
/// - every failed attempt is recorded, then retried after Retry-After (pausing the host) or
///   backoff, or failed with its reason after `maxAttempts`;
/// - leases are renewed while transfers run; a transfer whose lease was lost is abandoned;
/// - on `stop()`, no new job is claimed, transfers are cancelled with their temp files kept, and
///   their jobs are handed back to the queue without counting the attempt;
/// - memory does not grow with the queue: jobs are claimed a few at a time.
public actor DownloadEngine {
    private struct ActiveJob {
        let lease: Lease
        var attempt: DownloadAttempt?
        var task: Task<Void, Never>?
        /// The job was claimed again under a new lease (this one expired): not renewed any more.
        var superseded = false
    }

    private let service: QueueService
    private let transport: Transport
    private let options: EngineOptions
    private let policy: RetryPolicy
    private let emit: @Sendable (EngineEvent) -> Void
    private let owner = ProcessIdentity.current.description

    private let wake = WakeSignal()
    private let stopping = Atomic<Bool>(false)
    /// Transfers in flight, keyed by lease token: after a lease expiry the same job can be
    /// claimed again while its old transfer is still being abandoned.
    private var active: [String: ActiveJob] = [:]
    /// Claimed jobs waiting for a free worker.
    private var ready: [Lease] = []
    private var pendingCompletions: [PendingCompletion] = []
    private var oldestPending = ContinuousClock.now
    private var stats = EngineStats()
    private var completedBytes: Int64 = 0
    private var failureReasons: [String: Int] = [:]
    /// Request profiles read so far, by id (few: one per `add` that gave options).
    private var profiles: [Int: RequestProfile] = [:]

    public init(service: QueueService, transport: Transport, options: EngineOptions,
                events: @escaping @Sendable (EngineEvent) -> Void = { _ in }) {
        self.service = service
        self.transport = transport
        self.options = options
        self.policy = RetryPolicy(backoff: Backoff(base: 1, cap: 300), maxRetryAfter: options.maxRetryAfter)
        self.emit = events
    }

    /// Asks the run to stop (safe to call from any thread, e.g. a signal handler).
    public nonisolated func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        transport.cancelAll()
        wake.fire()
    }

    /// Live figures for a progress display.
    public func currentStats() -> EngineStats {
        var copy = stats
        copy.active = active.count
        copy.bytesThisRun = completedBytes + active.values.reduce(0) { sum, job in
            guard let attempt = job.attempt else { return sum }
            return sum + max(0, attempt.snapshot.bytesOnDisk - attempt.resumeOffset)
        }
        return copy
    }

    /// Runs until every job is done, failed or cancelled, or until `stop()`.
    public func run() async throws -> RunSummary {
        stats.started = Date()
        try await reclaimDeadOwners()
        try await removeOrphanedTempFiles()
        let background = Task { await self.maintain() }
        defer {
            background.cancel()
            // Only when run() throws is anything left here: the transfers stop, and verified
            // files stay in their temp files (closed, unlocked) for a later run to resume.
            for job in active.values { job.task?.cancel() }
            for item in pendingCompletions { item.file?.close() }
        }

        while !stopping.load(ordering: .sequentiallyConsistent) {
            // Claim ahead in batches (one transaction for many jobs): keep up to two rounds of
            // work in hand. Claimed jobs count against the per-host cap at once, so holding them
            // before they start never lets more requests reach a host than the cap.
            let held = active.count + ready.count
            let wantClaim = ready.count < max(1, options.workers / 2) && held < 2 * options.workers
            // Done jobs are recorded in batches: when the batch is full or old enough, or when
            // nothing else is running. Until then they stay running in the database (other
            // processes count them against the cap) but not in our own claims (`finished`).
            let idle = ready.isEmpty && active.isEmpty
            let wantFlush = !pendingCompletions.isEmpty && (idle || pendingCompletions.count >= Self.completionBatch
                || ContinuousClock.now - oldestPending >= Self.completionDelay)
            var claimed: [Lease] = []
            if wantClaim || wantFlush {
                let request = ClaimRequest(limit: wantClaim ? 2 * options.workers - held : 0, perHostCap: options.perHost,
                                           leaseMilliseconds: Int(options.leaseDuration * 1000),
                                           owner: owner, maxAttempts: options.maxAttempts)
                claimed = try await recordAndClaim(flush: wantFlush, request)
                ready.append(contentsOf: claimed)
            }
            while active.count < options.workers, !ready.isEmpty, !stopping.load(ordering: .sequentiallyConsistent) {
                start(ready.removeFirst())
            }
            if wantFlush && claimed.isEmpty && wantClaim { continue }  // the cap may have room now
            if active.isEmpty && ready.isEmpty && claimed.isEmpty && pendingCompletions.isEmpty {
                let (unfinished, wakeAt) = try await service.perform { queue in
                    (try queue.unfinishedCount(), try queue.nextWakeTime())
                }
                if unfinished.queued == 0 && unfinished.running == 0 { break }
                // Waiting on retries, paused hosts, or another process's transfers.
                let now = Int(Date().timeIntervalSince1970 * 1000)
                let delay = min(1000, max(10, (wakeAt ?? now + 1000) - now))
                await wake.wait(timeout: .milliseconds(delay))
            } else if active.count >= options.workers || ready.isEmpty {
                // Full, or nothing more claimable now: wait for a transfer to end.
                await wake.wait(timeout: pendingCompletions.isEmpty ? .seconds(1) : Self.completionDelay)
            }
        }
        // Stopping: hand back what was claimed but not started, and wait for the cancelled
        // transfers to hand back theirs.
        let unstarted = ready
        ready.removeAll()
        for lease in unstarted {
            _ = try? await service.perform { try $0.release(jobID: lease.jobID, token: lease.token, reason: "interrupted: haul was stopped") }
        }
        // Cancel every transfer, including any that started while stop() ran.
        for job in active.values { job.task?.cancel() }
        while !active.isEmpty {
            await wake.wait(timeout: .milliseconds(100))
            await flushCompletions()
        }
        await flushCompletions()
        try await flushProgress()
        return try await summary()
    }

    /// A verified download waiting for its batch: made durable and placed (`file` then becomes
    /// nil), its folder synced, then its job marked done, all in one go for the batch.
    private struct PendingCompletion {
        let lease: Lease
        let status: Int
        let bytes: Int64
        let resumeFrom: Int64
        var file: VerifiedFile?
    }

    static let completionBatch = 128
    static let completionDelay = Duration.milliseconds(100)

    /// Records the pending completions (see `flushCompletions`) and claims more jobs, in one
    /// transaction.
    private func recordAndClaim(flush: Bool, _ request: ClaimRequest) async throws -> [Lease] {
        let pending = flush ? pendingCompletions : []
        if flush { pendingCompletions.removeAll() }
        var excused = request
        excused.finished = pendingCompletions.map(\.lease)
        let request = excused
        let (batch, completions) = await prepare(pending)
        do {
            let (stale, leases) = try await service.perform { queue -> ([Int], [Lease]) in
                try queue.database.transaction(.write) {
                    (try queue.completeAll(completions), try queue.claim(request))
                }
            }
            report(batch, stale: Set(stale))
            return leases
        } catch {
            pendingCompletions.insert(contentsOf: batch, at: 0)  // recorded on a later try
            throw error
        }
    }

    /// Syncs the folders of placed files (making their renames durable), then marks their jobs
    /// done — in that order, so a job is never done before its file is safely in place.
    private func flushCompletions() async {
        guard !pendingCompletions.isEmpty else { return }
        let pending = pendingCompletions
        pendingCompletions.removeAll()
        let (batch, completions) = await prepare(pending)
        do {
            let stale = try await service.perform { try $0.completeAll(completions) }
            report(batch, stale: Set(stale))
        } catch {
            pendingCompletions.insert(contentsOf: batch, at: 0)  // recorded on a later try
            emit(.warning("cannot record \(batch.count) finished jobs in the database yet: \(error)"))
        }
    }

    /// Places the batch's files — their bytes made durable (one syncfs per file system), then
    /// renamed, then their folders synced — and returns the placed ones with their completions.
    /// A file that cannot be placed goes to the retry policy as a disk failure.
    private func prepare(_ pending: [PendingCompletion]) async -> ([PendingCompletion], [JobQueue.Completion]) {
        guard !pending.isEmpty else { return ([], []) }
        let (placed, failures) = await withCheckedContinuation { continuation in
            Self.fileQueue.async { continuation.resume(returning: Self.place(pending)) }
        }
        for (item, reason) in failures {
            let failure = DownloadAttempt.Failure.disk(reason)
            do {
                try await apply(policy.decide(failure, attempt: item.lease.job.attempts), failure: failure, status: item.status,
                                lease: item.lease, temp: TempFile(destination: item.lease.job.destination, jobID: item.lease.jobID),
                                snapshot: nil)
            } catch is StaleLeaseError {
                emit(.warning("job \(item.lease.jobID): lease lost (cancelled, or taken back after expiry); its result was discarded"))
            } catch {
                emit(.warning("job \(item.lease.jobID): cannot record the outcome in the database: \(error)"))
            }
        }
        let completions = placed.map {
            JobQueue.Completion(jobID: $0.lease.jobID, token: $0.lease.token, status: $0.status, bytes: Int($0.bytes))
        }
        return (placed, completions)
    }

    /// The blocking part of `prepare`, run on `fileQueue`.
    private static func place(_ pending: [PendingCompletion]) -> (placed: [PendingCompletion], failed: [(PendingCompletion, String)]) {
        var renamed: [PendingCompletion] = []
        var failed: [(PendingCompletion, String)] = []
        let fresh = pending.filter { $0.file != nil }
        let durability = VerifiedFile.makeDurable(fresh.compactMap(\.file))
        var problems: [Int: String] = [:]  // job id → why its bytes may not be on disk
        for (item, problem) in zip(fresh, durability) { if let problem { problems[item.lease.jobID] = problem.message } }
        for var item in pending {
            guard let file = item.file else {
                renamed.append(item)  // placed by an earlier flush whose record failed
                continue
            }
            defer { file.close() }
            if let problem = problems[item.lease.jobID] {
                failed.append((item, problem))
                continue
            }
            do {
                try file.place()
                item.file = nil
                renamed.append(item)
            } catch {
                failed.append((item, String(describing: error)))
            }
        }
        // The renames become durable with their folders; a folder that cannot be flushed leaves
        // its jobs unfinished (their files are whole, so a later attempt replaces them safely).
        var syncedFolders = Set<String>()
        var folderProblems: [String: String] = [:]  // folder → why it could not be flushed
        var placed: [PendingCompletion] = []
        for item in renamed {
            let folder = item.lease.job.destination.parentFolder
            if !syncedFolders.contains(folder) && folderProblems[folder] == nil {
                if TempFile.syncFolder(of: item.lease.job.destination) {
                    syncedFolders.insert(folder)
                } else {
                    // errno is read at once, before another call can change it.
                    folderProblems[folder] = "cannot flush folder \(folder) to disk: \(String(cString: strerror(errno)))"
                }
            }
            if let problem = folderProblems[folder] {
                failed.append((item, problem))
            } else {
                placed.append(item)
            }
        }
        return (placed, failed)
    }

    private func report(_ batch: [PendingCompletion], stale: Set<Int>) {
        for item in batch {
            let job = item.lease.job
            if stale.contains(job.id) {
                emit(.warning("job \(job.id): lease lost (cancelled, or taken back after expiry); its file was placed but the job keeps its state"))
                continue
            }
            stats.done += 1
            completedBytes += item.bytes - item.resumeFrom
            emit(.finished(jobID: job.id, url: job.url, destination: job.destination, bytes: item.bytes))
        }
    }

    // MARK: Jobs

    private func start(_ lease: Lease) {
        // An older transfer of the same job lost its lease when the job was claimed again
        // (e.g. the process was suspended past the lease): abandon it.
        for (token, job) in active where job.lease.jobID == lease.jobID {
            active[token]?.superseded = true
            job.task?.cancel()
        }
        active[lease.token] = ActiveJob(lease: lease, attempt: nil, task: nil)
        active[lease.token]?.task = Task { await self.perform(lease) }
    }

    /// Runs one attempt. File work (writing, fsync, rename) happens here, off the actor.
    private nonisolated func perform(_ lease: Lease) async {
        let job = lease.job
        let temp = TempFile(destination: job.destination, jobID: job.id)
        let storedValidator: Validator? = job.etag.map(Validator.etag) ?? job.lastModified.map(Validator.lastModified)
        let result: DownloadAttempt.Verification
        var resumeFrom: Int64 = 0
        var unsafe: String?
        do { try temp.checkNoNewLinks(since: job.createdAt) } catch { unsafe = String(describing: error) }
        if let unsafe {
            result = .failed(.unsafeDestination(unsafe), status: nil)
        } else if let url = URL(string: job.url) {
            do {
                let service = self.service
                let emit = self.emit
                let attempt = try DownloadAttempt(
                    temp: temp, expectedSHA256: job.sha256, storedValidator: storedValidator,
                    storedTotal: job.expectedBytes.map(Int64.init),
                    onAccepted: { snapshot in
                        // Record the validator and length before the body, so a kill -9 mid-body can
                        // resume. Small files are cheaper to fetch again than to record twice.
                        guard snapshot.validator != nil, (snapshot.expectedTotal ?? .max) >= Self.resumableSize else { return }
                        let progress = Self.progress(snapshot, lease: lease)
                        service.enqueue({ try $0.recordProgress([progress]) },
                                        onError: { emit(.warning("job \(job.id): cannot record progress: \($0)")) })
                    })
                resumeFrom = attempt.resumeOffset
                if resumeFrom == 0, job.etag != nil || job.lastModified != nil {
                    // Starting over while the database still holds an earlier partial file's
                    // validator: forget it before any new byte is written. Otherwise a kill
                    // before the next progress write leaves the old validator on the new bytes,
                    // and a later resume (If-Range: old) splices two versions of the file.
                    let forget = Progress(jobID: job.id, token: lease.token, receivedBytes: 0, expectedBytes: nil)
                    try await service.perform { try $0.recordProgress([forget]) }
                }
                await register(attempt, for: lease.token)
                emit(.started(jobID: job.id, url: job.url, resumeFrom: resumeFrom))
                var request = FetchRequest(url: url, headers: attempt.requestHeaders,
                                           stallTimeout: options.stallTimeout, totalTimeout: options.totalTimeout)
                if let profileID = job.profileID {
                    Self.apply(try await profile(profileID), to: &request)
                }
                let fetched = await transport.fetch(request, into: attempt)
                // Placing (fsync, rename) waits for the batch: see `prepare`.
                result = attempt.verify(fetched)
            } catch let error as TransferIOError where error.unsafe {
                result = .failed(.unsafeDestination(error.message), status: nil)
            } catch {
                result = .failed(.disk(String(describing: error)), status: nil)
            }
        } else {
            result = .failed(.badRedirect("invalid URL: \(HTTPURL.redact(job.url))"), status: nil)
        }
        await conclude(lease, temp: temp, result: result, resumeFrom: resumeFrom)
        await finished(lease.token)
    }

    /// The stored request profile `id`, read once per run.
    private func profile(_ id: Int) async throws -> RequestProfile {
        if let known = profiles[id] { return known }
        let stored = try await service.perform { try $0.profile(id: id) }
        guard let stored else { throw TransferIOError("its request options (profile \(id)) are missing from the database") }
        profiles[id] = stored
        return stored
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

    /// Where blocking file work (fsync, rename) runs.
    static let fileQueue = DispatchQueue(label: "haul.files", attributes: .concurrent)

    /// Files at least this large get their validator recorded as soon as their head arrives.
    static let resumableSize: Int64 = 1 << 20

    private func register(_ attempt: DownloadAttempt, for token: String) {
        active[token]?.attempt = attempt
    }

    private func finished(_ token: String) {
        active[token] = nil
        wake.fire()
    }

    private func conclude(_ lease: Lease, temp: TempFile, result: DownloadAttempt.Verification, resumeFrom: Int64) async {
        let job = lease.job
        let token = lease.token
        do {
            switch result {
            case .verified(let file):
                if pendingCompletions.isEmpty { oldestPending = .now }
                pendingCompletions.append(PendingCompletion(lease: lease, status: file.status, bytes: file.bytes,
                                                            resumeFrom: resumeFrom, file: file))
            case .failed(let failure, let status):
                let snapshot = active[token]?.attempt?.snapshot
                if let snapshot { completedBytes += max(0, snapshot.bytesOnDisk - resumeFrom) }
                let decision = stopping.load(ordering: .sequentiallyConsistent) && failure == .cancelled
                    ? .release : policy.decide(failure, attempt: job.attempts)
                try await apply(decision, failure: failure, status: status, lease: lease, temp: temp, snapshot: snapshot)
            }
        } catch is StaleLeaseError {
            // Cancelled by the user, or the lease expired and the job was taken back: drop it.
            emit(.warning("job \(job.id): lease lost (cancelled, or taken back after expiry); its result was discarded"))
        } catch {
            emit(.warning("job \(job.id): cannot record the outcome in the database: \(error)"))
        }
    }

    private func apply(_ decision: RetryPolicy.Decision, failure: DownloadAttempt.Failure, status: Int?,
                       lease: Lease, temp: TempFile, snapshot: DownloadAttempt.Snapshot?) async throws {
        let job = lease.job
        let token = lease.token
        let reason = failure.description
        switch decision {
        case .release:
            if let snapshot { try await record(snapshot, lease: lease) }
            _ = try await service.perform { try $0.release(jobID: job.id, token: token, reason: "interrupted: haul was stopped") }
        case .fail:
            // An unsafe way to the destination is not followed, not even to clean up.
            if case .unsafeDestination = failure {} else { temp.remove() }
            try await service.perform { try $0.fail(jobID: job.id, token: token, status: status, reason: reason) }
            stats.failed += 1
            failureReasons[reason, default: 0] += 1
            emit(.failed(jobID: job.id, url: job.url, reason: reason))
        case .retry(let delay, let pauseHost, let discardPartial):
            var kept = snapshot ?? DownloadAttempt.Snapshot(bytesOnDisk: 0, expectedTotal: nil, validator: nil)
            if discardPartial {
                temp.remove()
                kept = DownloadAttempt.Snapshot(bytesOnDisk: 0, expectedTotal: nil, validator: nil)
            }
            try await record(kept, lease: lease)
            let now = Int(Date().timeIntervalSince1970 * 1000)
            let at = now + Int(delay * 1000)
            if let pauseHost {
                try await service.perform { try $0.pauseHost(job.host, until: now + Int(pauseHost * 1000), reason: "Retry-After from \(reason)") }
                emit(.hostPaused(host: job.host, seconds: pauseHost, reason: reason))
            }
            let keptBytes = Int(kept.bytesOnDisk)
            let outcome = try await service.perform {
                try $0.reschedule(jobID: job.id, token: token, at: at, status: status, error: reason, bytes: keptBytes)
            }
            switch outcome {
            case .queued:
                stats.retriesScheduled += 1
                emit(.retryScheduled(jobID: job.id, url: job.url, attempt: job.attempts, delay: delay, reason: reason))
            case .failed(let finalReason):
                temp.remove()
                stats.failed += 1
                failureReasons[reason, default: 0] += 1
                emit(.failed(jobID: job.id, url: job.url, reason: finalReason))
            }
        }
    }

    /// Writes what is known of a partial file (bytes, total, validator) for the next attempt.
    private func record(_ snapshot: DownloadAttempt.Snapshot, lease: Lease) async throws {
        let progress = Self.progress(snapshot, lease: lease)
        try await service.perform { try $0.recordProgress([progress]) }
    }

    private static func progress(_ snapshot: DownloadAttempt.Snapshot, lease: Lease) -> Progress {
        var etag: String?, lastModified: String?
        switch snapshot.validator {
        case .etag(let tag): etag = tag
        case .lastModified(let date): lastModified = date
        case nil: break
        }
        return Progress(jobID: lease.jobID, token: lease.token, receivedBytes: Int(snapshot.bytesOnDisk),
                        expectedBytes: snapshot.expectedTotal.map(Int.init), etag: etag, lastModified: lastModified)
    }

    // MARK: Background upkeep

    /// Writes progress about once a second, renews leases every third of their length, and
    /// abandons transfers whose lease was lost.
    private func maintain() async {
        var lastRenewal = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(options.progressInterval))
            do {
                try await flushProgress()
                if ContinuousClock.now - lastRenewal >= .seconds(options.leaseDuration / 3) {
                    lastRenewal = .now
                    try await renewLeases()
                }
                let (counts, waiting) = try await service.perform { queue -> ([JobState: Int], Int) in
                    let status = try queue.status()
                    return (status.counts, status.waitingForRetry)
                }
                stats.queueCounts = counts
                stats.waitingForRetry = waiting
            } catch {
                emit(.warning("database: \(error)"))
            }
        }
    }

    private func flushProgress() async throws {
        let updates = active.values.compactMap { job in job.attempt.map { Self.progress($0.snapshot, lease: job.lease) } }
        guard !updates.isEmpty else { return }
        try await service.perform { try $0.recordProgress(updates) }
    }

    private func renewLeases() async throws {
        let held = active.values.filter { !$0.superseded }.map { (jobID: $0.lease.jobID, token: $0.lease.token) }
            + ready.map { (jobID: $0.jobID, token: $0.token) }
            + pendingCompletions.map { (jobID: $0.lease.jobID, token: $0.lease.token) }
        let milliseconds = Int(options.leaseDuration * 1000)
        let lost = Set(try await service.perform { try $0.renew(held, leaseMilliseconds: milliseconds) })
        let lostTokens = Set(held.filter { lost.contains($0.jobID) }.map(\.token))
        ready.removeAll { lostTokens.contains($0.token) }
        for token in lostTokens {
            guard let job = active[token] else { continue }
            emit(.warning("job \(job.lease.jobID): lease lost (cancelled, or expired); abandoning its transfer"))
            job.task?.cancel()
        }
    }

    // MARK: Start-up

    /// Hands back at once the jobs of lease holders known to be dead (same machine and boot,
    /// process gone), so a restart after kill -9 resumes them without waiting for expiry.
    private func reclaimDeadOwners() async throws {
        try await service.perform { queue in
            let dead = try queue.leaseOwners().filter { text in
                guard let owner = LeaseOwner(text) else { return false }
                return ProcessIdentity.isDead(owner)
            }
            try queue.expireLeases(ofOwners: dead)
        }
    }

    /// Removes `.haul-*.part` files that no queued or running job owns any more.
    private func removeOrphanedTempFiles() async throws {
        let removed = try await service.perform { queue -> Int in
            // Memory: one entry per distinct folder, not per job.
            var folders = Set<String>()
            try queue.forEachJobDestination { _, destination, _ in
                folders.insert(destination.parentFolder)
            }
            var removed = 0
            for folder in folders {
                guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
                for name in names {
                    guard let (id, _) = TempFile.jobID(fromName: name) else { continue }
                    let path = folder + "/" + name
                    if let job = try queue.job(id: id), job.state == .queued || job.state == .running,
                       TempFile(destination: job.destination, jobID: id).path == path {
                        continue  // still someone's partial file
                    }
                    // A file another haul process holds a lock on (another queue writing into the
                    // same folder) is in use: leave it.
                    // Only a regular file of ours: a link is not followed, a FIFO not waited on.
                    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
                    guard fd >= 0 else { continue }
                    defer { close(fd) }
                    var info = stat()
                    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
                    guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
                    if unlink(path) == 0 { removed += 1 }
                }
            }
            return removed
        }
        if removed > 0 { emit(.warning("removed \(removed) temp files that no job owns any more")) }
    }

    private func summary() async throws -> RunSummary {
        var summary = RunSummary()
        summary.done = stats.done
        summary.failed = stats.failed
        summary.retriesScheduled = stats.retriesScheduled
        summary.bytes = completedBytes
        summary.elapsed = Date().timeIntervalSince(stats.started)
        summary.failuresByReason = failureReasons.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { (reason: $0.key, count: $0.value) }
        summary.finalCounts = try await service.perform { try $0.status().counts }
        summary.interrupted = stopping.load(ordering: .sequentiallyConsistent)
        return summary
    }
}
