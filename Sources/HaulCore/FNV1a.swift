/// The 64-bit FNV-1a hash: stable across runs and processes (unlike Swift's `Hasher`), so it
/// can name things on disk and in the database.
public enum FNV1a {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    public static func hash(_ text: String) -> UInt64 {
        hash(text, continuing: offsetBasis)
    }

    /// The hash of the bytes already hashed into `hash` followed by `text`'s UTF-8: the hash of
    /// two texts one after the other, without making their concatenation.
    public static func hash(_ text: String, continuing hash: UInt64) -> UInt64 {
        // A native string's bytes are read in place; the generic UTF-8 view walks them one
        // index at a time, several times slower on the paths each download hashes.
        if let hashed = text.utf8.withContiguousStorageIfAvailable({ Self.hash(bytes: $0, continuing: hash) }) { return hashed }
        var hash = hash
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }

    private static func hash(bytes: UnsafeBufferPointer<UInt8>, continuing hash: UInt64) -> UInt64 {
        var hash = hash
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }
}
