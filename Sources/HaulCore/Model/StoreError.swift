/// An error of a queue backend that can say, in one line a user reads, what failed and what to
/// do: the commands show these without knowing which backend (SQLite, later PostgreSQL) it was.
///
/// Guarantees: the line names the store (`location`: a database file, a server), never the
/// values bound to a statement (they may hold URLs with credentials).
public protocol StoreError: Error {
    /// The one line for the user. `busyTimeout`: how long the command waited for a lock.
    func explained(location: String, busyTimeout: Double) -> String
    /// The store could not be reached (a server down or restarting, a network cut), as opposed
    /// to refusing what was asked: the same request may well succeed later. A run waits for such
    /// a store (`DownloadEngine.outageLimit`) instead of ending after a few tries.
    var isUnavailable: Bool { get }
}

extension StoreError {
    public var isUnavailable: Bool { false }
}

/// How long haul waits for a store that cannot be reached (`StoreError.isUnavailable`).
///
/// Guarantees: one figure for every waiter (a run's exchanges, `haul get`'s import), so a run
/// does not end while its import still waits, nor the other way round, for the same outage.
public enum StoreOutage {
    /// In ms: 10 minutes.
    public static let limit = 600_000

    /// How long (ms) to wait before trying again after `failures` failed tries in a row: 1, 2, 4,
    /// then every 8 s.
    public static func retryDelay(afterFailures failures: Int) -> Int {
        1000 << min(max(failures, 1) - 1, 3)
    }
}
