import Foundation

/// How a download run behaves. Defaults match `haul run`'s.
public struct EngineOptions: Sendable {
    /// Transfers in flight at once, over all hosts.
    public var workers = 16
    /// When set, becomes the queue's per-host cap for every host without its own (stored with
    /// the queue, so every process sharing it keeps the same limit). Nil: the stored cap.
    public var perHost: Int?
    public var maxAttempts = 5
    /// Seconds without a body byte before an attempt is abandoned.
    public var stallTimeout: TimeInterval = 60
    /// When set, what to do with files already at destinations for every job of this run,
    /// whatever the job was added with. Nil: each job's own policy.
    public var ifExists: ExistingFilePolicy?
    /// Compute and record the sha256 of every file placed (`run --checksum sha256`).
    public var recordSHA256 = false
    /// Seconds one attempt may take in all (nil: no limit).
    public var totalTimeout: TimeInterval?
    /// The longest Retry-After honoured, in seconds.
    public var maxRetryAfter: TimeInterval = 3600
    /// Seconds a host must have been unreachable before its jobs fail (besides failing as often
    /// as a job may be tried): a server restarting, or a network blip, costs a batch no job.
    public var maxHostDown: TimeInterval = 120
    /// How long a lease lasts unless renewed; renewed every third of it.
    public var leaseDuration: TimeInterval = 60
    /// How often progress (bytes, validators) is written to the database.
    public var progressInterval: TimeInterval = 1
    /// Whether the run reads the queue's counts (about once a second, with an exchange) for
    /// `DownloadEngine.currentStats`: only a live display shows them. On PostgreSQL the read is
    /// about nine round trips on the store's one connection, which the next claim waits behind.
    public var readsQueueCounts = true
    /// The worker's name, recorded with every file it places (`run --worker`): the machine's
    /// host name unless given.
    public var workerName = ProcessInfo.processInfo.hostName
    /// Open files this process may hold (see `DescriptorBudget`): temp files are prepared ahead
    /// only as far as it leaves room. Nil: no bound.
    public var openFileLimit: Int?
    /// Jobs are still being added while the run goes on (`haul get` reading its list as it
    /// downloads): the run does not end on a drained queue until `DownloadEngine.inputClosed()`.
    public var inputOpen = false

    public init() {}
}

/// Something that happened during a run, for the person or script watching.
public enum EngineEvent: Sendable {
    case started(jobID: Int, url: String, resumeFrom: Int64)
    case finished(jobID: Int, url: String, destination: String, bytes: Int64)
    /// Done without a download: the file already at the destination (not haul's) was kept.
    case kept(jobID: Int, url: String, destination: String, bytes: Int64)
    /// Done without a download: the server said haul's file placed before is current (304).
    case unchanged(jobID: Int, url: String, destination: String)
    case retryScheduled(jobID: Int, url: String, attempt: Int, delay: TimeInterval, reason: String)
    case failed(jobID: Int, url: String, reason: String)
    case hostPaused(host: String, seconds: TimeInterval, reason: String)
    case warning(String)
}

/// Live figures of a run, for a progress display.
public struct EngineStats: Sendable {
    public var active = 0
    /// Jobs done in this run, the kept ones included.
    public var done = 0
    /// Jobs done by keeping the file already at their destination.
    public var kept = 0
    /// Jobs done because the server said their file placed before is current (a refresh).
    public var unchanged = 0
    public var failed = 0
    public var retriesScheduled = 0
    /// Bytes received in this run (resumed bytes already on disk are not counted).
    public var bytesThisRun: Int64 = 0
    /// The whole sizes of the files done in this run.
    public var doneBytes: Int64 = 0
    /// Known totals of the whole queue, refreshed once a second.
    public var queueCounts: [JobState: Int] = [:]
    public var waitingForRetry = 0
    public var started = Date()
    /// Bytes still to come for the queue's unfinished jobs of known size (the queue's last count,
    /// less what arrived since), and how many unfinished jobs have no known size yet.
    public var pendingBytes: Int64 = 0
    public var pendingUnknownSize = 0
    /// This process's transfers in flight.
    public var transfers: [TransferStats] = []

    public init() {}
}

/// One transfer in flight, for a progress display.
public struct TransferStats: Sendable, Equatable {
    public var jobID: Int
    public var destination: String
    /// Bytes in its temp file, resumed ones included.
    public var bytesOnDisk: Int64
    /// Its whole size, once the response told it.
    public var expectedTotal: Int64?

    public init(jobID: Int, destination: String, bytesOnDisk: Int64, expectedTotal: Int64?) {
        self.jobID = jobID
        self.destination = destination
        self.bytesOnDisk = bytesOnDisk
        self.expectedTotal = expectedTotal
    }
}

/// What a finished run did.
public struct RunSummary: Sendable {
    /// Jobs done in this run, the kept ones included.
    public var done = 0
    /// Jobs done by keeping the file already at their destination.
    public var kept = 0
    /// Jobs done because the server said their file placed before is current (a refresh).
    public var unchanged = 0
    public var failed = 0
    public var retriesScheduled = 0
    public var bytes: Int64 = 0
    public var elapsed: TimeInterval = 0
    /// Failures of this run grouped by reason, most common first.
    public var failuresByReason: [(reason: String, count: Int)] = []
    /// The whole queue at the end.
    public var finalCounts: [JobState: Int] = [:]
    /// Set when the run stopped because it was asked to (a signal), not because it finished.
    public var interrupted = false
    /// Transfers running at once, averaged over the run.
    public var averageTransfers = 0.0
    /// Set when the run stopped because an output folder could not be written, however often
    /// it was tried, and nothing else was left to do: what is wrong and what to do.
    public var localFault: String?

    /// Failed jobs in the queue at the end that this run did not fail (earlier runs did).
    public var failedEarlier: Int { max(0, (finalCounts[.failed] ?? 0) - failed) }
}
