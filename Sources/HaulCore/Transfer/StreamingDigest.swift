/// A hash computed over a body as it arrives, a piece at a time (`MD5`, `SHA1`, `SHA256`,
/// `SHA512`).
///
/// Guarantees: `finalize()` returns the digest of exactly the bytes given to `update`, in order,
/// however they were split, as lower-case hex of `Checksum.Algorithm.hexDigits` digits.
public protocol StreamingDigest: Sendable {
    init()
    mutating func update(_ bytes: UnsafeRawBufferPointer)
    /// The digest, as lower-case hex. Call once: the value is spent afterwards.
    mutating func finalize() -> String
}

extension StreamingDigest {
    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        Array(bytes).withUnsafeBytes { update($0) }
    }
}

extension Checksum.Algorithm {
    /// A new, empty digest of this algorithm.
    public func makeDigest() -> any StreamingDigest {
        switch self {
        case .md5: return MD5()
        case .sha1: return SHA1()
        case .sha256: return SHA256()
        case .sha512: return SHA512()
        }
    }
}

extension FixedWidthInteger where Self: UnsignedInteger {
    /// The word as hex, most significant digit first, zero-padded to its full width.
    var paddedHex: String {
        let hex = String(self, radix: 16)
        return String(repeating: "0", count: bitWidth / 4 - hex.count) + hex
    }
}
