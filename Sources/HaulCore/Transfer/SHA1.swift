/// Incremental SHA-1 (FIPS 180-4), for checking downloads against a user's `sha1=`.
///
/// Guarantees: `finalize()` returns the digest of exactly the bytes given to `update`, in order,
/// however they were split. SHA-1 is broken for signatures; here it only checks that a file
/// arrived as the list's author published it.
public struct SHA1: StreamingDigest, BlockDigest {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0)
    var blocks = PendingBlock(size: 64)

    public init() {}

    static let blockSize = 64
    static let lengthBytes = 8
    static let lengthBigEndian = true

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        absorb(bytes)
    }

    /// The digest as 40 lower-case hex digits.
    public mutating func finalize() -> String {
        pad()
        return [state.0, state.1, state.2, state.3, state.4].map(\.paddedHex).joined()
    }

    mutating func compress(_ block: UnsafeRawPointer) {
        var (a, b, c, d, e) = state
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 80) { w in
            for i in 0..<16 {
                w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
            }
            for i in 16..<80 {
                w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotatedLeft(1)
            }
            for i in 0..<80 {
                let mixed: UInt32
                let k: UInt32
                switch i {
                case 0..<20: mixed = (b & c) | (~b & d); k = 0x5a827999
                case 20..<40: mixed = b ^ c ^ d; k = 0x6ed9eba1
                case 40..<60: mixed = (b & c) | (b & d) | (c & d); k = 0x8f1bbcdc
                default: mixed = b ^ c ^ d; k = 0xca62c1d6
                }
                let t = a.rotatedLeft(5) &+ mixed &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, b.rotatedLeft(30), a, t)
            }
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e)
    }
}

extension UInt32 {
    fileprivate func rotatedLeft(_ count: UInt32) -> UInt32 { (self << count) | (self >> (32 - count)) }
}
