/// A value bound to a statement's `$1`, `$2`… parameter, sent to the server in PostgreSQL's text
/// format (the server reads it as the parameter's type, so cast where it cannot infer one:
/// `$1::bigint`, `$1::text[]`).
///
/// Literals work directly: `try connection.query("SELECT $1::bigint, $2::text, $3::int", [5, "x", nil])`.
/// Arrays are explicit cases: `.ints([1, 2])` for `$1::bigint[]`, `.strings(["a", nil])` for
/// `$1::text[]`.
///
/// Guarantees: every value reaches the server exactly (Int in decimal, Double in the shortest
/// text that reads back to the same bits, Infinity and NaN spelled as PostgreSQL spells them,
/// Bool as `t`/`f`, arrays as array literals with every element double-quoted and `"` and `\`
/// escaped, nil elements as NULL). Text holding a NUL byte cannot be sent: binding one throws a
/// `PostgresError` (kind `.client`) before anything is sent.
public enum PostgresValue: Sendable, Equatable {
    case int(Int)
    case string(String)
    case bool(Bool)
    case double(Double)
    /// SQL NULL.
    case null
    /// A PostgreSQL array of integers (`$1::bigint[]`).
    case ints([Int])
    /// A PostgreSQL array of text, nil elements being NULL (`$1::text[]`).
    case strings([String?])

    /// The value in PostgreSQL's text format; nil for SQL NULL.
    public var text: String? {
        switch self {
        case .int(let value): return String(value)
        case .string(let value): return value
        case .bool(let value): return value ? "t" : "f"
        case .double(let value): return Self.render(value)
        case .null: return nil
        case .ints(let values): return "{" + values.map(String.init).joined(separator: ",") + "}"
        case .strings(let values): return Self.arrayLiteral(values)
        }
    }

    /// A PostgreSQL array literal of text elements: `{"a","b \"c\"",NULL}`.
    public static func arrayLiteral(_ values: [String?]) -> String {
        var literal = "{"
        for (index, value) in values.enumerated() {
            if index > 0 { literal += "," }
            guard let value else {
                literal += "NULL"
                continue
            }
            literal += "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
    }

    static func render(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return "\(value)"
    }
}

extension PostgresValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension PostgresValue {
    /// `.string(value)`, or `.null` when `value` is nil.
    public static func optional(_ value: String?) -> PostgresValue { value.map(PostgresValue.string) ?? .null }
    /// `.int(value)`, or `.null` when `value` is nil.
    public static func optional(_ value: Int?) -> PostgresValue { value.map(PostgresValue.int) ?? .null }
}
