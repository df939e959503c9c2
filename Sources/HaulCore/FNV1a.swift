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
        // The bytes are read in place (`withUTF8`, as `TempFile` and `Statement` read theirs);
        // the generic UTF-8 view walks them one index at a time, several times slower on the
        // paths each download hashes.
        var text = text
        return text.withUTF8 { bytes in
            var hash = hash
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01B3
            }
            return hash
        }
    }
}
