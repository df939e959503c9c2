/// One parsed line of a URL list: `URL [out=RELATIVE/PATH] [sha256=HEX]`.
///
/// Guarantees: a parsed line has an http(s) URL, a destination inside the output folder, and a
/// sha256 (when given) of exactly 64 lower-case hex digits. Anything else is a `Rejection`
/// whose description names the reason.
public struct InputLine: Sendable, Equatable {
    public let url: HTTPURL
    public let destination: String
    public let sha256: String?

    /// What was wrong with a line. The description is what the user reads.
    public enum Rejection: Error, Equatable, CustomStringConvertible, Sendable {
        case tooLong(Int, limit: Int)
        case containsNUL
        case invalidUTF8
        case url(HTTPURL.ParseError)
        case destination(DestinationResolver.Rejection)
        case malformedSHA256(String)
        case unknownOption(String)
        case duplicateOption(String)
        case destinationTaken(byJob: Int, url: String)
        case destinationKeyCollision(byJob: Int)

        public var description: String {
            switch self {
            case .tooLong(let length, let limit): return "line too long (\(length) bytes; the limit is \(limit))"
            case .containsNUL: return "line contains a NUL byte"
            case .invalidUTF8: return "line is not valid UTF-8"
            case .url(let error): return error.description
            case .destination(let error): return error.description
            case .malformedSHA256(let value):
                let shown = value.count > 20 ? String(value.prefix(20)) + "…" : value
                return "malformed sha256 '\(shown)': expected 64 hex digits"
            case .unknownOption(let token):
                let shown = token.count > 40 ? String(token.prefix(40)) + "…" : token
                return "unknown field '\(shown)' (expected out=PATH or sha256=HEX after the URL)"
            case .duplicateOption(let key): return "\(key)= given twice"
            case .destinationTaken(let job, let url): return "destination already taken by job \(job) (\(HTTPURL.redact(url)))"
            case .destinationKeyCollision(let job):
                return "destination's hash collides with job \(job)'s (a one-in-billions chance); give this line another out= name"
            }
        }
    }

    /// Parses one line. Returns nil for blank lines and `#` comments.
    public static func parse(_ bytes: [UInt8], resolver: DestinationResolver) throws(Rejection) -> InputLine? {
        guard !bytes.contains(0) else { throw .containsNUL }
        // Most lines are a URL alone: no fields to split, and the text validated once is the URL.
        if !bytes.isEmpty, !bytes.contains(where: isSeparator) {
            guard bytes[0] != UInt8(ascii: "#") else { return nil }
            guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalidUTF8 }
            let url: HTTPURL
            do { url = try HTTPURL(text) } catch { throw .url(error) }
            do { return InputLine(url: url, destination: try resolver.defaultDestination(for: url), sha256: nil) }
            catch { throw .destination(error) }
        }
        // Split on spaces and tabs at the byte level (both are ASCII, so UTF-8 is split safely).
        let fields = bytes.split(whereSeparator: isSeparator)
        guard let first = fields.first, first.first != UInt8(ascii: "#") else { return nil }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw .invalidUTF8 }
        let url: HTTPURL
        do { url = try HTTPURL(String(decoding: first, as: UTF8.self)) } catch { throw .url(error) }
        var out: String? = nil
        var sha256: String? = nil
        for fieldBytes in fields.dropFirst() {
            if fieldBytes.first == UInt8(ascii: "#") { break }  // trailing comment
            let field = String(decoding: fieldBytes, as: UTF8.self)
            if field.hasPrefix("out=") {
                guard out == nil else { throw .duplicateOption("out") }
                out = String(field.dropFirst(4))
            } else if field.hasPrefix("sha256=") {
                guard sha256 == nil else { throw .duplicateOption("sha256") }
                let value = String(field.dropFirst(7))
                guard value.utf8.count == 64, value.utf8.allSatisfy(HTTPURL.isHexDigit) else { throw .malformedSHA256(value) }
                sha256 = value.lowercased()
            } else {
                throw .unknownOption(field)
            }
        }
        let destination: String
        do throws(DestinationResolver.Rejection) {
            if let out { destination = try resolver.destination(forOutPath: out) }
            else { destination = try resolver.defaultDestination(for: url) }
        } catch { throw .destination(error) }
        return InputLine(url: url, destination: destination, sha256: sha256)
    }

    /// Spaces and tabs separate a line's fields.
    private static func isSeparator(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
}
