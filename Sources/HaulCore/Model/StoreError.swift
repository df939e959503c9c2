/// An error of a queue backend that can say, in one line a user reads, what failed and what to
/// do: the commands show these without knowing which backend (SQLite, later PostgreSQL) it was.
///
/// Guarantees: the line names the store (`location`: a database file, a server), never the
/// values bound to a statement (they may hold URLs with credentials).
public protocol StoreError: Error {
    /// The one line for the user. `busyTimeout`: how long the command waited for a lock.
    func explained(location: String, busyTimeout: Double) -> String
}
