import CSQLite

/// An error reported by SQLite, or by haul's own checks on a database.
///
/// Carries SQLite's extended result code, its message and the SQL that failed — never the
/// bound values, which may hold user data such as URLs with credentials.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// SQLite's extended result code (for example 5 for SQLITE_BUSY, 26 for SQLITE_NOTADB).
    public let code: Int32
    public let message: String
    public let sql: String?

    public init(code: Int32, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// The primary result code (the low byte of the extended code).
    public var primaryCode: Int32 { code & 0xFF }

    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }

    public var description: String {
        var text = "SQLite error \(code): \(message)"
        if let sql { text += " (in: \(sql.split(whereSeparator: \.isNewline).joined(separator: " ")))" }
        return text
    }
}

/// Errors about a database file that is not one haul can use. Each message says what to do.
public enum DatabaseError: Error, CustomStringConvertible, Sendable, Equatable {
    case missing(path: String)
    case notADatabase(path: String)
    case unknownMigration(path: String, version: Int, name: String)
    case readOnly(path: String)
    case busy(path: String, seconds: Double)
    case openFailed(path: String, reason: String)

    public var description: String {
        switch self {
        case .missing(let path):
            return "no haul database at \(path); create one with `haul add`, or name another with --db or HAUL_DB"
        case .notADatabase(let path):
            return "\(path) is not a SQLite database (or is damaged); it was left untouched — name another file with --db"
        case .unknownMigration(let path, let version, let name):
            return "\(path) has schema migration \(version) (\(name)) that this haul does not know; it was made by a newer haul — use that version, or another --db. The database was left untouched"
        case .readOnly(let path):
            return "\(path) is read-only (or its folder is); haul needs to write to it — fix its permissions or copy it elsewhere"
        case .busy(let path, let seconds):
            return "\(path) stayed locked by another process for \(seconds) s; try again when it is done"
        case .openFailed(let path, let reason):
            return "cannot open database \(path): \(reason)"
        }
    }
}
