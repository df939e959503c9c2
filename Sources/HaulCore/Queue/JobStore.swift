/// The queue as the engine sees it: the port a backend (SQLite today, PostgreSQL later)
/// implements.
///
/// Guarantees of every implementation:
/// - every operation is atomic: a crash at any instant leaves each job whole in one state;
/// - only the current lease token moves a job on (outcomes, progress, renewals); an expired
///   lease is never renewed;
/// - at most a host's cap of live slots exist for it, over every process sharing the store;
/// - each claim counts an attempt, recorded at claim; a released attempt is not counted;
/// - a store is used by one thread at a time (`StoreExecutor` serialises the engine's use).
public protocol JobStore: AnyObject {
    /// One round trip: see `Exchange`.
    func exchange(_ request: Exchange) throws -> ExchangeResult
    /// The distinct owners of job leases and slots.
    func leaseOwners() throws -> [String]
    /// Ends the leases and slots of `owners` now (their processes are known to be gone).
    func expireLeases(ofOwners owners: [String]) throws
    /// Calls `body` with (id, destination, state) of every job, a page at a time.
    func forEachJobDestination(_ body: (Int, String, JobState) throws -> Void) throws
    func job(id: Int) throws -> Job?
    func profile(id: Int) throws -> RequestProfile?
    func status() throws -> QueueStatus
    /// Sets the cap of every host without its own (`host` nil), or of one host.
    func setHostCap(_ cap: Int, host: String?) throws
}

extension JobQueue: JobStore {}
