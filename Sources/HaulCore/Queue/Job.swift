/// A snapshot of one row of the jobs table.
public struct Job: Sendable, Equatable {
    public let id: Int
    public let url: String
    public let host: String
    /// The queue's id of `host` (slots are held by host id).
    public let hostID: Int
    public let destination: String
    public let state: JobState
    public let attempts: Int
    public let maxAttempts: Int
    /// Unix milliseconds at which the job may next be claimed.
    public let nextAttemptAt: Int
    public let leaseToken: String?
    public let leaseOwner: String?
    public let leaseExpiresAt: Int?
    public let lastStatus: Int?
    public let lastError: String?
    public let expectedBytes: Int?
    public let receivedBytes: Int
    public let etag: String?
    public let lastModified: String?
    public let sha256: String?
    public let createdAt: Int
    public let updatedAt: Int
    public let finishedAt: Int?
    /// The request profile its add gave it (`JobQueue.profile(id:)`), or nil: defaults.
    public let profileID: Int?

    /// The URL with any credentials hidden, for display.
    public var redactedURL: String { HTTPURL.redact(url) }

    /// The SELECT that `init(row:)` reads; append a WHERE clause on `j` (jobs) or `h` (hosts).
    static let select = "SELECT \(columns(table: "j.", host: "h.host")) FROM jobs j JOIN hosts h ON h.id = j.host_id"

    /// The column list `init(row:)` reads, with `host` as the expression for the host's name
    /// (e.g. a parameter in a RETURNING clause, where no join is possible).
    static func columns(table: String = "", host: String) -> String {
        let t = table
        return "\(t)id, \(t)url, \(host), \(t)destination, \(t)state, \(t)attempts, \(t)max_attempts, \(t)next_attempt_at, "
            + "\(t)lease_token, \(t)lease_owner, \(t)lease_expires_at, \(t)last_status, \(t)last_error, \(t)expected_bytes, "
            + "\(t)received_bytes, \(t)etag, \(t)last_modified, \(t)sha256, \(t)created_at, \(t)updated_at, \(t)finished_at, \(t)profile_id, \(t)host_id"
    }

    /// A job as a store other than SQLite (or a test) makes it.
    init(id: Int, url: String, host: String, hostID: Int, destination: String, state: JobState = .running, attempts: Int = 1,
         maxAttempts: Int = 5, etag: String? = nil, lastModified: String? = nil, expectedBytes: Int? = nil,
         createdAt: Int = 0, profileID: Int? = nil) {
        self.id = id
        self.url = url
        self.host = host
        self.hostID = hostID
        self.destination = destination
        self.state = state
        self.attempts = attempts
        self.maxAttempts = maxAttempts
        nextAttemptAt = 0
        leaseToken = nil
        leaseOwner = nil
        leaseExpiresAt = nil
        lastStatus = nil
        lastError = nil
        self.expectedBytes = expectedBytes
        receivedBytes = 0
        self.etag = etag
        self.lastModified = lastModified
        sha256 = nil
        self.createdAt = createdAt
        updatedAt = createdAt
        finishedAt = nil
        self.profileID = profileID
    }

    init(row: Row) {
        id = row.int(0)
        url = row.string(1)
        host = row.string(2)
        destination = row.string(3)
        state = JobState(rawValue: row.string(4)) ?? .failed
        attempts = row.int(5)
        maxAttempts = row.int(6)
        nextAttemptAt = row.int(7)
        leaseToken = row.optionalString(8)
        leaseOwner = row.optionalString(9)
        leaseExpiresAt = row.optionalInt(10)
        lastStatus = row.optionalInt(11)
        lastError = row.optionalString(12)
        expectedBytes = row.optionalInt(13)
        receivedBytes = row.int(14)
        etag = row.optionalString(15)
        lastModified = row.optionalString(16)
        sha256 = row.optionalString(17)
        createdAt = row.int(18)
        updatedAt = row.int(19)
        finishedAt = row.optionalInt(20)
        profileID = row.optionalInt(21)
        hostID = row.int(22)
    }
}

/// One recorded attempt of a job.
public struct Attempt: Sendable, Equatable {
    public let number: Int
    public let startedAt: Int
    public let finishedAt: Int?
    public let status: Int?
    public let error: String?
    public let bytes: Int?

    /// The reason an attempt handed back without counting it (`JobQueue.release`) begins with.
    public static let interruptedPrefix = "interrupted:"

    /// True for an attempt that was handed back uncounted (haul stopped mid-transfer): its
    /// number is taken again by the next attempt.
    public var wasCounted: Bool { !(error?.hasPrefix(Self.interruptedPrefix) ?? false) || finishedAt == nil }
}
