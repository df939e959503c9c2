/// A URL haul may fetch: scheme http or https, a host, an optional port.
///
/// Parsing is strict and cheap (no Foundation), so a million-line input is checked quickly.
/// Guarantees: `scheme` is `http` or `https`; `hostKey` is the lower-cased `host:port` with the
/// scheme's default port filled in; `redacted` never shows the user-info part.
public struct HTTPURL: Sendable, Equatable {
    public let string: String
    public let scheme: String
    public let host: String
    public let port: Int
    /// The path, still percent-encoded, without query or fragment ("" when absent).
    public let path: String
    /// Where the user-info (`user:pass@`) sits in `string`, if there is one.
    let userInfoRange: Range<String.Index>?

    /// Lower-cased `host:port`: the key for per-host caps and pauses.
    public let hostKey: String

    public enum ParseError: Error, Equatable, CustomStringConvertible, Sendable {
        case invalid(String)
        case unsupportedScheme(String)

        public var description: String {
            switch self {
            case .invalid(let why): return "invalid URL: \(why)"
            case .unsupportedScheme(let scheme): return "unsupported scheme '\(scheme)': only http and https are fetched"
            }
        }
    }

    public init(_ text: String) throws(ParseError) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { throw .invalid("empty") }
        for byte in bytes where byte <= 0x20 || byte == 0x7F {
            throw .invalid("contains a space or control character")
        }
        // scheme ":"
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              Self.isAlpha(bytes[0]),
              bytes[..<colon].allSatisfy({ Self.isAlpha($0) || Self.isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E })
        else { throw .invalid("no scheme (expected http:// or https://)") }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        let defaultPort: Int
        switch scheme {
        case "http": defaultPort = 80
        case "https": defaultPort = 443
        default: throw .unsupportedScheme(scheme)
        }
        guard bytes.count >= colon + 3, bytes[colon + 1] == 0x2F, bytes[colon + 2] == 0x2F else {
            throw .invalid("expected '//' after '\(scheme):'")
        }
        let authorityStart = colon + 3
        var authorityEnd = authorityStart
        while authorityEnd < bytes.count, bytes[authorityEnd] != 0x2F, bytes[authorityEnd] != 0x3F, bytes[authorityEnd] != 0x23 {
            authorityEnd += 1
        }
        var hostStart = authorityStart
        var userInfo: Range<Int>? = nil
        if let at = bytes[authorityStart..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) {
            userInfo = authorityStart..<(at + 1)
            hostStart = at + 1
        }
        var host: String
        var portStart: Int? = nil
        if hostStart < authorityEnd, bytes[hostStart] == UInt8(ascii: "[") {
            guard let close = bytes[hostStart..<authorityEnd].firstIndex(of: UInt8(ascii: "]")) else {
                throw .invalid("unclosed '[' in IPv6 host")
            }
            let inner = bytes[(hostStart + 1)..<close]
            guard !inner.isEmpty, inner.allSatisfy({ Self.isHexDigit($0) || $0 == 0x3A || $0 == 0x2E }) else {
                throw .invalid("malformed IPv6 address")
            }
            host = String(decoding: bytes[hostStart...close], as: UTF8.self).lowercased()
            if close + 1 < authorityEnd {
                guard bytes[close + 1] == 0x3A else { throw .invalid("unexpected text after IPv6 address") }
                portStart = close + 2
            }
        } else {
            let hostEnd = bytes[hostStart..<authorityEnd].firstIndex(of: 0x3A) ?? authorityEnd
            let hostBytes = bytes[hostStart..<hostEnd]
            guard !hostBytes.isEmpty else { throw .invalid("no host") }
            for byte in hostBytes where !(Self.isAlpha(byte) || Self.isDigit(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F) {
                if byte >= 0x80 { throw .invalid("non-ASCII host name (write it in its xn-- form)") }
                throw .invalid("character '\(Character(Unicode.Scalar(byte)))' not allowed in a host name")
            }
            guard hostBytes.first != 0x2E, hostBytes.last != 0x2E || hostBytes.count > 1 else { throw .invalid("malformed host name") }
            host = String(decoding: hostBytes, as: UTF8.self).lowercased()
            if hostEnd < authorityEnd { portStart = hostEnd + 1 }
        }
        var port = defaultPort
        if let portStart {
            let digits = bytes[portStart..<authorityEnd]
            if !digits.isEmpty {
                guard digits.count <= 5, digits.allSatisfy(Self.isDigit) else { throw .invalid("malformed port") }
                let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                guard value >= 1, value <= 65535 else { throw .invalid("port \(value) out of range 1–65535") }
                port = value
            }
        }
        if host.hasSuffix(".") && host.count > 1 { host.removeLast() }
        var pathEnd = authorityEnd
        while pathEnd < bytes.count, bytes[pathEnd] != 0x3F, bytes[pathEnd] != 0x23 { pathEnd += 1 }
        self.string = text
        self.scheme = scheme
        self.host = host
        self.port = port
        self.hostKey = "\(host):\(port)"
        self.path = String(decoding: bytes[authorityEnd..<pathEnd], as: UTF8.self)
        if let userInfo {
            let utf8 = text.utf8
            let lower = utf8.index(utf8.startIndex, offsetBy: userInfo.lowerBound)
            let upper = utf8.index(utf8.startIndex, offsetBy: userInfo.upperBound)
            self.userInfoRange = lower..<upper
        } else {
            self.userInfoRange = nil
        }
    }

    /// The URL with any `user:password@` replaced by `***@`, safe to print or log.
    public var redacted: String {
        guard let userInfoRange else { return string }
        var copy = string
        copy.replaceSubrange(userInfoRange, with: "***@")
        return copy
    }

    /// Redacts the user-info of every `scheme://user:pass@host…` in the text, whatever its
    /// scheme; other text is returned as is.
    public static func redact(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let separator = rest.range(of: "://") {
            result += rest[..<separator.upperBound]
            rest = rest[separator.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" && !$0.isWhitespace }
            if let at = authority.lastIndex(of: "@") {
                result += "***@"
                rest = rest[rest.index(after: at)...]
            }
        }
        return result + rest
    }

    static func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    static func isHexDigit(_ b: UInt8) -> Bool { isDigit(b) || ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x66) }
}
