import Foundation
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

    /// libpq's connection keywords (PostgreSQL 15's, and 16's load_balance_hosts): a location
    /// with any of them as `keyword=` (`host=db1 dbname=haul password=…`) is a keyword=value
    /// connection string. Given to `--db`, it would have become a SQLite file of that name, and
    /// its password part of a file name.
    private static let connectionKeywords: Set<String> = [
        "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "channel_binding", "connect_timeout",
        "client_encoding", "options", "application_name", "fallback_application_name", "keepalives", "keepalives_idle",
        "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl",
        "sslcompression", "sslcert", "sslkey", "sslpassword", "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer",
        "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib", "service", "target_session_attrs",
        "load_balance_hosts",
    ]

    /// Whether any word of `location` is `keyword=…` (spaces around '=' allowed, as libpq allows).
    static func readsAsConnectionString(_ location: String) -> Bool {
        let text = location.replacingOccurrences(of: #"\s*=\s*"#, with: "=", options: .regularExpression)
        return text.split(whereSeparator: \.isWhitespace).contains { word in
            guard let equals = word.firstIndex(of: "=") else { return false }
            return connectionKeywords.contains(word[..<equals].lowercased())
        }
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
