/// A URL haul may fetch: scheme http or https, a host, an optional port.
///
/// Parsing is strict and cheap (no Foundation), so a million-line input is checked quickly.
/// Guarantees: `scheme` is `http` or `https`; `hostKey` is the lower-cased `host:port` with the
/// scheme's default port filled in; `redacted` never shows the user-info part.
public struct HTTPURL: Sendable, Equatable {
    public let string: String
    public let scheme: String
    public let port: Int
    /// The path, still percent-encoded, without query or fragment ("" when absent).
    public let path: String
    /// Where the user-info (`user:pass@`) sits in `string`, if there is one.
    let userInfoRange: Range<String.Index>?

    /// Lower-cased `host:port`: the key for per-host caps and pauses.
    public let hostKey: String

    /// The lower-cased host (in brackets for IPv6), without a trailing dot: `hostKey` up to its
    /// last colon.
    public var host: String {
        String(hostKey[..<(hostKey.lastIndex(of: ":") ?? hostKey.endIndex)])
    }

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
        // Parsed in place from the string's own UTF-8 storage: no copy of the text.
        var text = text
        let parts = text.withUTF8 { Self.parts(of: $0) }
        switch parts {
        case .failure(let error): throw error
        case .success(let parts):
            self.string = text
            self.scheme = parts.scheme
            self.port = parts.port
            self.hostKey = parts.hostKey
            self.path = parts.path
            if let userInfo = parts.userInfo {
                let utf8 = text.utf8
                let lower = utf8.index(utf8.startIndex, offsetBy: userInfo.lowerBound)
                let upper = utf8.index(utf8.startIndex, offsetBy: userInfo.upperBound)
                self.userInfoRange = lower..<upper
            } else {
                self.userInfoRange = nil
            }
        }
    }

    /// What `init` takes from the text; `userInfo` in UTF-8 offsets.
    private struct Parts {
        var scheme: String
        var port: Int
        var hostKey: String
        var path: String
        var userInfo: Range<Int>?
    }

    /// Checks and takes apart a URL's UTF-8 bytes.
    private static func parts(of bytes: UnsafeBufferPointer<UInt8>) -> Result<Parts, ParseError> {
        guard !bytes.isEmpty else { return .failure(.invalid("empty")) }
        for byte in bytes where byte <= 0x20 || byte == 0x7F {
            return .failure(.invalid("contains a space or control character"))
        }
        // scheme ":"
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              Self.isAlpha(bytes[0]),
              bytes[..<colon].allSatisfy({ Self.isAlpha($0) || Self.isDigit($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E })
        else { return .failure(.invalid("no scheme (expected http:// or https://)")) }
        let scheme: String
        let defaultPort: Int
        if equalsIgnoringASCIICase(bytes[..<colon], "http") {
            (scheme, defaultPort) = ("http", 80)
        } else if equalsIgnoringASCIICase(bytes[..<colon], "https") {
            (scheme, defaultPort) = ("https", 443)
        } else {
            return .failure(.unsupportedScheme(String(decoding: bytes[..<colon], as: UTF8.self).lowercased()))
        }
        guard bytes.count >= colon + 3, bytes[colon + 1] == 0x2F, bytes[colon + 2] == 0x2F else {
            return .failure(.invalid("expected '//' after '\(scheme):'"))
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
        var hostBytes: Slice<UnsafeBufferPointer<UInt8>>
        var portStart: Int? = nil
        if hostStart < authorityEnd, bytes[hostStart] == UInt8(ascii: "[") {
            guard let close = bytes[hostStart..<authorityEnd].firstIndex(of: UInt8(ascii: "]")) else {
                return .failure(.invalid("unclosed '[' in IPv6 host"))
            }
            let inner = bytes[(hostStart + 1)..<close]
            guard !inner.isEmpty, inner.allSatisfy({ Self.isHexDigit($0) || $0 == 0x3A || $0 == 0x2E }) else {
                return .failure(.invalid("malformed IPv6 address"))
            }
            hostBytes = bytes[hostStart...close]
            if close + 1 < authorityEnd {
                guard bytes[close + 1] == 0x3A else { return .failure(.invalid("unexpected text after IPv6 address")) }
                portStart = close + 2
            }
        } else {
            let hostEnd = bytes[hostStart..<authorityEnd].firstIndex(of: 0x3A) ?? authorityEnd
            hostBytes = bytes[hostStart..<hostEnd]
            guard !hostBytes.isEmpty else { return .failure(.invalid("no host")) }
            for byte in hostBytes where !(Self.isAlpha(byte) || Self.isDigit(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F) {
                if byte >= 0x80 { return .failure(.invalid("non-ASCII host name (write it in its xn-- form)")) }
                return .failure(.invalid("character '\(Character(Unicode.Scalar(byte)))' not allowed in a host name"))
            }
            guard hostBytes.first != 0x2E, hostBytes.last != 0x2E || hostBytes.count > 1 else {
                return .failure(.invalid("malformed host name"))
            }
            if hostEnd < authorityEnd { portStart = hostEnd + 1 }
        }
        var port = defaultPort
        if let portStart {
            let digits = bytes[portStart..<authorityEnd]
            if !digits.isEmpty {
                guard digits.count <= 5, digits.allSatisfy(Self.isDigit) else { return .failure(.invalid("malformed port")) }
                let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                guard value >= 1, value <= 65535 else { return .failure(.invalid("port \(value) out of range 1–65535")) }
                port = value
            }
        }
        if hostBytes.count > 1 && hostBytes.last == 0x2E { hostBytes = hostBytes.dropLast() }
        var pathEnd = authorityEnd
        while pathEnd < bytes.count, bytes[pathEnd] != 0x3F, bytes[pathEnd] != 0x23 { pathEnd += 1 }
        // Every host byte is ASCII (checked above, or hex digits, ':' and '.' in brackets).
        // An IPv4 address in another spelling (127.1, 0x7f.0.0.1, 0177.0.0.1, 2130706433), which
        // libcurl connects to as the same address, shares its dotted-decimal key: its cap.
        let hostKey = Self.ipv4Address(hostBytes).map { $0 + ":" + String(port) } ?? lowercasedASCII(hostBytes, suffix: ":" + String(port))
        return .success(Parts(scheme: scheme, port: port, hostKey: hostKey,
                              path: String(decoding: bytes[authorityEnd..<pathEnd], as: UTF8.self), userInfo: userInfo))
    }

    /// The dotted-decimal form of a host written as an IPv4 address in a form other than that
    /// one (as the WHATWG URL standard and libcurl read them: one to four parts, each decimal,
    /// octal with a leading 0, or hex with 0x; the last part fills the bytes left), or nil: a
    /// name, an address already in dotted decimal (the common case, kept as written), or
    /// something that is neither (left to fail as a name).
    static func ipv4Address(_ host: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        // A name's last label never starts with a digit (a top-level domain is letters): most
        // hosts end here, after a search back to their last dot.
        guard let last = host.last, isDigit(last) || isAlpha(last) else { return nil }
        let lastDot = host.lastIndex(of: 0x2E).map { $0 + 1 } ?? host.startIndex
        guard isDigit(host[lastDot]) else { return nil }
        var parts: [UInt64] = []
        var canonical = true
        for part in host.split(separator: 0x2E, omittingEmptySubsequences: false) {
            guard !part.isEmpty, parts.count < 4 else { return nil }
            var digits = part[...]
            var radix: UInt64 = 10
            if digits.count >= 2, digits.first == 0x30, digits[digits.index(after: digits.startIndex)] | 0x20 == 0x78 {
                radix = 16
                digits = digits.dropFirst(2)
            } else if digits.count >= 2, digits.first == 0x30 {
                radix = 8
                digits = digits.dropFirst()
            }
            if radix != 10 { canonical = false }
            var value: UInt64 = 0
            for byte in digits {
                let digit: UInt64
                if isDigit(byte) { digit = UInt64(byte - 0x30) }
                else if radix == 16, isHexDigit(byte) { digit = UInt64((byte | 0x20) - 0x61 + 10) }
                else { return nil }
                guard digit < radix else { return nil }
                value = value * radix + digit
                guard value <= UInt64(UInt32.max) else { return nil }
            }
            parts.append(value)
        }
        guard let final = parts.last, parts.dropLast().allSatisfy({ $0 <= 255 }),
              final < UInt64(1) << (8 * (5 - parts.count)) else { return nil }
        guard parts.count < 4 || !canonical else { return nil }  // already dotted decimal
        let address = parts.dropLast().enumerated().reduce(final) { sum, part in sum + (part.element << (8 * (3 - part.offset))) }
        return "\(address >> 24).\((address >> 16) & 255).\((address >> 8) & 255).\(address & 255)"
    }

    /// A host or `host:port` as a user types it (`haul list --host 127.1:8080`), keyed as the
    /// queue keys hosts: lower-cased, an IPv4 address in dotted decimal.
    public static func canonicalHost(_ text: String) -> String {
        var text = text.lowercased()
        var port = ""
        if let colon = text.lastIndex(of: ":"), !text.hasPrefix("[") {
            port = String(text[colon...])
            text = String(text[..<colon])
        }
        if text.count > 1, text.hasSuffix(".") { text.removeLast() }
        let address = text.utf8.withContiguousStorageIfAvailable { ipv4Address($0[...]) } ?? nil
        return (address ?? text) + port
    }

    /// Whether `bytes` spell `word` (lower-case ASCII) in any case.
    private static func equalsIgnoringASCIICase(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ word: StaticString) -> Bool {
        guard bytes.count == word.utf8CodeUnitCount else { return false }
        let letters = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        return zip(bytes, letters).allSatisfy { lowercased($0) == $1 }
    }

    /// ASCII bytes lower-cased, then `suffix`, as one string made in one allocation.
    private static func lowercasedASCII(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, suffix: String) -> String {
        let count = bytes.count + suffix.utf8.count
        return String(unsafeUninitializedCapacity: count) { (buffer: UnsafeMutableBufferPointer<UInt8>) -> Int in
            var end = 0
            for byte in bytes {
                buffer[end] = lowercased(byte)
                end += 1
            }
            for byte in suffix.utf8 {
                buffer[end] = byte
                end += 1
            }
            return count
        }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

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
        // Most text has no credentials: without an '@' there is nothing to hide.
        guard text.utf8.contains(UInt8(ascii: "@")) else { return text }
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

    /// A line that could not be read as a URL, as a message may show it: everything from the
    /// scheme's end (`://`, or `:` after a scheme-like word, as in `http:/user:pw@host`) up to
    /// the line's last "@" is hidden. Such a line's user-info may hold a "/", "#" or a space,
    /// where `redact(_:)` ends an authority; a hidden "@" that was no user-info costs a little
    /// of a message, a shown one a password.
    public static func redactRejected(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        var start = text.startIndex
        if let separator = text.range(of: "://"), separator.lowerBound < at {
            start = separator.upperBound
        } else if let colon = text.firstIndex(of: ":"), colon < at,
                  text[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) {
            start = text.index(after: colon)
        }
        return hidingUpToLastAt(text[...], from: start)
    }

    /// `text` with everything from `start` (by default the end of its `://`, else its
    /// beginning) up to its last "@" shown as "***": for text whose user-info may hold what ends
    /// an authority for `redact(_:)` (a space, "/", "#"). Unchanged without an "@" after `start`.
    public static func hidingUpToLastAt(_ text: Substring, from start: Substring.Index? = nil) -> String {
        guard let at = text.lastIndex(of: "@") else { return String(text) }
        let start = start ?? text.range(of: "://")?.upperBound ?? text.startIndex
        return at < start ? String(text) : text[..<start] + "***" + text[at...]
    }

    static func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    static func isHexDigit(_ b: UInt8) -> Bool { isDigit(b) || ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x66) }
}
