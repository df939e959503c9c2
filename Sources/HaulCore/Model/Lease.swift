/// A job claimed by one worker: only the holder of `token` may complete, reschedule or fail it,
/// and only until the lease expires and another claimer takes the job back.
///
/// Guarantees: a plain value (equal when token and job are; `firstTry` is not compared). The job
/// is kept in one shared, immutable box: the engine copies a lease into several of its maps at
/// every step of a job, and a copy then costs one reference count instead of one for each of the
/// job's strings.
public struct Lease: Sendable, Equatable {
    private let box: JobBox
    public let token: String
    /// True only when no earlier try of the job can have left a file under its temp file name:
    /// the store says this claim is the first any worker made of the job (`JobStore.exchange`),
    /// and the holder has not tried it yet (`triedOnce`). False when not known.
    public let firstTry: Bool

    public var job: Job { box.job }
    public var jobID: Int { box.job.id }

    public init(job: Job, token: String, firstTry: Bool = false) {
        self.box = JobBox(job)
        self.token = token
        self.firstTry = firstTry
    }

    private init(box: JobBox, token: String, firstTry: Bool) {
        self.box = box
        self.token = token
        self.firstTry = firstTry
    }

    /// The same lease, once its holder tried it (a try may leave a temp file to resume).
    public var triedOnce: Lease { firstTry ? Lease(box: box, token: token, firstTry: false) : self }

    /// How many times a job's lease may expire before it made any progress (its worker stopped
    /// without reporting, and no byte more was recorded) before the job fails: twice its
    /// attempts, and at least `lostLeaseFloor`. Such expiries count no attempt: a worker killed
    /// again and again (a restart loop, the OOM killer) takes down the jobs it had claimed
    /// ahead, which no server ever saw, and a slow file whose progress was not yet recorded.
    /// This bound ends a job that stops its worker every time.
    public static func lostLeaseLimit(maxAttempts: Int) -> Int { max(lostLeaseFloor, 2 * maxAttempts) }

    /// The least `lostLeaseLimit`.
    public static let lostLeaseFloor = 10

    /// The reason a job fails with on reaching `lostLeaseLimit` (`times` expiries); the stores
    /// write the same words.
    public static func lostLeasesReason(times: Int) -> String {
        lostLeasesReasonStart + String(times) + lostLeasesReasonEnd
    }
    public static let lostLeasesReasonStart = "its worker stopped without reporting (lease expired) "
    public static let lostLeasesReasonEnd = " times while holding it, never with progress: a job that stops haul, or haul stopped again and again"

    public static func == (a: Lease, b: Lease) -> Bool {
        a.token == b.token && (a.box === b.box || a.box.job == b.box.job)
    }
}

/// `Sendable`: its one property is an immutable `Sendable` value.
private final class JobBox: Sendable {
    let job: Job
    init(_ job: Job) { self.job = job }
}

/// Who holds leases: a process on a machine. Written into each lease so a later run on the same
/// machine can tell that the holder is gone and reclaim its jobs without waiting for expiry.
public struct LeaseOwner: Sendable, Equatable, CustomStringConvertible {
    public let machine: String
    public let pid: Int32
    /// The process's start time (clock ticks since boot), to guard against pid reuse.
    public let startTime: UInt64

    public init(machine: String, pid: Int32, startTime: UInt64) {
        self.machine = machine
        self.pid = pid
        self.startTime = startTime
    }

    /// `machine/pid/starttime`.
    public var description: String { "\(machine)/\(pid)/\(startTime)" }

    public init?(_ text: String) {
        let parts = text.split(separator: "/")
        guard parts.count == 3, let pid = Int32(parts[1]), let start = UInt64(parts[2]) else { return nil }
        self.init(machine: String(parts[0]), pid: pid, startTime: start)
    }
}

/// A completion, reschedule or failure sent with a lease token that no longer holds the job:
/// the lease expired and the job was taken back, or the job was cancelled meanwhile.
public struct StaleLeaseError: Error, CustomStringConvertible, Sendable {
    public let jobID: Int
    public var description: String {
        "job \(jobID): lease no longer held (it expired or the job was cancelled); the result was discarded"
    }
}
