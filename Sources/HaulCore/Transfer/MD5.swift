/// Incremental MD5 (RFC 1321), for checking downloads against a user's `md5=`.
///
/// Guarantees: `finalize()` returns the digest of exactly the bytes given to `update`, in order,
/// however they were split. MD5 is broken for signatures; here it only checks that a file
/// arrived as the list's author published it, which is what an md5 in a list is for.
public struct MD5: StreamingDigest, BlockDigest {
    private var state: (UInt32, UInt32, UInt32, UInt32) = (0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476)
    var blocks = PendingBlock(size: 64)

    public init() {}

    static let blockSize = 64
    static let lengthBytes = 8
    static let lengthBigEndian = false

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        absorb(bytes)
    }

    /// The digest as 32 lower-case hex digits.
    public mutating func finalize() -> String {
        pad()
        return [state.0, state.1, state.2, state.3].map { $0.byteSwapped.paddedHex }.joined()
    }

    /// floor(abs(sin(i + 1)) × 2^32), RFC 1321 §3.4.
    private static let k: [UInt32] = [
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
    ]

    /// The left rotations of each step, four per round.
    private static let shifts: [UInt32] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21]

    mutating func compress(_ block: UnsafeRawPointer) {
        var (a, b, c, d) = state
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { m in
            Self.k.withUnsafeBufferPointer { k in
                Self.shifts.withUnsafeBufferPointer { shifts in
                    for i in 0..<16 {
                        m[i] = UInt32(littleEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
                    }
                    for i in 0..<64 {
                        let mixed: UInt32
                        let word: Int
                        switch i >> 4 {
                        case 0: mixed = (b & c) | (~b & d); word = i
                        case 1: mixed = (d & b) | (~d & c); word = (5 &* i &+ 1) & 15
                        case 2: mixed = b ^ c ^ d; word = (3 &* i &+ 5) & 15
                        default: mixed = c ^ (b | ~d); word = (7 &* i) & 15
                        }
                        let sum = a &+ mixed &+ k[i] &+ m[word]
                        (a, b, c, d) = (d, b &+ sum.rotatedLeft(shifts[(i >> 4) << 2 | (i & 3)]), b, c)
                    }
                }
            }
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
    }
}

extension UInt32 {
    fileprivate func rotatedLeft(_ count: UInt32) -> UInt32 { (self << count) | (self >> (32 - count)) }
}
