/// The 64-bit FNV-1a hash: stable across runs and processes (unlike Swift's `Hasher`), so it
/// can name things on disk and in the database.
public enum FNV1a {
    public static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }
}
