import CSQLite
import Foundation

/// The one owner of a SQLite connection.
///
/// Guarantees: WAL journal, `synchronous=NORMAL`, foreign keys on and a busy timeout on every
/// connection; statements are prepared once and cached by their SQL; write transactions begin
/// with `BEGIN IMMEDIATE`, so a writer never fails half-way on a lock upgrade; migrations are
/// applied when the database is opened. A `Database` is not thread-safe: confine it to one
/// thread or actor (open one per thread or process that needs one).
public final class Database {
    /// How to treat a database file that does not exist yet.
    public enum OpenMode: Sendable {
        /// Create the file when missing (commands that add jobs).
        case createIfMissing
        /// A missing file is an error (commands that only read, or act on existing jobs).
        case mustExist
    }

    public enum TransactionKind: Sendable {
        /// `BEGIN DEFERRED`: for reads that want one consistent snapshot.
        case read
        /// `BEGIN IMMEDIATE`: takes the write lock up front.
        case write
    }

    /// Makes the database file and its journal files (`-wal`, `-shm`, which SQLite creates with
    /// the database's own mode) readable and writable by their owner only.
    public func restrictToOwner() throws {
        for file in [path, path + "-wal", path + "-shm"] {
            if chmod(file, 0o600) != 0 && errno != ENOENT {
                throw DatabaseError.io(path: file, operation: "restrict to its owner (chmod 600)", reason: String(cString: strerror(errno)))
            }
        }
    }

    /// The version of the SQLite library haul runs on.
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    let handle: OpaquePointer
    public let path: String
    private var cache: [StatementKey: Statement] = [:]
    private var transactionDepth = 0

    /// Opens (or creates) the database at `path` and brings its schema up to date.
    /// - Parameter busyTimeout: how long to wait for another process's lock, in seconds.
    public init(path: String, mode: OpenMode = .createIfMissing, busyTimeout: Double = 10,
                migrations: [Migration] = Migration.embedded) throws {
        self.path = path
        if mode == .mustExist && !FileManager.default.fileExists(atPath: path) {
            throw DatabaseError.missing(path: path)
        }
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if mode == .createIfMissing {
            flags |= SQLITE_OPEN_CREATE
            // The queue holds URLs, which may carry credentials: create it readable by its owner
            // only (SQLite gives its -wal and -shm files the same mode).
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 { close(fd) }
        }
        Self.configureLibraryOnce
        var connection: OpaquePointer?
        let rc = sqlite3_open_v2(Self.fileName(path), &connection, flags, nil)
        guard rc == SQLITE_OK, let connection else {
            let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(connection)
            if rc & 0xFF == SQLITE_CANTOPEN, !FileManager.default.fileExists(atPath: path) {
                throw DatabaseError.openFailed(path: path, reason: "\(message); does its folder exist?")
            }
            throw DatabaseError.openFailed(path: path, reason: message)
        }
        self.handle = connection
        sqlite3_extended_result_codes(connection, 1)
        // The timeout travels as the context pointer's value: nothing to allocate or free.
        let timeoutMicroseconds = max(1, Int(busyTimeout * 1_000_000))
        sqlite3_busy_handler(connection, Database.busyHandler, UnsafeMutableRawPointer(bitPattern: timeoutMicroseconds))

        do {
            if sqlite3_db_readonly(connection, "main") == 1 { throw DatabaseError.readOnly(path: path) }
            // SQLite takes a 1-byte file for an empty database and would overwrite it: a file
            // with content must start with SQLite's header.
            if let header = FileHandle(forReadingAtPath: path).flatMap({ try? $0.read(upToCount: 16) }),
               !header.isEmpty, header != Data("SQLite format 3\0".utf8) {
                throw DatabaseError.notADatabase(path: path)
            }
            // Reading the schema is the first thing that touches the file's content: a file that
            // is not SQLite fails here, before anything is written to it.
            _ = try scalarInt("SELECT count(*) FROM sqlite_schema")
            // Pages stay at SQLite's 4 KiB: 16 KiB pages made bulk adds about a fifth faster, but
            // every job update (when triggers kept the counters, before migration 0015) copied
            // each page it touched into the statement journal, and at 16 KiB that doubled the
            // cost of claiming and completing a job (measured: 191 k against 111 k instructions
            // per claim).
            // Refuse a newer haul's database before the journal mode below can change its header.
            try Migrator(migrations: migrations).refuseUnknown(self)
            // Another program's database gets no haul table, and a command that only reads or
            // acts on jobs does not make a queue of an empty file.
            if path != ":memory:" { try Migrator.refuseForeign(self, mustBeQueue: mode == .mustExist) }
            // Two processes making a new queue at once: while one turns the new file's rollback
            // journal into WAL, the other's lock upgrade is refused at once (SQLite's deadlock
            // avoidance calls no busy handler there), so the steps are tried again, each of them
            // idempotent, until the busy timeout is spent. Measured: 27 of 30 pairs of `haul add`
            // started together on a new file failed before this.
            let deadline = ContinuousClock.now + .milliseconds(Int(busyTimeout * 1000))
            while true {
                do {
                    let journal = try firstString("PRAGMA journal_mode = WAL")
                    if journal?.lowercased() != "wal" && path != ":memory:" {
                        throw DatabaseError.openFailed(path: path, reason: "cannot switch to WAL journal (got \(journal ?? "nothing"))")
                    }
                    try execute("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;")
                    try Migrator(migrations: migrations).migrate(self)
                    break
                } catch let error as SQLiteError where error.primaryCode == SQLITE_BUSY && ContinuousClock.now < deadline {
                    usleep(2_000)
                }
            }
        } catch let error as SQLiteError {
            cache.removeAll()
            sqlite3_close_v2(connection)
            switch error.primaryCode {
            case SQLITE_NOTADB, SQLITE_CORRUPT: throw DatabaseError.notADatabase(path: path)
            case SQLITE_READONLY, SQLITE_PERM: throw DatabaseError.readOnly(path: path)
            case SQLITE_BUSY: throw DatabaseError.busy(path: path, seconds: busyTimeout)
            default: throw error
            }
        } catch {
            cache.removeAll()
            sqlite3_close_v2(connection)
            throw error
        }
    }

    /// The name SQLite is given for `path`: the file at that path, never a URI or a database in
    /// memory. Debian's SQLite reads a name that starts with `file:` as a URI (`file:q.db?mode=memory`
    /// would keep the jobs in memory and lose them) and `:memory:` as no file at all: a relative
    /// path is handed over as `./path`. (`:memory:` itself stays in memory, for tests.)
    static func fileName(_ path: String) -> String {
        path == ":memory:" || path.hasPrefix("/") || path.hasPrefix("./") ? path : "./" + path
    }

    /// Process-wide SQLite settings, applied before the first connection opens.
    private static let configureLibraryOnce: Void = {
        // Memory statistics take a global mutex on every allocation; haul never reads them.
        _ = csqlite_disable_memstatus()
    }()

    deinit {
        cache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Waits for another connection's lock in short steps: SQLite's own busy timeout sleeps up
    /// to 100 ms between looks, so a lock held for a millisecond by another haul process cost a
    /// waiter tens of milliseconds. Here: 200 µs steps for the first 10 ms, then 1 ms steps up to
    /// 210 ms, then 5 ms steps, until the timeout (the context pointer's value, in µs) is spent.
    private static let busyHandler: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32 = { context, count in
        let timeout = Int(bitPattern: context)
        let n = Int(count)
        let waited = n < 50 ? n * 200 : n < 250 ? 10_000 + (n - 50) * 1000 : 210_000 + (n - 250) * 5000
        guard waited < timeout else { return 0 }
        usleep(n < 50 ? 200 : n < 250 ? 1000 : 5000)
        return 1
    }

    /// The cached prepared statement for `sql`, preparing it on first use.
    public func statement(_ sql: String) throws -> Statement {
        let key = StatementKey(sql)
        if let cached = cache[key] { return cached }
        let statement = try Statement(database: self, sql: sql)
        cache[key] = statement
        return statement
    }

    /// Runs one statement with bound values.
    public func run(_ sql: String, _ values: SQLiteBindable...) throws {
        try statement(sql).run(values)
    }

    /// Runs SQL text that may hold several statements and takes no parameters (schema, pragmas).
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: text, sql: sql,
                              systemErrno: sqlite3_system_errno(handle))
        }
    }

    public func rows<T>(_ sql: String, _ values: [SQLiteBindable] = [], _ map: (Row) throws -> T) throws -> [T] {
        try statement(sql).rows(values, map)
    }

    public func firstRow<T>(_ sql: String, _ values: [SQLiteBindable] = [], _ map: (Row) throws -> T) throws -> T? {
        try statement(sql).firstRow(values, map)
    }

    public func scalarInt(_ sql: String, _ values: [SQLiteBindable] = []) throws -> Int {
        try firstRow(sql, values) { $0.int(0) } ?? 0
    }

    func firstString(_ sql: String) throws -> String? {
        try firstRow(sql) { $0.optionalString(0) } ?? nil
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes64(handle)) }

    /// The rowid of the most recent successful INSERT.
    public var lastInsertRowID: Int { Int(sqlite3_last_insert_rowid(handle)) }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    /// Nested calls join the outer transaction.
    public func transaction<T>(_ kind: TransactionKind = .write, _ body: () throws -> T) throws -> T {
        if transactionDepth > 0 {
            transactionDepth += 1
            defer { transactionDepth -= 1 }
            return try body()
        }
        try statement(kind == .write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED").run()
        transactionDepth = 1
        defer { transactionDepth = 0 }
        do {
            let result = try body()
            try statement("COMMIT").run()
            return result
        } catch {
            if sqlite3_get_autocommit(handle) == 0 { _ = try? statement("ROLLBACK").run() }
            throw error
        }
    }

    func error(code: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), sql: sql,
                    systemErrno: sqlite3_system_errno(handle))
    }
}

/// A statement cache's key: the SQL text, hashed by its length and its first and last 64 bytes
/// only. The hot statements run to a thousand bytes, and hashing all of them on every lookup
/// cost about as much as binding their values; texts that differ only in the middle share a
/// hash and are told apart by the full comparison.
private struct StatementKey: Hashable {
    let sql: String

    init(_ sql: String) { self.sql = sql }

    func hash(into hasher: inout Hasher) {
        var sql = sql
        sql.withUTF8 { bytes in
            hasher.combine(bytes.count)
            if bytes.count <= 128 {
                hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            } else {
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[..<64]))
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(bytes.count - 64)...]))
            }
        }
    }

    static func == (a: StatementKey, b: StatementKey) -> Bool { a.sql == b.sql }
}
