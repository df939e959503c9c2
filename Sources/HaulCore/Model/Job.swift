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
    /// The kind of `lastError` (see `FailureKind`): for grouping.
    public let errorKind: String?
    public let expectedBytes: Int?
    public let receivedBytes: Int
    public let etag: String?
    public let lastModified: String?
    /// The URL (after redirects) the partial file's bytes and validator came from, when
    /// recorded with them: a resume answered from another URL starts over.
    public let partialURL: String?
    /// The checksum the download must match, as stored: `ALGORITHM=HEX` (see `Checksum`), or
    /// nil when none was given. Kept as text so a value `Checksum` cannot read (a database
    /// changed by hand) fails the job instead of skipping the check.
    public let checksum: String?
    public let createdAt: Int
    public let updatedAt: Int
    public let finishedAt: Int?
    /// The request profile its add gave it (`JobQueue.profile(id:)`), or nil: defaults.
    public let profileID: Int?
    /// What to do with a file already at the destination that haul did not place.
    public let ifExists: ExistingFilePolicy
    /// Done by keeping the file already at the destination (not downloaded).
    public let kept: Bool
    /// What haul placed for it, once done (nil: nothing, or placed by a haul that did not record it).
    public let placed: PlacedFile?
    /// The worker (its machine's name, or `--worker`) that placed the file, once done.
    public let placedBy: String?
    /// The output folder the job was added with (`-d`), absolute and standardised; nil for a job
    /// added before queues kept it. No symbolic link below it may lead outside (`TempFile`).
    public let root: String?

    /// The output folder, from the number of bytes of `destination` that name it (as stores
    /// keep it); nil without one, or when it does not fit (a hand-edited row).
    public static func root(of destination: String, length: Int?) -> String? {
        guard let length, length > 0, length <= destination.utf8.count else { return nil }
        return String(decoding: destination.utf8.prefix(length), as: UTF8.self)
    }

    /// What a kept job's attempt records, and what `show` says of it.
    public static let keptNote = "kept the file already there"

    /// The URL with any credentials hidden, for display.
    public var redactedURL: String { HTTPURL.redact(url) }

    /// A job with the fields tests set, the others at their defaults.
    init(id: Int, url: String, host: String, hostID: Int, destination: String, state: JobState = .running, attempts: Int = 1,
         maxAttempts: Int = 5, etag: String? = nil, lastModified: String? = nil, expectedBytes: Int? = nil,
         createdAt: Int = 0, profileID: Int? = nil, ifExists: ExistingFilePolicy = .skip, placed: PlacedFile? = nil) {
        self.init(id: id, url: url, host: host, hostID: hostID, destination: destination, state: state, attempts: attempts,
                  maxAttempts: maxAttempts, nextAttemptAt: 0, leaseToken: nil, leaseOwner: nil, leaseExpiresAt: nil,
                  lastStatus: nil, lastError: nil, errorKind: nil, expectedBytes: expectedBytes, receivedBytes: 0,
                  etag: etag, lastModified: lastModified, checksum: nil, createdAt: createdAt, updatedAt: createdAt,
                  finishedAt: nil, profileID: profileID, ifExists: ifExists, kept: false, placed: placed, placedBy: nil)
    }

    /// This queued job as a claim leaves it: running under `token` until `expiresAt`, its
    /// attempt counted, its maximum replaced when `maxAttempts` is set.
    public func claimed(token: String, owner: String, expiresAt: Int, maxAttempts newMaximum: Int?, now: Int) -> Job {
        Job(id: id, url: url, host: host, hostID: hostID, destination: destination, state: .running, attempts: attempts + 1,
            maxAttempts: newMaximum ?? maxAttempts, nextAttemptAt: nextAttemptAt, leaseToken: token, leaseOwner: owner,
            leaseExpiresAt: expiresAt, lastStatus: lastStatus, lastError: lastError, errorKind: errorKind,
            expectedBytes: expectedBytes, receivedBytes: receivedBytes, etag: etag, lastModified: lastModified,
            checksum: checksum, createdAt: createdAt, updatedAt: now, finishedAt: finishedAt, profileID: profileID,
            ifExists: ifExists, kept: kept, placed: placed, placedBy: placedBy, root: root, partialURL: partialURL)
    }

    /// Every field, as a store reads them from its rows.
    public init(id: Int, url: String, host: String, hostID: Int, destination: String, state: JobState, attempts: Int,
                maxAttempts: Int, nextAttemptAt: Int, leaseToken: String?, leaseOwner: String?, leaseExpiresAt: Int?,
                lastStatus: Int?, lastError: String?, errorKind: String?, expectedBytes: Int?, receivedBytes: Int,
                etag: String?, lastModified: String?, checksum: String?, createdAt: Int, updatedAt: Int, finishedAt: Int?,
                profileID: Int?, ifExists: ExistingFilePolicy, kept: Bool, placed: PlacedFile?, placedBy: String?,
                root: String? = nil, partialURL: String? = nil) {
        self.root = root
        self.partialURL = partialURL
        self.id = id
        self.url = url
        self.host = host
        self.hostID = hostID
        self.destination = destination
        self.state = state
        self.attempts = attempts
        self.maxAttempts = maxAttempts
        self.nextAttemptAt = nextAttemptAt
        self.leaseToken = leaseToken
        self.leaseOwner = leaseOwner
        self.leaseExpiresAt = leaseExpiresAt
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.errorKind = errorKind
        self.expectedBytes = expectedBytes
        self.receivedBytes = receivedBytes
        self.etag = etag
        self.lastModified = lastModified
        self.checksum = checksum
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.finishedAt = finishedAt
        self.profileID = profileID
        self.ifExists = ifExists
        self.kept = kept
        self.placed = placed
        self.placedBy = placedBy
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

    public init(number: Int, startedAt: Int, finishedAt: Int?, status: Int?, error: String?, bytes: Int?) {
        self.number = number
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.status = status
        self.error = error
        self.bytes = bytes
    }

    /// The reason an attempt handed back without counting it (`JobQueue.release`) begins with.
    public static let interruptedPrefix = "interrupted:"

    /// True for an attempt that was handed back uncounted (haul stopped mid-transfer): its
    /// number is taken again by the next attempt.
    public var wasCounted: Bool { !(error?.hasPrefix(Self.interruptedPrefix) ?? false) || finishedAt == nil }
}
