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
        // Built as UTF-8 bytes: a bulk add sends arrays of thousands of URLs, and appending to a
        // String scalar by scalar took 2.7 s of the 4.2 s of CPU haul spent adding 1,000,000.
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(values.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            guard var value else {
                bytes.append(contentsOf: "NULL".utf8)
                continue
            }
            bytes.append(UInt8(ascii: "\""))
            value.withUTF8 { utf8 in
                for byte in utf8 {
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                    bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
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
