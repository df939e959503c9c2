/// How one attempt ended, to be recorded in the queue (in a batch, see `Exchange`).
///
/// Guarantees: every case names the lease it ends; the queue records it only while that lease
/// still holds the job, and reports it stale otherwise.
public enum Outcome: Sendable, Equatable {
    /// The file is in place and durable: the job is done. `placed`: where it went and what it
    /// was, so that haul can tell it from a user's file later.
    case done(jobID: Int, token: String, status: Int, bytes: Int, placed: PlacedFile? = nil)
    /// The destination already held a file haul did not place, and the job's policy keeps it:
    /// the job is done without a download (`bytes`: that file's size).
    case kept(jobID: Int, token: String, bytes: Int)
    /// A conditional request was answered 304: the file haul placed before is current, and
    /// stays as it is recorded.
    case unchanged(jobID: Int, token: String)
    /// Try again at `at` (Unix ms), keeping what `progress` says of the partial file — or fail,
    /// when the job has used all its attempts.
    case retry(jobID: Int, token: String, at: Int, status: Int?, error: String, progress: Progress)
    /// Fail for good, with the reason the user reads.
    case fail(jobID: Int, token: String, status: Int?, reason: String)
    /// Hand the job back without counting the attempt (haul is stopping), keeping `progress`;
    /// `notBefore` (Unix ms): not claimable before then (nil: at once).
    case release(jobID: Int, token: String, reason: String, progress: Progress?, notBefore: Int? = nil)

    public var jobID: Int {
        switch self {
        case .done(let id, _, _, _, _), .kept(let id, _, _), .unchanged(let id, _), .retry(let id, _, _, _, _, _), .fail(let id, _, _, _),
             .release(let id, _, _, _, _): return id
        }
    }
}

/// What the queue did with one `Outcome`.
public enum OutcomeResult: Sendable, Equatable {
    case recorded
    /// The lease no longer held the job (it expired and was taken back, or the job was
    /// cancelled): nothing was written.
    case stale
    /// A retry of a job that had used all its attempts: it failed, with this reason.
    case gaveUp(reason: String)
}

/// A pause of every request to a host (a Retry-After), to be recorded with an exchange.
public struct HostPause: Sendable, Equatable {
    public var host: String
    /// Unix ms.
    public var until: Int
    public var reason: String

    public init(host: String, until: Int, reason: String) {
        self.host = host
        self.until = until
        self.reason = reason
    }
}
