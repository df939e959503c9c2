import HaulCore

/// An error from PostgreSQL (the server or libpq), or from haul's own checks on a PostgreSQL
/// queue.
///
/// Guarantees: carries the SQLSTATE, the primary message and the SQL text that failed — never
/// the values bound to the statement (they may hold URLs with credentials): the server's DETAIL
/// field, which quotes row values, is not kept, and a bound string quoted in the message is
/// replaced by `***`. Connection failures never carry the URL's password.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// `PQconnectdb` failed: no connection was made.
        case connect
        /// The connection broke while a statement ran (server gone, network down).
        case connectionLost
        /// The server refused a statement; `sqlState` says why.
        case server
        /// haul refused before sending anything (a NUL byte in text, a transaction already aborted).
        case client
        /// The database records a migration this binary does not know: it was made by a newer haul.
        case unknownMigration(version: Int, name: String)
        /// The database holds another program's tables and no haul schema: haul adds nothing.
        case notAQueue
        /// The database holds no haul queue, and the command only reads or changes an existing
        /// one (`status`, `list`…): nothing is created.
        case noQueue
        /// A migration the queue needs was refused for want of rights (42501): bringing a
        /// schema up to date takes its tables' owner. `name`: the migration refused.
        case upgradeNeedsOwner(name: String)
    }

    public let kind: Kind
    /// The five-character SQLSTATE (`PG_DIAG_SQLSTATE`), e.g. "23505"; nil when there is none.
    public let sqlState: String?
    /// The primary message, on one line.
    public let message: String
    /// The statement's SQL text; never its parameter values.
    public let sql: String?

    public init(kind: Kind, sqlState: String? = nil, message: String, sql: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.sql = sql
    }

    /// A serialization failure (40001) or deadlock (40P01): the transaction may simply be run again.
    public var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// A unique constraint was violated (23505).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// The connection is unusable: it was never made, or broke.
    public var isConnectionFailure: Bool {
        kind == .connect || kind == .connectionLost || sqlState?.hasPrefix("08") == true
    }

    /// The server could not be reached or is going away or starting (57P01 admin shutdown,
    /// 57P02 crash shutdown, 57P03 cannot connect now): see `StoreError.isUnavailable`. Every
    /// failure to connect counts, a refused login or a dropped database too: libpq gives them no
    /// SQLSTATE, and haul cannot tell them from a server starting up (a run's first exchange
    /// still fails at once on them).
    public var isUnavailable: Bool {
        isConnectionFailure || ["57P01", "57P02", "57P03"].contains(sqlState ?? "")
    }

    public var description: String {
        var text = "PostgreSQL error"
        if let sqlState { text += " \(sqlState)" }
        text += ": \(message)"
        if let sql { text += " (in: \(sql.split(whereSeparator: \.isNewline).map { $0.trimmingSpaces }.joined(separator: " ")))" }
        return text
    }

    /// One line for a person: what went wrong with the queue at `location` (a redacted URL, see
    /// `PostgresConnection.location`) and what to do. `busyTimeout`: how long a statement waited
    /// for a lock, in seconds.
    public func explained(location: String, busyTimeout: Double) -> String {
        switch kind {
        case .connect:
            return "cannot connect to the queue at \(location): \(message); check that the server runs and the URL (--db or HAUL_DB)"
        case .connectionLost:
            return "lost the connection to the queue at \(location): \(message); the queue is intact — check the server, then run the command again"
        case .unknownMigration(let version, let name):
            return "the queue at \(location) has schema migration \(version) (\(name)) that this haul does not know; it was made by a newer haul — use that version, or another --db. The database was left untouched"
        case .notAQueue:
            return "the database at \(location) holds another program's tables, not a haul queue; it was left untouched — create a database for haul and name it with --db"
        case .noQueue:
            return "no haul queue in the database at \(location); create one with `haul add`, or name another with --db or HAUL_DB"
        case .upgradeNeedsOwner(let name):
            return "the queue at \(location) needs its schema brought up to date for this haul (\(name)), which the user haul connected as may not do: \(message); run this haul once as the user that owns the queue's tables (`haul status` will do), then again as this one"
        case .server, .client:
            break
        }
        switch sqlState {
        case "55P03", "57014":
            // lock_not_available (lock_timeout), query_canceled (statement_timeout)
            return "the queue at \(location) stayed locked by another process for \(busyTimeout) s; try again when it is done"
        case "53100":
            return "the queue's server at \(location) is out of disk space (\(description)); the queue is intact — free some space on the server, then run the command again"
        case "42501":
            return "the queue at \(location) refused: \(message); give its user the rights haul needs (it creates and writes its tables), or name another --db"
        case let state? where state.hasPrefix("08") || state.hasPrefix("57P"):
            return "lost the connection to the queue at \(location): \(message); the queue is intact — check the server, then run the command again"
        case let state? where state.hasPrefix("28"):
            return "cannot connect to the queue at \(location): \(message); check the user and password (the URL, PGPASSWORD or ~/.pgpass)"
        case "3D000":
            return "the queue at \(location) does not exist: \(message); create the database (createdb), or name another with --db or HAUL_DB"
        default:
            return "queue \(location): \(description)"
        }
    }
}

extension PostgresError: StoreError {}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return text
    }
}
