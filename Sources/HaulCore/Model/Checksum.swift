/// The digest a download must have to be placed: an algorithm and its value, as the user gave
/// it after a URL (`md5=HEX`, `sha1=`, `sha256=`, `sha512=`) or in an aria2 `checksum=` line.
///
/// Guarantees: `hex` is exactly `algorithm.hexDigits` lower-case hex digits; `description`
/// (`ALGORITHM=HEX`, e.g. `md5=9e10…`) is how it is stored in the jobs table's `checksum` column
/// and shown, and `init(stored:)` reads that text back.
public struct Checksum: Sendable, Hashable, CustomStringConvertible {
    /// The digests haul computes.
    public enum Algorithm: String, Sendable, CaseIterable {
        case md5, sha1, sha256, sha512

        /// The hex digits of its digest.
        public var hexDigits: Int {
            switch self {
            case .md5: return 32
            case .sha1: return 40
            case .sha256: return 64
            case .sha512: return 128
            }
        }

        /// Its name in aria2's `checksum=TYPE=DIGEST` option.
        public var aria2Name: String {
            switch self {
            case .md5: return "md5"
            case .sha1: return "sha-1"
            case .sha256: return "sha-256"
            case .sha512: return "sha-512"
            }
        }

        /// The algorithm aria2 calls `name` (any case), or nil when haul does not compute it.
        public init?(aria2Name name: String) {
            guard let found = Self.allCases.first(where: { $0.aria2Name == name.lowercased() }) else { return nil }
            self = found
        }
    }

    public let algorithm: Algorithm
    /// The digest, as lower-case hex.
    public let hex: String

    /// A checksum from hex digits in either case; nil unless `hex` has exactly
    /// `algorithm.hexDigits` of them and nothing else.
    public init?(_ algorithm: Algorithm, hex: String) {
        guard hex.utf8.count == algorithm.hexDigits, hex.utf8.allSatisfy(HTTPURL.isHexDigit) else { return nil }
        self.algorithm = algorithm
        self.hex = hex.lowercased()
    }

    /// A checksum from its stored text, `ALGORITHM=HEX`; nil when the text is not one.
    public init?(stored text: String) {
        guard let equals = text.firstIndex(of: "="), let algorithm = Algorithm(rawValue: String(text[..<equals])),
              let checksum = Checksum(algorithm, hex: String(text[text.index(after: equals)...])) else { return nil }
        self = checksum
    }

    public var description: String { "\(algorithm.rawValue)=\(hex)" }
}
