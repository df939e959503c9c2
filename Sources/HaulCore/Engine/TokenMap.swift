/// A dictionary keyed by lease token, for the engine's per-file maps (transfers, files prepared
/// ahead, verified files, files being placed).
///
/// A token is hashed by its first eight bytes and its length, not through SipHash over every
/// byte: the engine looks a file's token up about two dozen times on libcurl's thread, and hashing
/// 15-byte strings cost about 6,000 instructions a file there (callgrind, workload A). Lookups
/// still compare whole tokens, so two tokens that share their first bytes are told apart.
///
/// Guarantees:
/// - behaves as `[String: Value]` for the operations it has (lookup, update in place, removal,
///   iteration, count); only the cost of hashing differs;
/// - a token's hash depends on its bytes alone (haul's tokens are random: see
///   `JobQueue.newToken`); a map of tokens made to collide is correct but slower;
/// - tokens are ASCII (the stores make them from an ASCII alphabet, or hex), asserted in debug
///   builds: for ASCII texts, String's equality is byte equality, so the hash agrees with it.
struct TokenMap<Value> {
    private var storage: [TokenKey: Value] = [:]

    init() {}

    subscript(token: String) -> Value? {
        get { storage[TokenKey(token)] }
        set { storage[TokenKey(token)] = newValue }
        _modify { yield &storage[TokenKey(token)] }
    }

    @discardableResult
    mutating func removeValue(forKey token: String) -> Value? {
        storage.removeValue(forKey: TokenKey(token))
    }

    mutating func removeAll() { storage.removeAll() }

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    var keys: [String] { storage.keys.map(\.token) }
    var values: Dictionary<TokenKey, Value>.Values { storage.values }
}

extension TokenMap: Sequence {
    struct Iterator: IteratorProtocol {
        fileprivate var inner: Dictionary<TokenKey, Value>.Iterator

        mutating func next() -> (key: String, value: Value)? {
            guard let (key, value) = inner.next() else { return nil }
            return (key: key.token, value: value)
        }
    }

    func makeIterator() -> Iterator { Iterator(inner: storage.makeIterator()) }
}

/// A lease token as a dictionary key (see `TokenMap`).
struct TokenKey: Hashable {
    let token: String

    init(_ token: String) {
        assert(token.utf8.allSatisfy { $0 < 0x80 }, "lease tokens are ASCII: \(token)")
        self.token = token
    }

    /// String's `==`, which for ASCII texts is byte equality, as the hash reads them (a
    /// non-ASCII text could equal another canonically and hash apart: tokens are ASCII, see
    /// `init`). Comparing the bytes themselves cost about 3,500 instructions a file more.
    static func == (a: TokenKey, b: TokenKey) -> Bool { a.token == b.token }

    func hash(into hasher: inout Hasher) {
        hasher.combine(bits)
    }

    /// Hashable's raw hash, computed without a Hasher: the token's first eight bytes (random in
    /// haul's tokens), its length, and the seed, mixed by a multiply. Dictionary takes its
    /// buckets from this value.
    func _rawHashValue(seed: Int) -> Int {
        var mixed = bits ^ UInt64(UInt(bitPattern: seed))
        mixed = (mixed ^ (mixed &>> 31)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed ^ (mixed &>> 29))
    }

    /// The first eight bytes of the token's UTF-8 (fewer for a shorter token) and its length,
    /// read in place (a string whose bytes are not contiguous is copied first).
    private var bits: UInt64 {
        token.utf8.withContiguousStorageIfAvailable(Self.bits) ?? Array(token.utf8).withUnsafeBufferPointer(Self.bits)
    }

    private static func bits(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var value = UInt64(truncatingIfNeeded: bytes.count) &<< 56
        for index in 0..<min(8, bytes.count) {
            value ^= UInt64(bytes[index]) &<< (UInt64(index) &* 7)
        }
        return value
    }
}
