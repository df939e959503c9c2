import CSQLite

// Binding for bulk inserts: text straight from a caller's buffer, without SQLite's copy.
extension Statement {
    /// Binds `count` UTF-8 bytes at `start` as text, without copying them (`SQLITE_STATIC`).
    ///
    /// The bytes must stay valid and unchanged until the statement is stepped to completion and
    /// reset with `reset()` (which also clears this binding) or bound again at `position`.
    func bindStatic(text start: UnsafePointer<UInt8>, count: Int, at position: Int32) throws {
        let rc = start.withMemoryRebound(to: CChar.self, capacity: max(count, 1)) {
            sqlite3_bind_text(handle, position, $0, Int32(count), nil)  // nil: SQLITE_STATIC
        }
        guard rc == SQLITE_OK else { throw database.error(code: rc, sql: sql) }
    }

    func bindNull(at position: Int32) throws {
        let rc = sqlite3_bind_null(handle, position)
        guard rc == SQLITE_OK else { throw database.error(code: rc, sql: sql) }
    }

    /// Resets the statement so it can run again, keeping its bindings.
    func rewind() {
        sqlite3_reset(handle)
    }
}
