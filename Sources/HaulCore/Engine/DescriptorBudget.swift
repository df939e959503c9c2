import Foundation

/// The open files a run may hold at once, against the process's limit (`RLIMIT_NOFILE`).
///
/// A run holds a socket per transfer and the idle connections libcurl keeps for reuse, a temp
/// file per transfer, temp files prepared ahead, verified files waiting to be placed, and empty
/// unnamed files kept for the next downloads. Many systems start programs with a soft limit of
/// 1,024 however high the hard limit: there, a run with `-j 400` ran out of descriptors, and
/// every connection failed as if the host were down.
///
/// Guarantees: `raiseSoftLimit` only raises the soft limit, never past the hard limit;
/// `shortfall` is nil whenever `needed(workers:)` fits under the limit; `keptRoom` and
/// `prepareRoom` together never give more descriptors than remain once everything else is
/// counted.
public enum DescriptorBudget {
    /// Descriptors counted for everything but the transfers: standard streams, the database and
    /// its journal files, libcurl's wake-up and poll descriptors, folders being synced.
    static let reserve = 64
    /// Idle connections libcurl may keep open (`CurlMultiLoop`'s connection cache).
    static let idleConnections = CurlMultiLoop.connectionCache
    /// Verified files held open until placed (see `EngineCore.unplacedLimit`).
    static let verifiedFiles = EngineCore.unplacedBatches * EngineCore.Config.defaultBatchSize
    /// The highest soft limit `raiseSoftLimit` asks for: some programs walk every descriptor
    /// up to the limit, and a million is more than any run needs.
    static let highestSoftLimit = 1 << 20

    /// Raises the soft limit on open files to the hard limit (at most `highestSoftLimit`), as
    /// Go's runtime does at start, and returns the soft limit now in force (`Int.max` when
    /// unlimited).
    @discardableResult
    public static func raiseSoftLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return Int.max }
        let wanted = min(limit.rlim_max, rlim_t(highestSoftLimit))
        if limit.rlim_cur < wanted {
            var raised = limit
            raised.rlim_cur = wanted
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)  // unlimited (all bits set) clamps to Int.max
    }

    /// Descriptors a run of `workers` transfers may hold, preparing nothing ahead.
    public static func needed(workers: Int) -> Int {
        reserve + idleConnections + verifiedFiles + 2 * workers  // a socket and a temp file each
    }

    /// Why a run of `workers` transfers cannot start under `limit`, or nil when it can.
    public static func shortfall(workers: Int, limit: Int) -> String? {
        let needed = needed(workers: workers)
        guard needed > limit else { return nil }
        return "\(workers) transfers at once (-j) need up to \(needed) open files, but this process may open only \(limit) "
            + "(ulimit -n, and its hard limit): lower -j, or raise the limit"
    }

    /// How many empty unnamed files may be kept for the next downloads (`UnnamedFilePool`) with
    /// `workers` transfers under `limit`: half of what remains, at most the pool's capacity.
    public static func keptRoom(workers: Int, limit: Int) -> Int {
        min(UnnamedFilePool.capacity, max(0, limit - needed(workers: workers)) / 2)
    }

    /// How many temp files may be prepared ahead for `workers` transfers under `limit`, once the
    /// files kept for later (`keptRoom`) are counted.
    public static func prepareRoom(workers: Int, limit: Int) -> Int {
        max(0, limit - needed(workers: workers) - keptRoom(workers: workers, limit: limit))
    }
}
