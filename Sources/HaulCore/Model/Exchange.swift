/// Everything one claimer has to say to the queue and ask of it, done in one transaction: the
/// outcomes and progress gathered since the last exchange, lease and slot renewals, slots given
/// back and wanted, and jobs to claim ahead.
///
/// Guarantees (of every `JobStore`): the whole exchange is atomic; outcomes, progress and
/// renewals move a job only under its current lease token; an expired lease is never renewed;
/// a slot is granted only while its host has fewer live slots than its cap and is not paused;
/// each claimed job has its attempt counted at claim.
public struct Exchange: Sendable {
    /// Written into every lease and slot (see `LeaseOwner`).
    public var owner: String
    /// The worker's name (a machine's host name, or what `run --worker` gave): recorded with
    /// every file its outcomes place, and with its registration on a shared queue. Empty: the
    /// owner's own text.
    public var worker = ""
    /// How long job leases and slots last unless renewed.
    public var leaseMilliseconds: Int
    public var outcomes: [Outcome] = []
    public var progress: [Progress] = []
    public var pauses: [HostPause] = []
    /// Hosts whose overload limit changed, by host id: the limit, or nil when back at the cap;
    /// and, at each renewal, the limits still held. Every worker's slot grants keep a host's
    /// live slots within its limit for `limitLifetime` after it was sent.
    public var limits: [Int: Int?] = [:]
    /// Job leases to renew (empty between renewals).
    public var renewJobs: [JobLeaseID] = []
    /// Slots to renew.
    public var renewSlots: [SlotLease] = []
    /// Slots given back.
    public var releaseSlots: [SlotLease] = []
    /// More slots wanted, by host id.
    public var wantSlots: [Int: Int] = [:]
    /// At most this many jobs to claim ahead, over all hosts.
    public var claim = 0
    /// Also asks, once the claim is made, for up to this many slots over the hosts of the jobs
    /// it claimed, each host at most as many as jobs of it were claimed (on top of
    /// `wantSlots`; see `slotsWanted(afterClaiming:)`): a claimer's first claim gets its jobs
    /// and the slots to start them in one round trip, not two.
    public var slotsForClaimed = 0
    /// Claimed jobs the claimer holds and has not started, by host id, for every host it holds
    /// jobs or slots of: a host gets at most the store's `claimAheadRounds` times its cap of them
    /// in hand, and the answer says which of these hosts are paused or wanted by another claimer.
    public var heldByHost: [Int: Int] = [:]
    /// When set, replaces the claimed jobs' maximum number of attempts.
    public var maxAttempts: Int?

    public init(owner: String, leaseMilliseconds: Int) {
        self.owner = owner
        self.leaseMilliseconds = leaseMilliseconds
    }
}

extension Exchange {
    /// The slots to ask for once `claimed` are claimed: `wantSlots`, and one more for each of
    /// the first `slotsForClaimed` jobs claimed, on its host (every store grants them under the
    /// hosts' caps, as any slot).
    public func slotsWanted(afterClaiming claimed: [Lease]) -> [Int: Int] {
        var wanted = wantSlots
        for lease in claimed.prefix(max(0, slotsForClaimed)) { wanted[lease.job.hostID, default: 0] += 1 }
        return wanted
    }
}

/// A job lease by its job and token, for renewals.
extension Exchange {
    /// How long a host's limit sent in `limits` holds for every worker's slot grants, for an
    /// exchange of `leaseMilliseconds`: three renewals (the engine sends its limits again at
    /// each), so the limit of a worker that stopped lapses within a minute by default.
    public static func limitLifetime(_ leaseMilliseconds: Int) -> Int { 3 * leaseMilliseconds }
}

public struct JobLeaseID: Sendable, Hashable {
    public var jobID: Int
    public var token: String

    public init(jobID: Int, token: String) {
        self.jobID = jobID
        self.token = token
    }
}

/// What an `Exchange` brought back.
public struct ExchangeResult: Sendable {
    /// One per outcome sent, in order.
    public var outcomes: [OutcomeResult] = []
    public var claimed: [Lease] = []
    public var grantedSlots: [SlotLease] = []
    /// Slots whose renewal was refused (expired and taken, or beyond a lowered cap): stop using them.
    public var lostSlots: [SlotLease] = []
    /// Job leases whose renewal was refused: abandon their transfers.
    public var lostJobs: [JobLeaseID] = []
    /// Hosts of slots the claimer holds where another claimer waits for a slot, and would hold
    /// at least two fewer than this one even after taking the host's free slots (so claimers
    /// settle at shares that differ by one at most; slots given back count as the waiter's).
    public var contendedHosts: Set<Int> = []
    /// The caps of the hosts slots were asked for.
    public var caps: [Int: Int] = [:]
    /// Hosts the claimer holds slots or jobs of that are paused, until when (Unix ms).
    public var pausedHosts: [Int: Int] = [:]
    /// Queued and running jobs over every claimer, and when a waiting job may next become
    /// claimable: filled in when nothing was claimed. Only whether each is zero is promised: a
    /// store whose counts cost a pass over its jobs may say 1 for "some".
    public var unfinished: (queued: Int, running: Int)?
    public var nextWake: Int?
    /// How long (ms) after this exchange was sent the queue may take the worker's jobs and
    /// slots back if it hears nothing more from it (a queue shared by machines: its worker
    /// timeout, less the age of the worker's last heartbeat when the exchange ran); nil when only
    /// a lease's end does.
    public var silenceLimit: Int?

    public init() {}
}
