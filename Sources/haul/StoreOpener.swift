import HaulCore

/// Picks the queue's backend from `--db` / `$HAUL_DB`: a `postgres://` or `postgresql://` URL is a
/// PostgreSQL queue shared by many machines; anything else is the path of a SQLite file.
enum StoreOpener {
    static func isServerURL(_ location: String) -> Bool {
        let lower = location.lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    /// Opens the queue; `create` false refuses a SQLite file that does not exist yet.
    static func open(_ location: String, create: Bool, busyTimeout: Double) throws -> any JobStore {
        try JobQueue(path: location, mode: create ? .createIfMissing : .mustExist, busyTimeout: busyTimeout)
    }
}
