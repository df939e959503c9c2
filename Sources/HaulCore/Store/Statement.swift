import CSQLite

/// A prepared SQL statement owned by a `Database`.
///
/// Values are only ever bound as parameters, never spliced into SQL. A statement is reset and
/// its bindings cleared before each use, so a cached statement can be reused safely.
/// Not thread-safe: use it only from the thread or actor that owns its database.
public final class Statement {
    let handle: OpaquePointer
    public let sql: String
    unowned let database: Database

    init(database: Database, sql: String) throws {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw database.error(code: rc, sql: sql)
        }
        self.handle = statement
        self.sql = sql
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// Clears earlier bindings and binds `values` to the parameters ?1, ?2, … in order.
    public func bind(_ values: [SQLiteBindable]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch value.sqliteValue {
            case .null: rc = sqlite3_bind_null(handle, position)
            case .integer(let v): rc = sqlite3_bind_int64(handle, position, v)
            case .real(let v): rc = sqlite3_bind_double(handle, position, v)
            case .text(let v): rc = Self.bindText(v, to: handle, at: position)
            case .blob(let v):
                rc = v.withUnsafeBytes { sqlite3_bind_blob(handle, position, $0.baseAddress, Int32($0.count), csqlite_transient()) }
            }
            guard rc == SQLITE_OK else { throw database.error(code: rc, sql: sql) }
        }
    }

    // Typed binding for hot loops: no array, no existential boxing.

    /// Resets the statement and clears its bindings, ready for `bind(_:at:)` calls.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    public func bind(_ value: Int, at position: Int32) throws {
        try check(sqlite3_bind_int64(handle, position, Int64(value)))
    }

    public func bind(_ value: Int?, at position: Int32) throws {
        guard let value else { return try check(sqlite3_bind_null(handle, position)) }
        try check(sqlite3_bind_int64(handle, position, Int64(value)))
    }

    public func bind(_ value: String?, at position: Int32) throws {
        guard let value else { return try check(sqlite3_bind_null(handle, position)) }
        try check(Self.bindText(value, to: handle, at: position))
    }

    /// Binds `text` by its UTF-8 bytes and their count (SQLite copies them). Handing the String
    /// itself to the C parameter made Swift build a NUL-terminated array first, and SQLite then
    /// measured it with strlen: together about as much as the binding itself.
    private static func bindText(_ text: String, to handle: OpaquePointer, at position: Int32) -> Int32 {
        var text = text
        return text.withUTF8 { bytes in
            // An empty text stays text, not NULL: SQLite binds NULL for a null pointer.
            guard let start = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(handle, position, "", 0, csqlite_transient()) }
            return start.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(handle, position, $0, Int32(bytes.count), csqlite_transient())
            }
        }
    }

    private func check(_ rc: Int32) throws {
        guard rc == SQLITE_OK else { throw database.error(code: rc, sql: sql) }
    }

    /// Steps a statement that returns no rows, then resets it.
    public func runBound() throws {
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Advances to the next row; false when the statement is done.
    public func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = database.error(code: rc, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs the statement to completion, ignoring any rows.
    public func run(_ values: [SQLiteBindable] = []) throws {
        try bind(values)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Runs the statement and maps every row.
    public func rows<T>(_ values: [SQLiteBindable] = [], _ map: (Row) throws -> T) throws -> [T] {
        try bind(values)
        defer { sqlite3_reset(handle) }
        var result: [T] = []
        while try step() { result.append(try map(Row(statement: self))) }
        return result
    }

    /// Runs the statement and maps the first row, if any.
    public func firstRow<T>(_ values: [SQLiteBindable] = [], _ map: (Row) throws -> T) throws -> T? {
        try bind(values)
        defer { sqlite3_reset(handle) }
        return try step() ? try map(Row(statement: self)) : nil
    }
}

/// The current row of a statement being stepped. Valid only until the next step.
public struct Row {
    let statement: Statement

    public var columnCount: Int { Int(sqlite3_column_count(statement.handle)) }

    public func isNull(_ column: Int) -> Bool {
        sqlite3_column_type(statement.handle, Int32(column)) == SQLITE_NULL
    }

    public func int(_ column: Int) -> Int { Int(sqlite3_column_int64(statement.handle, Int32(column))) }

    public func optionalInt(_ column: Int) -> Int? { isNull(column) ? nil : int(column) }

    public func double(_ column: Int) -> Double { sqlite3_column_double(statement.handle, Int32(column)) }

    public func string(_ column: Int) -> String {
        guard let text = sqlite3_column_text(statement.handle, Int32(column)) else { return "" }
        let count = Int(sqlite3_column_bytes(statement.handle, Int32(column)))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    public func optionalString(_ column: Int) -> String? { isNull(column) ? nil : string(column) }
}
