/// The ids that inserts into `jobs` hand out, followed through one write transaction.
///
/// `jobs.id` is an `INTEGER PRIMARY KEY` without `AUTOINCREMENT`: SQLite gives each inserted
/// row the largest id in the table plus one, and a row that `OR IGNORE` skips takes none. So the
/// rows one statement inserts have consecutive ids, in the order of its rows, right after the
/// largest id before it — which spares the bulk add a `RETURNING` clause. Only a table whose
/// largest id is 2^63-1 would break this (SQLite then picks ids at random): `take` checks every
/// statement's ids against `sqlite3_last_insert_rowid` and throws rather than guess.
struct JobIDs {
    /// The largest id in the table.
    private(set) var last: Int

    /// - Parameter last: the largest id in the table (0 when it is empty), read in the same
    ///   write transaction as the inserts that follow.
    init(after last: Int) { self.last = last }

    /// The ids of the `count` rows the statement just run inserted, in the order of its rows,
    /// given the connection's last inserted rowid after it.
    mutating func take(_ count: Int, lastInserted: Int, sql: String) throws -> Range<Int> {
        guard count > 0 else { return last..<last }
        guard lastInserted < Int.max, lastInserted - count == last else {
            throw SQLiteError(code: 0, message: "inserted jobs did not get consecutive ids", sql: sql)
        }
        defer { last = lastInserted }
        return (last + 1)..<(lastInserted + 1)
    }
}
