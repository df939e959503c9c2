import CSQLite
import Foundation

/// An error reported by SQLite, or by haul's own checks on a database.
///
/// Carries SQLite's extended result code, its message and the SQL that failed — never the
/// bound values, which may hold user data such as URLs with credentials.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// SQLite's extended result code (for example 5 for SQLITE_BUSY, 26 for SQLITE_NOTADB).
    public let code: Int32
    public let message: String
    public let sql: String?
    /// The operating system's error number behind an I/O failure (`sqlite3_system_errno`), e.g.
    /// ENOSPC; 0 when there is none.
    public let systemErrno: Int32

    public init(code: Int32, message: String, sql: String? = nil, systemErrno: Int32 = 0) {
        self.code = code
        self.message = message
        self.sql = sql
        self.systemErrno = systemErrno
    }

    /// The primary result code (the low byte of the extended code).
    public var primaryCode: Int32 { code & 0xFF }

    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }

    /// The system's reason for an I/O failure ("No space left on device"), when there is one.
    public var systemReason: String? {
        guard systemErrno != 0, [SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN].contains(primaryCode) else { return nil }
        return String(cString: strerror(systemErrno))
    }

    public var description: String {
        var text = "SQLite error \(code): \(message)"
        if let systemReason { text += " (\(systemReason))" }
        if let sql { text += " (in: \(sql.split(whereSeparator: \.isNewline).joined(separator: " ")))" }
        return text
    }
}

/// Errors about a database file that is not one haul can use. Each message says what to do.
public enum DatabaseError: Error, CustomStringConvertible, Sendable, Equatable {
    case missing(path: String)
    case notADatabase(path: String)
    /// A SQLite database with another program's tables: not a haul queue.
    case notAQueue(path: String)
    case unknownMigration(path: String, version: Int, name: String)
    case readOnly(path: String)
    case busy(path: String, seconds: Double)
    case openFailed(path: String, reason: String)
    /// A file operation on the database's files failed.
    case io(path: String, operation: String, reason: String)

    public var description: String {
        switch self {
        case .missing(let path):
            return "no haul database at \(path); create one with `haul add`, or name another with --db or HAUL_DB"
        case .notADatabase(let path):
            return "\(path) is not a SQLite database (or is damaged); it was left untouched — name another file with --db"
        case .notAQueue(let path):
            return "\(path) is a SQLite database of another program, not a haul queue; it was left untouched — name another file with --db"
        case .unknownMigration(let path, let version, let name):
            return "\(path) has schema migration \(version) (\(name)) that this haul does not know; it was made by a newer haul — use that version, or another --db. The database was left untouched"
        case .readOnly(let path):
            return "\(path) is read-only (or its folder is); haul needs to write to it — fix its permissions or copy it elsewhere"
        case .busy(let path, let seconds):
            return "\(path) stayed locked by another process for \(seconds) s; try again when it is done"
        case .openFailed(let path, let reason):
            return "cannot open database \(path): \(reason)"
        case .io(let path, let operation, let reason):
            return "cannot \(operation) \(path): \(reason)"
        }
    }
}

extension SQLiteError {
    /// The disk (or the user's quota) is full.
    public var isDiskFull: Bool {
        primaryCode == SQLITE_FULL || ([SQLITE_IOERR, SQLITE_CANTOPEN].contains(primaryCode) && [ENOSPC, EDQUOT].contains(systemErrno))
    }

    /// One line for a person: what went wrong with the database at `path`, naming it, and what to
    /// do. `busyTimeout` is how long the connection waited for a lock, in seconds.
    public func explained(location path: String, busyTimeout: Double) -> String {
        if isBusy { return DatabaseError.busy(path: path, seconds: busyTimeout).description }
        let detail = "SQLite error \(code): \(message)"
        if isDiskFull {
            return "cannot write to the database \(path): the disk is full (\(systemReason ?? "No space left on device"); \(detail)); the queue is intact — free some space, then run the command again"
        }
        switch primaryCode {
        case SQLITE_IOERR, SQLITE_CANTOPEN:
            return "cannot use the database \(path): \(systemReason.map { "\($0); " } ?? "")\(detail); the queue is intact — check its disk (free space, permissions, errors), then run the command again"
        case SQLITE_READONLY, SQLITE_PERM:
            return DatabaseError.readOnly(path: path).description
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return "the database \(path) is damaged (\(detail)); restore it from a copy, or name another file with --db"
        default:
            return "database \(path): \(description)"
        }
    }
}

extension SQLiteError: StoreError {}
