/// The rows a query returned, copied out of libpq's result (which is freed at once), in text
/// format.
///
/// Guarantees: a value type holding plain Swift strings, so it may outlive the connection and
/// cross threads; values are in one flat array (row-major), no per-row allocation beyond the
/// strings themselves.
public struct PostgresRows: RandomAccessCollection, Sendable {
    /// The result's column names, in order.
    public let columns: [String]
    /// Every value, row after row; nil for SQL NULL.
    let values: [String?]

    init(columns: [String], values: [String?]) {
        self.columns = columns
        self.values = values
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : values.count / columns.count }

    public subscript(position: Int) -> PostgresRow {
        precondition(position >= startIndex && position < endIndex, "row \(position) out of range 0..<\(endIndex)")
        let start = position * columns.count
        return PostgresRow(columns: columns, values: values[start..<start + columns.count])
    }
}

/// One row of a `PostgresRows`, read by column number (from 0).
///
/// Guarantees: the non-optional accessors trap (naming the column, never its value) when the
/// value is NULL or not of the asked type — that is a mismatch between the SQL and the code, not
/// bad data; use the `optional…` accessors for columns that may be NULL.
public struct PostgresRow: Sendable {
    public let columns: [String]
    let values: ArraySlice<String?>

    public var count: Int { values.count }

    /// The raw text of column `column`; nil for SQL NULL.
    public subscript(column: Int) -> String? {
        precondition(column >= 0 && column < values.count, "column \(column) out of range 0..<\(values.count)")
        return values[values.startIndex + column]
    }

    public func optionalString(_ column: Int) -> String? { self[column] }

    public func string(_ column: Int) -> String {
        guard let text = self[column] else { mismatch(column, "text", "is NULL") }
        return text
    }

    public func optionalInt(_ column: Int) -> Int? {
        guard let text = self[column] else { return nil }
        guard let value = Int(text) else { mismatch(column, "an integer", "is not one") }
        return value
    }

    public func int(_ column: Int) -> Int {
        guard let value = optionalInt(column) else { mismatch(column, "an integer", "is NULL") }
        return value
    }

    /// PostgreSQL's text form of a boolean: `t` or `f`.
    public func optionalBool(_ column: Int) -> Bool? {
        switch self[column] {
        case nil: return nil
        case "t": return true
        case "f": return false
        default: mismatch(column, "a boolean (t or f)", "is not one")
        }
    }

    public func bool(_ column: Int) -> Bool {
        guard let value = optionalBool(column) else { mismatch(column, "a boolean", "is NULL") }
        return value
    }

    public func optionalDouble(_ column: Int) -> Double? {
        guard let text = self[column] else { return nil }
        guard let value = Double(text) else { mismatch(column, "a number", "is not one") }
        return value
    }

    public func double(_ column: Int) -> Double {
        guard let value = optionalDouble(column) else { mismatch(column, "a number", "is NULL") }
        return value
    }

    private func mismatch(_ column: Int, _ wanted: String, _ problem: String) -> Never {
        let name = column < columns.count ? " (\(columns[column]))" : ""
        preconditionFailure("PostgreSQL column \(column)\(name) was read as \(wanted) but \(problem)")
    }
}
