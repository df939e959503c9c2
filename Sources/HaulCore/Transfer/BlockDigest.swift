/// What MD5, SHA-1, SHA-256 and SHA-512 share (Merkle–Damgård): bytes are cut into blocks for
/// `compress`, a partial block waits for the next bytes, and the end is padded with 0x80,
/// zeros and the message's length in bits.
///
/// Guarantees: `compress` sees every byte given to `absorb`, in order, in whole blocks,
/// whatever the split; `pad` adds exactly the padding FIPS 180-4 (and RFC 1321, little-endian)
/// prescribe for the length absorbed, and leaves no partial block.
protocol BlockDigest {
    /// 64, or 128 for SHA-512.
    static var blockSize: Int { get }
    /// Bytes of the length at the end: 8, or 16 for SHA-512.
    static var lengthBytes: Int { get }
    /// False for MD5, whose words (the length too) are little-endian.
    static var lengthBigEndian: Bool { get }
    var blocks: PendingBlock { get set }
    mutating func compress(_ block: UnsafeRawPointer)
}

/// The part of a block a digest has been given but not yet compressed, and how much it has
/// been given in all.
struct PendingBlock {
    var buffer: [UInt8]
    var buffered = 0
    var length: UInt64 = 0

    init(size: Int) { buffer = [UInt8](repeating: 0, count: size) }
}

extension BlockDigest {
    mutating func absorb(_ bytes: UnsafeRawBufferPointer) {
        guard var pointer = bytes.baseAddress, bytes.count > 0 else { return }
        let size = Self.blockSize
        var remaining = bytes.count
        blocks.length &+= UInt64(remaining)
        if blocks.buffered > 0 {
            let take = min(size - blocks.buffered, remaining)
            let at = blocks.buffered
            blocks.buffer.withUnsafeMutableBytes { ($0.baseAddress! + at).copyMemory(from: pointer, byteCount: take) }
            blocks.buffered += take
            pointer += take
            remaining -= take
            if blocks.buffered == size {
                let full = blocks.buffer
                full.withUnsafeBytes { compress($0.baseAddress!) }
                blocks.buffered = 0
            }
        }
        while remaining >= size {
            compress(UnsafeRawPointer(pointer))
            pointer += size
            remaining -= size
        }
        if remaining > 0 {
            blocks.buffer.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: pointer, byteCount: remaining) }
            blocks.buffered = remaining
        }
    }

    /// Pads the message (0x80, zeros, its length in bits) so that it ends on a whole block.
    mutating func pad() {
        let size = Self.blockSize
        let room = size - Self.lengthBytes
        var padding: [UInt8] = [0x80]
        let zeros = (blocks.buffered < room ? room - blocks.buffered : size + room - blocks.buffered) - 1
        padding += [UInt8](repeating: 0, count: zeros)
        // The length in bits, as many bytes as the digest keeps (its high bits are what
        // `length * 8` overflows).
        let low = blocks.length &* 8
        let high = blocks.length >> 61
        var lengthBytes: [UInt8] = (0..<8).map { UInt8(truncatingIfNeeded: low >> UInt64(8 * $0)) }  // little-endian
        if Self.lengthBytes == 16 { lengthBytes += (0..<8).map { UInt8(truncatingIfNeeded: high >> UInt64(8 * $0)) } }
        padding += Self.lengthBigEndian ? lengthBytes.reversed() : lengthBytes
        let length = blocks.length
        padding.withUnsafeBytes { absorb($0) }
        blocks.length = length
    }
}
