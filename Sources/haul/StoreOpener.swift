import HaulCore
import HaulPostgres

/// Picks the queue's backend from `--db` / `$HAUL_DB`: a `postgres://` or `postgresql://` URL is a
/// PostgreSQL queue shared by many machines; anything else is the path of a SQLite file.
enum StoreOpener {
    static func isServerURL(_ location: String) -> Bool {
        let lower = location.lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    /// `location` with a server URL's scheme in lower case (`POSTGRES://…` is a PostgreSQL URL to
    /// haul, and libpq would take it as a database name, password included); a path as given.
    static func normalized(_ location: String) -> String {
        guard isServerURL(location), let colon = location.firstIndex(of: ":") else { return location }
        return location[..<colon].lowercased() + location[colon...]
    }

    /// Why `location` names no queue haul can keep, or nil: the jobs must outlive the process.
    static func refusal(_ location: String) -> String? {
        if location.isEmpty { return "is empty: name a file (or a postgres:// URL)" }
        if location == ":memory:" { return "':memory:' would keep the queue in memory, lost when haul exits: name a file" }
        if readsAsConnectionString(location) {
            return "reads as a libpq connection string (keyword=value), which haul does not take: name the database as "
                + "postgres://USER@HOST:PORT/DB (other libpq parameters after '?'), or a file as ./NAME"
        }
        return nil
    }

    /// libpq's keywords that begin a keyword=value connection string (`host=db1 dbname=haul`):
    /// given to `--db`, such a string would have become a SQLite file of that name, and its
    /// password part of a file name.
    private static let connectionKeywords: Set<String> = [
        "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service", "sslmode", "connect_timeout",
        "options", "application_name", "target_session_attrs", "sslcert", "sslkey", "sslrootcert", "sslpassword",
    ]

    static func readsAsConnectionString(_ location: String) -> Bool {
        let first = location.drop { $0 == " " }
        guard let equals = first.firstIndex(of: "=") else { return false }
        return connectionKeywords.contains(first[..<equals].trimmingCharacters(in: .whitespaces).lowercased())
    }

    /// The location as messages may show it: a server URL without its password.
    static func displayLocation(_ location: String) -> String {
        isServerURL(location) ? PostgresConnection.redacted(location) : location
    }

    /// Opens the queue; `create` false refuses a SQLite file that does not exist yet, and a
    /// PostgreSQL database without haul's schema.
    static func open(_ location: String, create: Bool, busyTimeout: Double) throws -> any JobStore {
        // A PostgreSQL database is made by its administrator; haul brings its schema up to date
        // (and makes it for the commands that add jobs).
        if isServerURL(location) { return try PostgresJobStore(url: location, create: create) }
        return try JobQueue(path: location, mode: create ? .createIfMissing : .mustExist, busyTimeout: busyTimeout)
    }
}
