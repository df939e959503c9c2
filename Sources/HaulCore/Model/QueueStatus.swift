/// A consistent snapshot of the whole queue, as `haul status` shows it.
public struct QueueStatus: Sendable, Equatable {
    public var counts: [JobState: Int]
    public var expectedBytes: Int
    public var receivedBytes: Int
    /// Jobs whose size is not yet known (not counted in `expectedBytes`).
    public var unknownSize: Int
    /// Bytes still to come for the jobs not yet ended (queued or running) whose size is known,
    /// as the queue last recorded them (a running transfer's progress is written about once a
    /// second), and how many of those jobs have no known size.
    public var pendingBytes = 0
    public var pendingUnknownSize = 0
    /// Queued jobs whose next attempt lies in the future.
    public var waitingForRetry: Int
    /// When the soonest of those is due (Unix ms).
    public var nextRetryAt: Int?
    public var pausedHosts: [(host: String, until: Int, reason: String?)]
    /// Live host slots over every run: the transfers in flight (or about to start). Running jobs
    /// beyond these are claimed ahead, waiting for a slot.
    public var slotsHeld = 0
    /// Hosts with transfers in flight held below their cap because they said they are
    /// overloaded (429, 503): the transfers at once they are held to, and their cap.
    public var limitedHosts: [(host: String, limit: Int, cap: Int)] = []
    public var topFailures: [(reason: String, count: Int)]

    public var total: Int { counts.values.reduce(0, +) }

    /// An empty queue: every state counted 0.
    public init() {
        counts = Dictionary(uniqueKeysWithValues: JobState.allCases.map { ($0, 0) })
        expectedBytes = 0
        receivedBytes = 0
        unknownSize = 0
        waitingForRetry = 0
        nextRetryAt = nil
        pausedHosts = []
        topFailures = []
    }

    public static func == (a: QueueStatus, b: QueueStatus) -> Bool {
        a.counts == b.counts && a.expectedBytes == b.expectedBytes && a.receivedBytes == b.receivedBytes
            && a.waitingForRetry == b.waitingForRetry && a.nextRetryAt == b.nextRetryAt
            && a.pausedHosts.map(\.host) == b.pausedHosts.map(\.host)
            && a.topFailures.map(\.reason) == b.topFailures.map(\.reason)
    }
}
