/// A hash computed over a body as it arrives, a piece at a time (`OpenSSLDigest`).
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
        OpenSSLDigest(self)
    }
}
