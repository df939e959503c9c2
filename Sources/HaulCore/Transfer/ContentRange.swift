/// A `Content-Range` response header in bytes (RFC 9110 §14.4): which part of the representation
/// a 206 carries, or, with a 416, how long the representation is.
///
/// Guarantees: a value is either a byte range, with `0 <= first <= last < Int64.max` and, when the
/// complete length is known, `last < complete`; or an unsatisfied range (`bytes */N`), with `first`
/// and `last` nil and `complete >= 0`. So `length` and `last + 1` never overflow. `parse` is strict:
/// the unit must be `bytes` (any case) followed by exactly one space, every number plain ASCII
/// digits that fit an `Int64`, nothing else but surrounding spaces, tabs, CR and LF; otherwise `nil`.
public struct ContentRange: Equatable, Sendable {
    /// Offset of the first byte carried; nil for an unsatisfied range.
    public let first: Int64?
    /// Offset of the last byte carried (inclusive); nil for an unsatisfied range.
    public let last: Int64?
    /// Length of the whole representation; nil when the server sent `*`.
    public let complete: Int64?

    /// A range with the invariants above, or nil: pass `first` and `last` together (a byte range) or
    /// neither (unsatisfied, which needs `complete`).
    public init?(first: Int64?, last: Int64?, complete: Int64?) {
        if let complete, complete < 0 { return nil }
        switch (first, last) {
        case let (first?, last?):
            guard first >= 0, first <= last, last < Int64.max else { return nil }
            if let complete, last >= complete { return nil }
        case (nil, nil):
            guard complete != nil else { return nil }
        default:
            return nil
        }
        self.first = first
        self.last = last
        self.complete = complete
    }

    /// Parses `bytes 0-499/1234`, `bytes 0-499/*` or `bytes */1234`.
    public static func parse(_ value: String) -> ContentRange? {
        var bytes = Substring(value).utf8
        while let byte = bytes.first, isSurroundingWhitespace(byte) { bytes.removeFirst() }
        while let byte = bytes.last, isSurroundingWhitespace(byte) { bytes.removeLast() }

        // Range unit names are case-insensitive (RFC 9110 §14.1); exactly one SP follows.
        let unit = "bytes ".utf8
        guard bytes.count > unit.count,
              zip(bytes, unit).allSatisfy({ asciiLowercased($0) == $1 })
        else { return nil }
        let rest = bytes.dropFirst(unit.count)

        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let range = rest[..<slash]
        let completeText = rest[rest.index(after: slash)...]
        let complete: Int64?
        if completeText.elementsEqual("*".utf8) {
            complete = nil
        } else {
            guard let number = nonNegativeInteger(completeText) else { return nil }
            complete = number
        }

        if range.elementsEqual("*".utf8) {
            return ContentRange(first: nil, last: nil, complete: complete)
        }
        guard let hyphen = range.firstIndex(of: UInt8(ascii: "-")),
              let first = nonNegativeInteger(range[..<hyphen]),
              let last = nonNegativeInteger(range[range.index(after: hyphen)...])
        else { return nil }
        return ContentRange(first: first, last: last, complete: complete)
    }

    /// `last - first + 1`, or nil for an unsatisfied range.
    public var length: Int64? {
        guard let first, let last else { return nil }
        return last - first + 1
    }

    /// True for `bytes */N`, which comes with 416 Range Not Satisfiable.
    public var isUnsatisfied: Bool { first == nil }

    /// The header as a server would send it, e.g. `bytes 0-499/1234`.
    public var headerValue: String {
        let completeText = complete.map { "\($0)" } ?? "*"
        guard let first, let last else { return "bytes */\(completeText)" }
        return "bytes \(first)-\(last)/\(completeText)"
    }

    /// One or more ASCII digits whose value fits an `Int64`.
    private static func nonNegativeInteger(_ digits: Substring.UTF8View) -> Int64? {
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = shifted.addingReportingOverflow(Int64(byte - 0x30))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        return value
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    private static func isSurroundingWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }
}
