/// The queue as the engine and the commands see it: the port a backend implements (the SQLite
/// `JobQueue`, and `PostgresJobStore` in the HaulPostgres module).
///
/// Guarantees of every implementation (the conformance tests hold each store to them):
/// - every operation is atomic: a crash at any instant leaves each job whole in one state;
/// - adding is idempotent: the same URL for the same destination is one job; a destination
///   another URL holds is rejected with that job's id;
/// - only the current lease token moves a job on (outcomes, progress, renewals); an expired
///   lease is never renewed; a stale outcome changes nothing and is reported stale;
/// - at most a host's cap of live slots exist for it, over every process sharing the store;
/// - each claim counts an attempt, recorded at claim; a released attempt is not counted, nor
///   one whose lease expired after it recorded progress (bytes past those it began from);
/// - a job is held by one lease at a time: no job is claimed by two claimers at once;
/// - a lease is a `firstTry` only when its claim is the first any claimer ever made of the job
///   (a claim handed back uncounted, a retry or a refetch still counts as made, and so does one
///   by an older haul on the same queue); when a store cannot tell, it says false. A queue put
///   back from a copy older than the temp files in its output folder is not covered;
/// - times are Unix milliseconds on the store's clock (`now()`); for a store shared by several
///   machines that is the database server's clock, and times the engine sends (retry times,
///   pauses) are taken as offsets from its own clock and moved onto the store's;
/// - a store is used by one thread at a time (`StoreExecutor` serialises the engine's use).
public protocol JobStore: AnyObject {
    /// Where the queue is, for messages: a file path, or a server's URL without its password.
    var location: String { get }
    /// How many rounds of work a claimer keeps in hand (claimed, not started): this many times
    /// its worker count in all, and at most this many times a host's cap per host (the claim
    /// holds to the second). Enough that the jobs in hand last through one exchange: a store
    /// whose exchange takes longer asks for more. 2 unless a store says otherwise.
    var claimAheadRounds: Int { get }
    /// A claim is due once fewer than this many rounds of work are in hand (or once a quarter
    /// round is used up, when that comes first): fewer, larger exchanges for a store whose
    /// exchange costs the same however few jobs it moves. `claimAheadRounds` (claim every
    /// quarter round) unless a store says otherwise.
    var claimBelowRounds: Int { get }
    /// The store's current time, in Unix milliseconds.
    func now() throws -> Int

    // MARK: The engine

    /// One round trip: see `Exchange`.
    func exchange(_ request: Exchange) throws -> ExchangeResult
    /// The distinct owners of job leases and slots.
    func leaseOwners() throws -> [String]
    /// Ends the leases and slots of `owners` now (their processes are known to be gone).
    func expireLeases(ofOwners owners: [String]) throws
    /// The folders that hold the jobs' destinations (each destination's `parentFolder`), once
    /// each: as many as there are folders, whatever the number of jobs. Recorded as jobs are
    /// added, so reading them reads no job (a run's start asks for them).
    func jobFolders() throws -> Set<String>
    /// The queue's identity, the same for every process and worker on it, and different from
    /// every other queue's (random, made with the queue; 0 for a queue made by a haul before it
    /// had one): mixed into the names of its temp files (see `TempFile`).
    func identity() throws -> Int
    func profile(id: Int) throws -> RequestProfile?
    func status() throws -> QueueStatus
    /// A snapshot that may be a few seconds old, cheaper than `status()` on a store where counting
    /// reads every job: what a run polls for its display.
    func recentStatus() throws -> QueueStatus
    /// Sets the cap of every host without its own (`host` nil), or of one host.
    func setHostCap(_ cap: Int, host: String?) throws
    /// A run that ended (holding nothing any more) leaves the store's list of workers.
    func leave(owner: String) throws

    // MARK: Adding

    /// Adds a batch in one transaction; one outcome per entry, in order (see the guarantees).
    func add(_ batch: JobBatch, maxAttempts: Int, profileID: Int?, ifExists: ExistingFilePolicy) throws -> [AddOutcome]
    /// The id of the stored profile equal to `profile`, storing it first when it is new.
    func storeProfile(_ profile: RequestProfile) throws -> Int

    // MARK: Reading and changing jobs

    func job(id: Int) throws -> Job?
    /// The jobs fetching `url` (one per destination).
    func jobs(url: String) throws -> [Job]
    /// The attempts of a job, in the order they began, each once, whether its record is kept on
    /// the job's row (a running job's open attempt, a done job's last) or written apart.
    func attempts(jobID: Int) throws -> [Attempt]
    /// Jobs in id order, filtered.
    func list(_ filter: JobFilter) throws -> [Job]
    /// How many jobs `filter` matches, whatever its limit.
    func count(_ filter: JobFilter) throws -> Int
    /// Calls `body` with every job above `after` (in `state`, when given), in id order, `batch`
    /// at a time, holding no snapshot while `body` runs; returns how many.
    @discardableResult
    func forEachJob(state: JobState?, after: Int, batch: Int, _ body: (Job) throws -> Void) throws -> Int
    /// Cancels queued, running or failed jobs; a running job's lease is revoked.
    func cancel(_ ids: [Int]) throws -> [AdminOutcome]
    /// Puts failed or cancelled jobs back in the queue with their attempts reset.
    func retry(_ ids: [Int]) throws -> [AdminOutcome]
    /// Puts every failed job back in the queue; returns how many.
    func retryAllFailed() throws -> Int
    /// Puts done jobs back in the queue to be fetched again; returns how many changed.
    @discardableResult
    func refetch(_ jobs: [Refetch]) throws -> Int
    /// How many running jobs each lease owner holds.
    func runningJobsByOwner() throws -> [(owner: String, jobs: Int)]
    /// Live slots by host name, over every process.
    func liveSlots() throws -> [String: Int]
}

extension JobStore {
    public var claimAheadRounds: Int { 2 }
    public var claimBelowRounds: Int { claimAheadRounds }

    /// `status()`: its counts are cheap.
    public func recentStatus() throws -> QueueStatus { try status() }

    /// A store without a list of workers has nothing to do.
    public func leave(owner: String) throws {}

    /// `add(_:maxAttempts:profileID:ifExists:)` for parsed lines.
    public func add(_ lines: [InputLine], maxAttempts: Int = 5, profileID: Int? = nil,
                    ifExists: ExistingFilePolicy = .skip) throws -> [AddOutcome] {
        try add(JobBatch(lines), maxAttempts: maxAttempts, profileID: profileID, ifExists: ifExists)
    }

    @discardableResult
    public func forEachJob(state: JobState? = nil, _ body: (Job) throws -> Void) throws -> Int {
        try forEachJob(state: state, after: 0, batch: 1_000, body)
    }
}

extension JobQueue: JobStore {
    public var location: String { database.path }
    public func now() -> Int { clock() }
}
