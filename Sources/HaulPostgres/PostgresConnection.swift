import CLibPQ
import Foundation
import HaulCore

/// One connection to a PostgreSQL server, through libpq.
///
/// Guarantees: statements with parameters are prepared once per distinct SQL text and cached
/// for the connection's life (named `s1`, `s2`…); parameters and results travel in text
/// format and results are copied out, so libpq's memory is freed before a call returns; the
/// client encoding is UTF-8; server notices are not printed. Errors never carry bound values
/// or the URL's password (see `PostgresError`). A `PostgresConnection` is not thread-safe and
/// not `Sendable`: it is owned by the one thread that made it (open one per thread or process
/// that needs one). The connection closes when the object is released.
public final class PostgresConnection {
    /// The transaction isolation level `transaction` begins with.
    public enum Isolation: Sendable {
        case readCommitted, repeatableRead, serializable

        var begin: String {
            switch self {
            case .readCommitted: return "BEGIN"
            case .repeatableRead: return "BEGIN ISOLATION LEVEL REPEATABLE READ"
            case .serializable: return "BEGIN ISOLATION LEVEL SERIALIZABLE"
            }
        }
    }

    /// How often `transaction` runs its body when it keeps failing with a serialization failure
    /// or a deadlock.
    public static let maximumAttempts = 10

    /// The URL without its password (`postgres://user@host:port/db`), for messages.
    public let location: String
    let handle: OpaquePointer
    /// Prepared statement names by SQL text.
    var prepared: [String: String] = [:]
    /// The number of the last statement prepared (names are never reused).
    private var preparedCount = 0
    private(set) var transactionDepth = 0
    /// The BEGIN of a transaction whose body has sent nothing yet: it travels with the body's
    /// first statement (one round trip for both, see `pipeline`).
    var pendingBegin: String?
    /// The body's last pipeline ended with COMMIT (`pipeline(_:commit:)`): the transaction is over.
    var committedEarly = false

    /// Connects to `url`: a `postgres://` or `postgresql://` URI or a `key=value` connection
    /// string, read by libpq (so `PGPASSWORD`, `~/.pgpass`, `PGHOST`…, `sslmode` and the other
    /// parameters work as in psql).
    /// - Throws: `PostgresError` of kind `.connect`, carrying libpq's message.
    public init(url: String) throws {
        location = Self.redacted(url)
        guard !url.utf8.contains(0) else {
            throw PostgresError(kind: .connect, message: "the URL holds a NUL byte")
        }
        // dbname is expanded as the URI or connection string; the keywords after it override
        // it (client_encoding) or apply only when it sets none (fallback_application_name); those
        // before it are defaults it may override. A server that does not answer is given up on
        // within seconds, not minutes, so a run waiting for its queue (DownloadEngine.outageLimit)
        // tries again: 10 s to connect (unless PGCONNECT_TIMEOUT says otherwise), and a
        // connection silent for 10 s is probed every 5 s and given up after 3 probes unanswered.
        var keywords = ["keepalives_idle", "keepalives_interval", "keepalives_count"]
        var values = ["10", "5", "3"]
        if PQlibVersion() >= 120000 {
            // And data sent but not acknowledged for 30 s (a statement sent into a cut network,
            // which keepalives do not probe) ends the connection. libpq 12 or later knows it.
            keywords.append("tcp_user_timeout")
            values.append("30000")
        }
        if getenv("PGCONNECT_TIMEOUT") == nil {
            keywords.append("connect_timeout")
            values.append("10")
        }
        keywords += ["dbname", "client_encoding", "fallback_application_name"]
        values += [url, "UTF8", "haul"]
        let connection = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else { throw PostgresError(kind: .connect, message: "out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.scrub(Self.oneLine(String(cString: PQerrorMessage(connection))), url: url, location: location)
            PQfinish(connection)
            throw PostgresError(kind: .connect, message: message.isEmpty ? "connection failed" : message)
        }
        handle = connection
        // By default libpq prints NOTICEs ("relation already exists, skipping") to stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    deinit {
        PQfinish(handle)
    }

    /// Whether the connection is still usable (libpq's `PQstatus` is `CONNECTION_OK`).
    public var isConnected: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Whether a transaction is open (also one aborted by an error and not yet rolled back).
    public var isInTransaction: Bool {
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// The server's version as a number, e.g. 150008 for 15.8.
    public var serverVersion: Int { Int(PQserverVersion(handle)) }

    // MARK: - Statements

    /// Runs `sql` as a simple query: no parameters, and it may hold several statements
    /// separated by `;` (migrations). Results are discarded.
    public func execute(_ sql: String) throws {
        guard !sql.utf8.contains(0) else { throw nulError(sql: sql) }
        if let begin = pendingBegin {
            pendingBegin = nil
            let result = PQexec(handle, begin)
            defer { PQclear(result) }
            try check(result, sql: begin, secrets: [])
        }
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result, sql: sql, secrets: [])
    }

    /// Runs one statement with `$1`, `$2`… parameters and returns its rows.
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) throws -> PostgresRows {
        if pendingBegin != nil { return try pipeline([(sql, parameters)])[0].rows }
        let result = try executePrepared(sql, parameters)
        defer { PQclear(result) }
        return Self.rows(of: result)
    }

    /// Runs one statement with `$1`, `$2`… parameters and returns how many rows it inserted,
    /// updated, deleted, selected… (`PQcmdTuples`; 0 for statements that report none).
    @discardableResult
    public func run(_ sql: String, _ parameters: [PostgresValue] = []) throws -> Int {
        if pendingBegin != nil { return try pipeline([(sql, parameters)])[0].affected }
        let result = try executePrepared(sql, parameters)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    // MARK: - Transactions

    /// Runs `body` in a transaction: BEGIN, then COMMIT when it returns, ROLLBACK when it throws.
    /// BEGIN is sent with the body's first statement, in one round trip; a body whose last
    /// pipeline commits (`pipeline(_:commit: true)`) has COMMIT travel with it, and whatever it
    /// runs after that runs outside the transaction.
    ///
    /// When the transaction fails with a serialization failure (40001) or a deadlock (40P01) —
    /// thrown by `body` or by COMMIT — it is rolled back and `body` runs again, after a
    /// randomized pause of a few milliseconds, up to `maximumAttempts` times in all; then the
    /// last error is thrown. So **`body` must be safe to run again**: no effects outside the
    /// database (no files, no counters in memory that are not reset at its start).
    ///
    /// A call inside another's body joins the outer transaction (no savepoint, no retry of its
    /// own). A body that catches a statement's error and returns normally leaves the
    /// transaction aborted: it is then rolled back and a `PostgresError` (kind `.client`) thrown.
    public func transaction<T>(_ isolation: Isolation = .readCommitted, _ body: () throws -> T) throws -> T {
        if transactionDepth > 0 {
            return try body()
        }
        var attempt = 1
        while true {
            do {
                return try attemptTransaction(isolation, body)
            } catch let error as PostgresError where error.isRetryable && attempt < Self.maximumAttempts {
                usleep(UInt32.random(in: 500...(1_000 + 1_500 * UInt32(attempt))))
                attempt += 1
            }
        }
    }

    private func attemptTransaction<T>(_ isolation: Isolation, _ body: () throws -> T) throws -> T {
        pendingBegin = isolation.begin
        committedEarly = false
        transactionDepth = 1
        defer {
            transactionDepth = 0
            pendingBegin = nil
            committedEarly = false
        }
        do {
            let result = try body()
            if PQtransactionStatus(handle) == PQTRANS_INERROR {
                throw PostgresError(kind: .client, message: "the transaction was aborted by an error that its body caught; it was rolled back",
                                    sql: "COMMIT")
            }
            // Nothing sent (the body ran no statement), or committed with its last pipeline.
            if pendingBegin == nil && !committedEarly { try execute("COMMIT") }
            return result
        } catch {
            pendingBegin = nil
            if isInTransaction { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    // MARK: - Internals

    private func executePrepared(_ sql: String, _ parameters: [PostgresValue], retried: Bool = false) throws -> OpaquePointer {
        let texts = parameters.map(\.text)
        if texts.contains(where: { $0?.utf8.contains(0) == true }) { throw nulError(sql: sql) }
        let secrets = Self.secrets(in: parameters)
        let name = try statementName(for: sql)
        let result = Self.withParameters(texts) { count, pointers in
            PQexecPrepared(handle, name, count, pointers, nil, nil, 0)
        }
        do {
            try check(result, sql: sql, secrets: secrets)
        } catch {
            PQclear(result)
            if let error = error as? PostgresError, error.sqlState == "26000", prepared[sql] != nil {
                // The server no longer has the statement (DEALLOCATE, DISCARD ALL): prepare it
                // again, at once outside a transaction, else the next time.
                prepared[sql] = nil
                if !retried && !isInTransaction { return try executePrepared(sql, parameters, retried: true) }
            }
            throw error
        }
        return result!
    }

    /// Calls `body` with the parameters as C strings (nil for NULL), all in one buffer, each
    /// NUL-terminated; libpq copies them before the call returns.
    static func withParameters<R>(_ texts: [String?], _ body: (Int32, [UnsafePointer<CChar>?]) -> R) -> R {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(texts.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 1 })
        var offsets: [Int?] = []
        offsets.reserveCapacity(texts.count)
        for text in texts {
            guard let text else {
                offsets.append(nil)
                continue
            }
            offsets.append(buffer.count)
            buffer.append(contentsOf: text.utf8)
            buffer.append(0)
        }
        return buffer.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { characters in
                body(Int32(offsets.count), offsets.map { offset in offset.map { characters.baseAddress! + $0 } })
            }
        }
    }

    func statementName(for sql: String) throws -> String {
        if let name = prepared[sql] { return name }
        guard !sql.utf8.contains(0) else { throw nulError(sql: sql) }
        let name = "s\(preparedCount + 1)"
        let result = PQprepare(handle, name, sql, 0, nil)
        defer { PQclear(result) }
        try check(result, sql: sql, secrets: [])
        preparedCount += 1
        prepared[sql] = name
        return name
    }

    /// Throws unless `result` is a success.
    func check(_ result: OpaquePointer?, sql: String, secrets: [String]) throws {
        if let result {
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY: return
            default: break
            }
        }
        throw error(result, sql: sql, secrets: secrets)
    }

    func error(_ result: OpaquePointer?, sql: String, secrets: [String]) -> PostgresError {
        var sqlState: String?
        var message: String?
        if let result {
            sqlState = PQresultErrorField(result, Self.fieldSQLState).map { String(cString: $0) }
            message = PQresultErrorField(result, Self.fieldPrimaryMessage).map { String(cString: $0) }
        }
        let text = Self.scrub(Self.oneLine(message ?? String(cString: PQerrorMessage(handle))), secrets: secrets)
        let kind: PostgresError.Kind = PQstatus(handle) != CONNECTION_OK ? .connectionLost : (sqlState != nil ? .server : .client)
        return PostgresError(kind: kind, sqlState: sqlState, message: text.isEmpty ? "unknown error" : text, sql: sql)
    }

    func nulError(sql: String) -> PostgresError {
        PostgresError(kind: .client, message: "text holding a NUL byte cannot be sent to PostgreSQL", sql: sql)
    }

    private static let fieldSQLState = Int32(UInt8(ascii: "C"))  // PG_DIAG_SQLSTATE
    private static let fieldPrimaryMessage = Int32(UInt8(ascii: "M"))  // PG_DIAG_MESSAGE_PRIMARY

    static func rows(of result: OpaquePointer) -> PostgresRows {
        let rowCount = PQntuples(result)
        let columnCount = PQnfields(result)
        let columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
        var values: [String?] = []
        values.reserveCapacity(Int(rowCount) * Int(columnCount))
        for row in 0..<rowCount {
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) != 0 {
                    values.append(nil)
                } else {
                    let bytes = UnsafeRawBufferPointer(start: PQgetvalue(result, row, column), count: Int(PQgetlength(result, row, column)))
                    values.append(String(decoding: bytes, as: UTF8.self))
                }
            }
        }
        return PostgresRows(columns: columns, values: values)
    }

    /// The bound strings an error message must not show.
    static func secrets(in parameters: [PostgresValue]) -> [String] {
        var secrets: [String] = []
        for parameter in parameters {
            switch parameter {
            case .string(let text) where !text.isEmpty:
                secrets.append(text)
            case .strings(let texts):
                secrets.append(contentsOf: texts.compactMap { $0 }.filter { !$0.isEmpty })
                secrets.append(PostgresValue.arrayLiteral(texts))
            default:
                break
            }
        }
        return secrets
    }

    /// Replaces bound strings in a server message: wherever one is quoted (`"value"`, as
    /// PostgreSQL quotes input it cannot read), and wherever one of 8 characters or more appears.
    static func scrub(_ message: String, secrets: [String]) -> String {
        var text = message
        for secret in secrets.sorted(by: { $0.count > $1.count }) {
            text = text.replacingOccurrences(of: "\"\(secret)\"", with: "\"***\"")
            if secret.count >= 8 { text = text.replacingOccurrences(of: secret, with: "***") }
        }
        return text
    }

    /// Takes the URL and its passwords out of a libpq connection message.
    static func scrub(_ message: String, url: String, location: String) -> String {
        var text = url.isEmpty ? message : message.replacingOccurrences(of: url, with: location)
        for password in passwords(in: url) where !password.isEmpty {
            text = text.replacingOccurrences(of: password, with: "***")
        }
        return text
    }

    /// libpq's messages, on one line: lines trimmed and joined by spaces.
    static func oneLine(_ message: String) -> String {
        message.split(whereSeparator: \.isNewline).map { $0.trimmingSpaces }.filter { !$0.isEmpty }.joined(separator: " ")
    }
}

/// Calls `body` with a C array of C strings that live for the call.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { UnsafePointer($0) } + [nil])
}
