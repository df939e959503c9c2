import Foundation

/// The persistent job queue: every URL of a batch, its state, its leases and its attempts.
///
/// Guarantees: every change is one SQLite transaction, so a crash at any instant leaves each
/// job whole in exactly one state; a job in `running` always carries a lease (token, owner,
/// expiry), and only the current lease holder can move it on. Several `JobQueue`s — in one
/// process or many — may share one database file. Not thread-safe: one `JobQueue` belongs to
/// one thread or actor, like the `Database` it owns.
public final class JobQueue {
    /// The connection: `package`, so the tests of this package may look inside; SQL stays in Queue.
    package let database: Database
    /// The current time in Unix milliseconds. Replaceable so tests can move time.
    public var clock: @Sendable () -> Int = { Int(Date().timeIntervalSince1970 * 1000) }
    /// When `exchange` last looked for expired leases (Unix ms).
    var lastExpiry = Int.min / 2

    public init(database: Database) {
        self.database = database
    }

    /// Opens the database at `path` (see `Database.OpenMode`) and wraps it.
    public convenience init(path: String, mode: Database.OpenMode = .createIfMissing, busyTimeout: Double = 10) throws {
        self.init(database: try Database(path: path, mode: mode, busyTimeout: busyTimeout))
    }

    /// A fresh, unguessable lease token.
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        return String(high, radix: 16) + "-" + String(low, radix: 16)
    }
}
