import Foundation

/// One parsed line of a URL list: `URL [out=RELATIVE/PATH] [md5=|sha1=|sha256=|sha512=HEX]`.
///
/// Guarantees: a parsed line has an http(s) URL, a destination inside the output folder, and at
/// most one checksum (a `Checksum`: the right number of lower-case hex digits for its
/// algorithm). Anything else is a `Rejection` whose description names the reason.
public struct InputLine: Sendable, Equatable {
    public let url: HTTPURL
    public let destination: String
    public let checksum: Checksum?
    /// True when the destination was made from the URL (no `out=` given): then a name another
    /// URL already holds gives way to a suffixed one (see `JobQueue.add`), where an `out=` is
    /// rejected.
    public var namedByURL = false

    /// What was wrong with a line. The description is what the user reads.
    public enum Rejection: Error, Equatable, CustomStringConvertible, Sendable {
        case tooLong(Int, limit: Int)
        case containsNUL
        case invalidUTF8
        case url(HTTPURL.ParseError)
        case destination(DestinationResolver.Rejection)
        /// A checksum's value is not its algorithm's number of hex digits (the value; the
        /// line of the aria2 option that gave it, nil when it followed the URL).
        case malformedChecksum(Checksum.Algorithm, String, line: Int?)
        /// A second checksum for one URL (the second's line when an aria2 option gave it).
        case duplicateChecksum(first: Checksum.Algorithm, second: Checksum.Algorithm, line: Int?)
        case unknownOption(String)
        case duplicateOption(String)
        case destinationTaken(byJob: Int, url: String)
        case destinationKeyCollision(byJob: Int)
        /// The job holding this URL and destination has another checksum (that job, its checksum).
        case checksumConflict(byJob: Int, held: String)
        /// The job holding this URL and destination has no checksum, and has started: the one on
        /// this line would not be checked (that job, its state).
        case checksumTooLate(byJob: Int, state: JobState)
        /// An aria2 option line haul does not take (its line number, the option).
        case unsupportedAria2Option(line: Int, String)
        /// An aria2 `checksum=TYPE=…` of a type haul does not compute (its line number, TYPE).
        case unsupportedAria2Checksum(line: Int, String)
        /// An aria2 option line that cannot be read (its line number, key, and why).
        case unreadableAria2Option(line: Int, String, String)
        /// An indented aria2 option line with no URL line before it.
        case aria2OptionWithoutURL
        /// More indented aria2 option lines under one URL than any URL haul takes could need
        /// (the first one past the limit's line; the limit).
        case tooManyAria2Options(line: Int, limit: Int)
        /// `dir=` naming a folder outside the output folder.
        case aria2FolderOutside(String)

        public var description: String {
            switch self {
            case .tooLong(let length, let limit): return "line too long (\(length) bytes; the limit is \(limit))"
            case .containsNUL: return "line contains a NUL byte"
            case .invalidUTF8: return "line is not valid UTF-8"
            case .url(let error): return error.description
            case .destination(let error): return error.description
            case .malformedChecksum(let algorithm, let value, let line):
                let shown = value.count > 20 ? String(value.prefix(20)) + "…" : value
                var text = "malformed \(algorithm.rawValue) '\(shown)'\(line.map { " (checksum= on line \($0))" } ?? ""): expected \(algorithm.hexDigits) hex digits"
                if !value.utf8.allSatisfy(HTTPURL.isHexDigit) {
                    text += ", found a character that is not one (0-9, a-f)"
                } else {
                    text += ", found \(value.utf8.count)"
                    if let other = Checksum.Algorithm.allCases.first(where: { $0.hexDigits == value.utf8.count }) {
                        text += " (the length of a \(other.rawValue): give it as \(other.rawValue)=)"
                    }
                }
                return text
            case .duplicateChecksum(let first, let second, let line):
                let place = line.map { " (checksum= on line \($0))" } ?? ""
                return first == second
                    ? "\(second.rawValue)= given twice\(place)"
                    : "a second checksum, \(second.rawValue)=\(place), after \(first.rawValue)=: haul checks one per URL; keep one"
            case .unknownOption(let token):
                let shown = token.count > 40 ? String(token.prefix(40)) + "…" : token
                return "unknown field '\(shown)' (expected out=PATH, or one checksum: md5=, sha1=, sha256= or sha512=HEX, after the URL)"
            case .duplicateOption(let key): return "\(key)= given twice"
            case .destinationTaken(let job, let url): return "destination already taken by job \(job) (\(HTTPURL.redact(url)))"
            case .unsupportedAria2Option(let line, let key):
                return "aria2 option '\(key)' on line \(line) is not supported (haul takes out=, dir= and checksum=); the URL is not queued"
            case .unsupportedAria2Checksum(let line, let type):
                let shown = type.count > 20 ? String(type.prefix(20)) + "…" : type
                let known = Checksum.Algorithm.allCases.map(\.aria2Name).joined(separator: ", ")
                return "checksum type '\(shown)' on line \(line) is not supported (haul checks \(known)); the URL is not queued"
            case .unreadableAria2Option(let line, let key, let problem):
                return "aria2 option '\(key)' on line \(line) cannot be read: \(problem); the URL is not queued"
            case .aria2OptionWithoutURL:
                return "indented option line (aria2 format) with no URL line right before it"
            case .tooManyAria2Options(let line, let limit):
                return "more than \(limit) aria2 option lines under one URL (the next on line \(line)); haul takes out=, dir= and checksum=, "
                    + "each once; the URL is not queued"
            case .aria2FolderOutside(let folder):
                return "dir=\(folder) is outside the output folder: haul keeps every file inside it (-d); give dir= relative to it"
            case .destinationKeyCollision(let job):
                return "destination's hash collides with job \(job)'s (a one-in-billions chance); give this line another out= name"
            case .checksumConflict(let job, let held):
                let shown = held.count > 28 ? String(held.prefix(28)) + "…" : held
                return "job \(job) already fetches this URL to this destination with another checksum (\(shown)): haul checks one per file; keep one"
            case .checksumTooLate(let job, let state):
                let when = state == .done ? "was fetched" : "is being fetched"
                return "job \(job) \(when) without a checksum, so this line's is not checked: a checksum has to be queued before its job starts"
            }
        }
    }

    /// One indented option line of aria2c's input format (`  out=NAME`), with its line number.
    public struct Aria2Option: Sendable, Equatable {
        public let line: Int
        public let key: String
        public let value: String
        /// Why the line cannot be read as an option (its value not valid UTF-8, or holding a NUL
        /// or another control character): it refuses its URL rather than being dropped.
        public var problem: String? = nil
    }

    /// An aria2 option line as an error may show it: the value of an option that may hold a
    /// secret (http-passwd, header, …) hidden.
    static func shown(_ option: Aria2Option, _ bytes: [UInt8]) -> String {
        let secret = ["passwd", "password", "user", "header", "cookie", "token", "auth"].contains { option.key.contains($0) }
        return secret ? "  \(option.key)=…" : String(decoding: bytes, as: UTF8.self)
    }

    /// The aria2 option on an indented line (`  dir=/data`, `\tchecksum=sha-256=…`), or nil when
    /// the line is not one (not indented, a comment, a URL, no `key=`). A key is letters, digits
    /// and `-` (aria2's are lower-case: another refuses its URL as unsupported); a value that is
    /// not valid UTF-8 or holds a control character gives an option with a `problem`.
    public static func aria2Option(_ bytes: [UInt8], line: Int) -> Aria2Option? {
        guard let first = bytes.first, isSeparator(first) else { return nil }
        let text = bytes.drop(while: isSeparator)
        guard let equals = text.firstIndex(of: UInt8(ascii: "=")), equals > text.startIndex,
              isOptionKey(text[text.startIndex..<equals])
        else { return nil }
        let key = String(decoding: text[text.startIndex..<equals], as: UTF8.self)
        let rawValue = text[(equals + 1)...]
        guard let value = String(validating: rawValue, as: UTF8.self) else {
            return Aria2Option(line: line, key: key, value: "", problem: "its value is not valid UTF-8")
        }
        if rawValue.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }) {
            return Aria2Option(line: line, key: key, value: "", problem: rawValue.contains(0) ? "its value holds a NUL byte" : "its value holds a control character")
        }
        var end = value.endIndex
        while end > value.startIndex, value[value.index(before: end)] == " " || value[value.index(before: end)] == "\t" {
            end = value.index(before: end)
        }
        return Aria2Option(line: line, key: key, value: String(value[..<end]))
    }

    /// Whether `bytes` can be an option's key (before its `=`): letters of either case, digits
    /// and `-`.
    static func isOptionKey(_ bytes: some Sequence<UInt8>) -> Bool {
        bytes.allSatisfy { (0x61...0x7A).contains($0 | 0x20) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }

    /// Parses one line, with the aria2 option lines that followed it. Returns nil for blank lines
    /// and `#` comments. Of aria2's options, `out=` names the file, `dir=` a folder for it inside
    /// the output folder, `checksum=TYPE=HEX` its checksum (TYPE md5, sha-1, sha-256 or sha-512);
    /// any other refuses the whole record.
    public static func parse(_ bytes: [UInt8], resolver: DestinationResolver,
                             aria2: [Aria2Option] = []) throws(Rejection) -> InputLine? {
        guard !bytes.contains(0) else { throw .containsNUL }
        // Most lines are a URL alone: no fields to split, and the text validated once is the URL.
        if aria2.isEmpty, !bytes.isEmpty, !bytes.contains(where: isSeparator) {
            guard bytes[0] != UInt8(ascii: "#") else { return nil }
            guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalidUTF8 }
            let url: HTTPURL
            do { url = try HTTPURL(text) } catch { throw .url(error) }
            do { return InputLine(url: url, destination: try resolver.defaultDestination(for: url), checksum: nil, namedByURL: true) }
            catch { throw .destination(error) }
        }
        // Split on spaces and tabs at the byte level (both are ASCII, so UTF-8 is split safely).
        let fields = bytes.split(whereSeparator: isSeparator)
        guard let first = fields.first, first.first != UInt8(ascii: "#") else { return nil }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw .invalidUTF8 }
        let url: HTTPURL
        do { url = try HTTPURL(String(decoding: first, as: UTF8.self)) } catch { throw .url(error) }
        var out: String? = nil
        var checksum: Checksum? = nil
        /// Takes the line's one checksum (`line`: the aria2 option line that gave it).
        func take(_ algorithm: Checksum.Algorithm, _ value: String, line: Int?) throws(Rejection) {
            if let checksum { throw .duplicateChecksum(first: checksum.algorithm, second: algorithm, line: line) }
            guard let parsed = Checksum(algorithm, hex: value) else { throw .malformedChecksum(algorithm, value, line: line) }
            checksum = parsed
        }
        for fieldBytes in fields.dropFirst() {
            if fieldBytes.first == UInt8(ascii: "#") { break }  // trailing comment
            let field = String(decoding: fieldBytes, as: UTF8.self)
            if field.hasPrefix("out=") {
                guard out == nil else { throw .duplicateOption("out") }
                out = String(field.dropFirst(4))
            } else if let equals = field.firstIndex(of: "="),
                      let algorithm = Checksum.Algorithm(rawValue: String(field[..<equals])) {
                try take(algorithm, String(field[field.index(after: equals)...]), line: nil)
            } else {
                throw .unknownOption(field)
            }
        }
        var folder: String? = nil
        for option in aria2 {
            if let problem = option.problem { throw .unreadableAria2Option(line: option.line, option.key, problem) }
            switch option.key {
            case "out":
                guard out == nil else { throw .duplicateOption("out") }
                out = option.value
            case "dir":
                guard folder == nil else { throw .duplicateOption("dir") }
                folder = option.value
            case "checksum":
                // aria2's TYPE=DIGEST, TYPE in any case.
                let type = String(option.value.prefix { $0 != "=" })
                guard let algorithm = Checksum.Algorithm(aria2Name: type) else {
                    throw .unsupportedAria2Checksum(line: option.line, type)
                }
                try take(algorithm, String(option.value.dropFirst(type.count + 1)), line: option.line)
            default:
                throw .unsupportedAria2Option(line: option.line, option.key)
            }
        }
        let destination: String
        do throws(DestinationResolver.Rejection) {
            if let folder {
                // dir= is a folder inside the output folder.
                guard !folder.hasPrefix("/") else { throw DestinationResolver.Rejection.absoluteOutPath }
                let name: String
                if let out { name = out } else { name = (try resolver.defaultDestination(for: url) as NSString).lastPathComponent }
                destination = try resolver.destination(forOutPath: folder + "/" + name)
            } else if let out {
                destination = try resolver.destination(forOutPath: out)
            } else {
                destination = try resolver.defaultDestination(for: url)
            }
        } catch {
            if let folder, folder.hasPrefix("/") { throw .aria2FolderOutside(folder) }
            throw .destination(error)
        }
        return InputLine(url: url, destination: destination, checksum: checksum, namedByURL: out == nil)
    }

    /// A line `parse` skips: only spaces and tabs, or a `#` comment.
    public static func isBlankOrComment(_ bytes: [UInt8]) -> Bool {
        guard let first = bytes.first(where: { !isSeparator($0) }) else { return true }
        return first == UInt8(ascii: "#")
    }

    /// Spaces and tabs separate a line's fields.
    private static func isSeparator(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
}
